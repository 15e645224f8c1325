/* Structured logging to stderr: one line per event, "level=... msg=..." key/values. */
#ifndef CELLA_LOG_H
#define CELLA_LOG_H

#include "common/macros.h"

enum log_level { LOG_LEVEL_DEBUG, LOG_LEVEL_INFO, LOG_LEVEL_WARN, LOG_LEVEL_ERROR };

void log_set_level(enum log_level lvl);
/* "debug", "info", "warn", "error" -> *ret; -1 for anything else. */
int log_level_from_name(const char *name, enum log_level *ret);
void log_set_prefix(const char *prefix); /* e.g. "cellad" or "cella-init"; borrowed */
void log_msg(enum log_level lvl, const char *fmt, ...) _printf_(2, 3);

#define log_debug(...) log_msg(LOG_LEVEL_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_LEVEL_ERROR, __VA_ARGS__)

#endif
