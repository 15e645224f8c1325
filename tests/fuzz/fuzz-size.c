/* Fuzz the disk size parser (src/runtime/disk.h: --disk-limit-override).
 *
 * Invariants: it returns 0, -EINVAL or -ERANGE; an accepted size is nonzero, at most
 * 2^63, a whole multiple of the suffix's unit, and the digits before the suffix read back
 * the same value; the answer depends only on the len bytes given. */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "runtime/disk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        uint64_t v = 0, again = 0;
        char copy[64];
        int r = disk_size_parse((const char *)data, size, &v);

        FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ERANGE);
        if (r != 0)
                return 0;
        FUZZ_CHECK(v > 0 && v <= (UINT64_MAX >> 1));
        FUZZ_CHECK(size > 0 && data[0] >= '0' && data[0] <= '9');
        /* The same bytes with garbage after them, cut at len, parse the same. */
        if (size < sizeof(copy) - 1) {
                memcpy(copy, data, size);
                copy[size] = 'x';
                FUZZ_CHECK(disk_size_parse(copy, size, &again) == 0 && again == v);
        }
        /* A unit suffix means a multiple of that unit. */
        size_t digits = 0;
        while (digits < size && data[digits] >= '0' && data[digits] <= '9')
                digits++;
        if (digits < size) {
                switch (data[digits]) {
                case 'k':
                case 'K':
                        FUZZ_CHECK(v % 1024 == 0);
                        break;
                case 'm':
                case 'M':
                        FUZZ_CHECK(v % (1024 * 1024) == 0);
                        break;
                case 'g':
                case 'G':
                        FUZZ_CHECK(v % (1024ull * 1024 * 1024) == 0);
                        break;
                case 't':
                case 'T':
                        FUZZ_CHECK(v % (1024ull * 1024 * 1024 * 1024) == 0);
                        break;
                default:
                        break;
                }
        } else {
                FUZZ_CHECK(disk_size_parse((const char *)data, digits, &again) == 0 && again == v);
        }
        return 0;
}
