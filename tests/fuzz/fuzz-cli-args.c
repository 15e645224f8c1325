/* Fuzz the CLI's command-line parser (src/cli/args.h cli_parse: the option table, values,
 * positional words, exec's verbatim command). The input is argv[1..]: words separated by
 * NUL bytes.
 *
 * Invariants: cli_parse returns 0 or -1; -1 comes with a message; 0 leaves pos[] NULL-ended,
 * every list within CLI_MAX_KV and NULL past its end, and every checked value in its range
 * (--timeout, --sleep-after, --port, --depth, --network, --lang, --interval, wait's one
 * condition; top's --once without --interval). */
#include <string.h>

#include "cli/args.h"
#include "fuzz.h"

#define MAX_WORDS 96

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static struct cli_args a;
        char buf[4096], *argv[MAX_WORDS + 2];
        int argc = 1;
        size_t n = size < sizeof(buf) - 1 ? size : sizeof(buf) - 1;

        memcpy(buf, data, n);
        buf[n] = '\0';
        argv[0] = "cella";
        for (char *p = buf; p <= buf + n && argc <= MAX_WORDS; p += strlen(p) + 1)
                argv[argc++] = p;
        argv[argc] = NULL;

        int r = cli_parse(argc, argv, &a);

        FUZZ_CHECK(r == 0 || r == -1);
        if (r < 0) {
                FUZZ_CHECK(a.error[0] != '\0' && memchr(a.error, '\0', sizeof(a.error)));
                return 0;
        }
        FUZZ_CHECK(a.npos >= 0 && a.npos < (int)(sizeof(a.pos) / sizeof(a.pos[0])));
        FUZZ_CHECK(a.pos[a.npos] == NULL);
        FUZZ_CHECK(a.nenv <= CLI_MAX_KV && a.env[a.nenv] == NULL);
        FUZZ_CHECK(a.nlabels <= CLI_MAX_KV && a.labels[a.nlabels] == NULL);
        FUZZ_CHECK(a.nallow <= CLI_MAX_KV && a.allow[a.nallow] == NULL);
        FUZZ_CHECK(a.npackages <= CLI_MAX_KV && a.packages[a.npackages] == NULL);
        FUZZ_CHECK(a.ninclude <= CLI_MAX_KV && a.include[a.ninclude] == NULL);
        FUZZ_CHECK(a.nexclude <= CLI_MAX_KV && a.exclude[a.nexclude] == NULL);
        for (int i = 0; i < a.nenv; i++)
                FUZZ_CHECK(strchr(a.env[i], '=') && a.env[i][0] != '=');
        for (int i = 0; i < a.nlabels; i++)
                FUZZ_CHECK(strchr(a.labels[i], '=') && a.labels[i][0] != '=');
        FUZZ_CHECK(a.timeout_ms >= 0 && a.timeout_ms <= CLI_TIMEOUT_MAX_MS);
        FUZZ_CHECK(a.sleep_after_s >= 0 && a.sleep_after_s <= CLI_SLEEP_AFTER_MAX_S);
        FUZZ_CHECK(a.port >= 0 && a.port <= 65535);
        FUZZ_CHECK(a.depth >= 0 && a.depth <= 2147483647L);
        FUZZ_CHECK(!a.network || !strcmp(a.network, "none") || !strcmp(a.network, "outbound"));
        FUZZ_CHECK(!a.lang || !strcmp(a.lang, "python") || !strcmp(a.lang, "javascript") ||
                   !strcmp(a.lang, "typescript"));
        FUZZ_CHECK(!a.regex || a.log);
        FUZZ_CHECK(!a.http_path || a.port);
        FUZZ_CHECK(a.interval_ms == 0 ||
                   (a.interval_ms >= CLI_INTERVAL_MIN_MS && a.interval_ms <= CLI_INTERVAL_MAX_MS));
        FUZZ_CHECK(!a.once || a.interval_ms == 0);
        if (a.pos[0] && strcmp(a.pos[0], "wait") == 0 && !a.help)
                FUZZ_CHECK((a.log != NULL) + (a.port != 0) + a.exit == 1);
        return 0;
}
