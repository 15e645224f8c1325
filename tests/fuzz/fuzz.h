/* Shared by the fuzz targets: an invariant check that fails loudly under both libFuzzer
 * and the replay driver (abort() is what libFuzzer reports as a crash). */
#ifndef CELLA_FUZZ_H
#define CELLA_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond)                                                                     \
        do {                                                                                 \
                if (!(cond)) {                                                               \
                        fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, \
                                #cond);                                                      \
                        abort();                                                             \
                }                                                                            \
        } while (0)

#endif
