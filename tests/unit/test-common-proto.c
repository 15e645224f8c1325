/* Frame encoding and decoding: round trips, partial input, malformed headers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
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

/* frame_encode writes what frame_append appends; frame_encode_alloc leaves the caller's head
 * in front of it; both refuse an oversized payload. */
static void test_encode(void **state)
{
        struct buf b = BUF_INIT;
        uint8_t out[16];
        void *p = NULL;

        assert_int_equal(frame_encode(out, FRAME_STDERR, 9, "wxyz", 4), 16);
        assert_int_equal(frame_append(&b, FRAME_STDERR, 9, "wxyz", 4), 0);
        assert_memory_equal(out, b.data, 16);
        assert_int_equal(frame_size(4), 16);
        assert_int_equal(frame_encode_alloc(40, FRAME_STDERR, 9, "wxyz", 4, &p), 16);
        assert_non_null(p);
        assert_memory_equal((uint8_t *)p + 40, b.data, 16);
        free(p);
        assert_int_equal(frame_encode_alloc(8, FRAME_END, 9, NULL, 0, &p), 12);
        free(p);
        assert_int_equal(frame_encode(out, FRAME_DATA, 1, out, CELLA_FRAME_MAX + 1), -EINVAL);
        p = NULL;
        assert_int_equal(frame_encode_alloc(8, FRAME_DATA, 1, out, CELLA_FRAME_MAX + 1, &p),
                         -EINVAL);
        assert_null(p);
        buf_free(&b);
}

/* Feed a stream of three frames one byte at a time, then all at once: the reader yields the
 * same frames either way, keeps nothing it yielded after compact, and a bad header after a
 * good frame yields the good frame first, then -EPROTO. */
static void feed(struct frame_reader *r, const char *bytes, size_t n)
{
        char *p;
        int room = frame_reader_space(r, n, &p);

        assert_true(room >= (int)n);
        memcpy(p, bytes, n);
        frame_reader_commit(r, n);
}

static void test_reader(void **state)
{
        struct frame_reader r = FRAME_READER_INIT;
        struct buf b = BUF_INIT;
        struct frame f;
        unsigned got = 0;

        assert_int_equal(frame_append(&b, FRAME_EXEC, 1, "{}", 2), 0);
        assert_int_equal(frame_append(&b, FRAME_DATA, 1, "", 0), 0);
        assert_int_equal(frame_append(&b, FRAME_CANCEL, 1, NULL, 0), 0);
        for (size_t i = 0; i < b.len; i++) {
                feed(&r, b.data + i, 1);
                while (frame_reader_next(&r, &f) == 1) {
                        static const uint8_t types[] = {FRAME_EXEC, FRAME_DATA, FRAME_CANCEL};
                        assert_true(got < 3);
                        assert_int_equal(f.type, types[got]);
                        got++;
                }
                frame_reader_compact(&r);
        }
        assert_int_equal(got, 3);
        assert_int_equal(r.in.len, 0);

        feed(&r, b.data, b.len);
        feed(&r, "\0\0\0\0\0\0\0\0\0\0\0\1", 12); /* type 0 */
        assert_int_equal(frame_reader_next(&r, &f), 1);
        assert_int_equal(f.type, FRAME_EXEC);
        assert_memory_equal(f.payload, "{}", 2);
        assert_int_equal(frame_reader_next(&r, &f), 1);
        assert_int_equal(frame_reader_next(&r, &f), 1);
        assert_int_equal(frame_reader_next(&r, &f), -EPROTO);
        frame_reader_free(&r);
        buf_free(&b);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_roundtrip), cmocka_unit_test(test_malformed),
                cmocka_unit_test(test_window),    cmocka_unit_test(test_encode),
                cmocka_unit_test(test_reader),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
