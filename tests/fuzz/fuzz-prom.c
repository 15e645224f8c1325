/* Fuzz the Prometheus text-format line parser (src/common/prom.h: what `cella top` reads
 * of GET /metrics) and the encoder's label escaping.
 *
 * Invariants: prom_parse_line returns 1, 0, -EINVAL or -E2BIG and reads no byte past len;
 * a sample's name is a metric name, at most PROM_LABELS_MAX labels, none twice. The input
 * as a label value (up to its first NUL), escaped by the encoder into a sample line, parses
 * back to the same value. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/prom.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct prom_parsed s;
        const char *p = (const char *)data;
        char *copy;
        int r;

        /* every line of the input */
        for (size_t off = 0; off <= size;) {
                const char *nl = memchr(p + off, '\n', size - off);
                size_t n = nl ? (size_t)(nl - (p + off)) : size - off;

                r = prom_parse_line(p + off, n, &s);
                FUZZ_CHECK(r == 1 || r == 0 || r == -EINVAL || r == -E2BIG);
                if (r == 1) {
                        FUZZ_CHECK(s.name[0] && strlen(s.name) <= PROM_NAME_MAX);
                        FUZZ_CHECK(s.nlabels <= PROM_LABELS_MAX);
                        for (size_t i = 0; i < s.nlabels; i++)
                                for (size_t k = i + 1; k < s.nlabels; k++)
                                        FUZZ_CHECK(strcmp(s.labels[i].name, s.labels[k].name));
                }
                off += n + 1;
        }

        /* the input as a label value: escaped, then parsed back */
        copy = malloc(size + 1);
        if (!copy)
                return 0;
        memcpy(copy, data, size);
        copy[size] = '\0';
        if (strlen(copy) <= PROM_LABEL_VALUE_MAX) {
                struct prom_label l = {"v", copy};
                struct buf b = BUF_INIT;

                if (prom_sample_u64(&b, "fuzz_total", &l, 1, 7) == 0) {
                        FUZZ_CHECK(b.len > 0 && b.data[b.len - 1] == '\n');
                        FUZZ_CHECK(prom_parse_line(b.data, b.len - 1, &s) == 1);
                        FUZZ_CHECK(strcmp(prom_parsed_label(&s, "v"), copy) == 0);
                        FUZZ_CHECK(s.value == 7);
                }
                buf_free(&b);
        }
        free(copy);
        return 0;
}
