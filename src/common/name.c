#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/limits.h"
#include "common/name.h"

static const char *const reserved[] = {
        "default", "localhost", "health", "metrics", "api",
        "v1",      "admin",     "system", "cella",   "pool",
};

bool sandbox_name_is_reserved(const char *name)
{
        for (size_t i = 0; i < ARRAY_SIZE(reserved); i++)
                if (strcmp(name, reserved[i]) == 0)
                        return true;
        /* Names of warm-pool sandboxes. */
        return strncmp(name, "pool-", 5) == 0;
}

int sandbox_name_check(const char *name, size_t len, bool normalize, char *out,
                       struct cella_error *err)
{
        char tmp[CELLA_NAME_MAX + 1];

        if (!name || len == 0)
                return cella_error_set(err, CELLA_E_INVALID_SANDBOX_NAME, "sandbox name is empty");
        if (len > CELLA_NAME_MAX)
                return cella_error_set(err, CELLA_E_INVALID_SANDBOX_NAME,
                                       "sandbox name is longer than %d characters", CELLA_NAME_MAX);
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)name[i];
                if (normalize && c >= 'A' && c <= 'Z')
                        c = (unsigned char)(c - 'A' + 'a');
                if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
                        return cella_error_set(
                                err, CELLA_E_INVALID_SANDBOX_NAME,
                                "sandbox name may contain only a-z, 0-9 and '-'%s",
                                (c >= 'A' && c <= 'Z') ? " (use normalizeId to lower case)" : "");
                tmp[i] = (char)c;
        }
        tmp[len] = '\0';
        if (tmp[0] == '-' || tmp[len - 1] == '-')
                return cella_error_set(err, CELLA_E_INVALID_SANDBOX_NAME,
                                       "sandbox name may not start or end with '-'");
        if (sandbox_name_is_reserved(tmp))
                return cella_error_set(err, CELLA_E_INVALID_SANDBOX_NAME,
                                       "sandbox name '%s' is reserved", tmp);
        memcpy(out, tmp, len + 1);
        return 0;
}

bool cella_id_is_valid(const char *s)
{
        size_t n = strlen(s);

        if (n == 0 || n > CELLA_ID_MAX || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
                      (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-' || s[i] == '.'))
                        return false;
        return true;
}

int slot_id_format(unsigned slot, char *buf, size_t size)
{
        int n = snprintf(buf, size, "s%u", slot);
        return (n < 0 || (size_t)n >= size) ? -ENAMETOOLONG : 0;
}

int slot_id_parse(const char *id, size_t len, unsigned max, unsigned *ret)
{
        unsigned v = 0;

        /* "s", then a decimal without leading zeros: one spelling per slot. */
        if (len < 2 || len > 11 || id[0] != 's' || (id[1] == '0' && len > 2))
                return -EINVAL;
        for (size_t i = 1; i < len; i++) {
                if (id[i] < '0' || id[i] > '9')
                        return -EINVAL;
                v = v * 10 + (unsigned)(id[i] - '0');
                if (v >= max)
                        return -ERANGE;
        }
        *ret = v;
        return 0;
}

bool image_name_is_valid(const char *s)
{
        size_t n = strlen(s);

        if (n == 0 || n > CELLA_NAME_MAX || s[0] == '.' || s[0] == '-')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '.' ||
                      s[i] == '_' || s[i] == '-'))
                        return false;
        return true;
}
