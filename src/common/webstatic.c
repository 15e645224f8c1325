/* Static file names for the web console's routes (webstatic.h). */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "common/macros.h"
#include "common/webstatic.h"

static bool name_byte(unsigned char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '.' || c == '_' || c == '-' || c == '~';
}

int webstatic_path(const char *rel, size_t len, char *out, size_t outsz)
{
        static const char index[] = "index.html";
        size_t seg = 0; /* bytes in the current segment */
        size_t n;

        if (!rel || !out || outsz == 0)
                return -EINVAL;
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)rel[i];

                if (c == '/') {
                        if (seg == 0) /* leading '/', "//" */
                                return -EINVAL;
                        seg = 0;
                        continue;
                }
                if (!name_byte(c) || (seg == 0 && c == '.'))
                        return -EINVAL;
                seg++;
        }
        n = len + (seg == 0 ? sizeof(index) - 1 : 0);
        if (n > WEBSTATIC_PATH_MAX || n >= outsz)
                return -ENAMETOOLONG;
        memcpy(out, rel, len);
        if (seg == 0)
                memcpy(out + len, index, sizeof(index) - 1);
        out[n] = '\0';
        return (int)n;
}

const char *webstatic_type(const char *name)
{
        static const struct {
                const char *ext, *type;
        } types[] = {
                {"html", "text/html; charset=utf-8"},
                {"js", "text/javascript; charset=utf-8"},
                {"mjs", "text/javascript; charset=utf-8"},
                {"css", "text/css; charset=utf-8"},
                {"json", "application/json"},
                {"map", "application/json"},
                {"svg", "image/svg+xml"},
                {"png", "image/png"},
                {"ico", "image/x-icon"},
                {"webp", "image/webp"},
                {"woff2", "font/woff2"},
                {"woff", "font/woff"},
                {"ttf", "font/ttf"},
                {"txt", "text/plain; charset=utf-8"},
                {"wasm", "application/wasm"},
        };
        const char *slash = name ? strrchr(name, '/') : NULL;
        const char *dot = name ? strrchr(slash ? slash : name, '.') : NULL;

        if (dot)
                for (size_t i = 0; i < ARRAY_SIZE(types); i++)
                        if (strcasecmp(dot + 1, types[i].ext) == 0)
                                return types[i].type;
        return "application/octet-stream";
}

bool webstatic_immutable(const char *name)
{
        return name && strncmp(name, "assets/", 7) == 0;
}
