#include <ctype.h>
#include <errno.h>

#include "common/pct.h"

bool pct_unreserved(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '_' || c == '.' || c == '~';
}

static int hexval(char c)
{
        if (!isxdigit((unsigned char)c))
                return -1;
        return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; /* 0x20: a letter's lower case */
}

int pct_decode(const char *s, size_t n, bool plus_space, char *out, size_t outsz, size_t *ret_len)
{
        size_t o = 0;

        for (size_t i = 0; i < n; i++) {
                char c = s[i];

                if (c == '%') {
                        if (n - i < 3)
                                return -EINVAL;
                        int hi = hexval(s[i + 1]), lo = hexval(s[i + 2]);
                        if (hi < 0 || lo < 0)
                                return -EINVAL;
                        c = (char)(hi * 16 + lo);
                        i += 2;
                } else if (c == '+' && plus_space) {
                        c = ' ';
                }
                if (c == '\0' || o + 1 >= outsz)
                        return -EINVAL;
                out[o++] = c;
        }
        if (outsz == 0)
                return -EINVAL;
        out[o] = '\0';
        if (ret_len)
                *ret_len = o;
        return 0;
}
