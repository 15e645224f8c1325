/* Frame encoding and decoding: round trips, partial input, malformed headers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "common/limits.h"
#include "common/proto.h"

static void test_roundtrip(void **state)
{
        struct buf b = BUF_INIT;
        struct frame f;
        assert_int_equal(frame_append(&b, FRAME_STDOUT, 7, "a\0b\n", 4), 0);
        assert_int_equal(b.len, 16);
        for (size_t i = 0; i < b.len; i++)
                assert_int_equal(frame_decode((uint8_t *)b.data, i, &f), 0);
        assert_int_equal(frame_decode((uint8_t *)b.data, b.len, &f), 16);
        assert_int_equal(f.type, FRAME_STDOUT);
        assert_int_equal(f.stream, 7);
        assert_int_equal(f.len, 4);
        assert_memory_equal(f.payload, "a\0b\n", 4);
        buf_free(&b);
}

static void test_malformed(void **state)
{
        uint8_t h[12];
        struct frame f;
        frame_header_pack(h, 0, 1, 0);
        assert_int_equal(frame_decode(h, 12, &f), -EPROTO);
        frame_header_pack(h, _FRAME_TYPE_MAX, 1, 0);
        assert_int_equal(frame_decode(h, 12, &f), -EPROTO);
        /* a type without a name (reserved) is unknown too */
        for (unsigned t = 1; t < _FRAME_TYPE_MAX; t++) {
                frame_header_pack(h, (uint8_t)t, 1, 0);
                if (strcmp(frame_type_name((uint8_t)t), "UNKNOWN") == 0)
                        assert_int_equal(frame_decode(h, 12, &f), -EPROTO);
                else
                        assert_int_equal(frame_decode(h, 12, &f), 12);
        }
        assert_string_equal(frame_type_name(FRAME_PTY), "PTY");
        frame_header_pack(h, FRAME_DATA, 1, CELLA_FRAME_MAX + 1);
        assert_int_equal(frame_decode(h, 12, &f), -EPROTO);
        frame_header_pack(h, FRAME_DATA, 1, 0);
        h[5] = 1;
        assert_int_equal(frame_decode(h, 12, &f), -EPROTO);
        frame_header_pack(h, FRAME_DATA, 1, 0);
        h[7] = 1;
        assert_int_equal(frame_decode(h, 12, &f), -EPROTO);
}

static void test_window(void **state)
{
        struct buf b = BUF_INIT;
        uint8_t w[4];
        struct frame f;
        uint32_t credit = 0;
        frame_window_pack(w, 123456789);
        assert_int_equal(frame_append(&b, FRAME_WINDOW, 3, w, 4), 0);
        assert_int_equal(frame_decode((uint8_t *)b.data, b.len, &f), 16);
        assert_int_equal(frame_window_unpack(&f, &credit), 0);
        assert_int_equal(credit, 123456789);
        f.len = 3;
        assert_int_equal(frame_window_unpack(&f, &credit), -EPROTO);
        buf_free(&b);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_roundtrip),
                cmocka_unit_test(test_malformed),
                cmocka_unit_test(test_window),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
