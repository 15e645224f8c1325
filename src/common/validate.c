/* One rule per kind of name; see validate.h. */
#include <string.h>

#include "common/limits.h"
#include "common/validate.h"

static bool is_alpha_(char c)
{
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

bool env_name_is_valid(const char *s)
{
        size_t n;

        if (!s || !is_alpha_(s[0]))
                return false;
        for (n = 1; s[n]; n++)
                if (n >= CELLA_ENV_NAME_MAX || !(is_alpha_(s[n]) || (s[n] >= '0' && s[n] <= '9')))
                        return false;
        return true;
}

bool command_is_valid(const char *s, size_t len)
{
        return s && len >= 1 && len <= CELLA_EXEC_MAX_COMMAND && memchr(s, '\0', len) == NULL;
}

bool http_path_is_valid(const char *s, size_t len)
{
        if (!s || len == 0 || len > CELLA_PROC_MAX_HTTP_PATH || s[0] != '/')
                return false;
        for (size_t i = 0; i < len; i++)
                if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] >= 0x7f)
                        return false;
        return true;
}
