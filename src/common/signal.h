/* Signal names as the API takes them: "SIGTERM", "TERM" (any case) or a number 1..64. */
#ifndef CELLA_SIGNAL_H
#define CELLA_SIGNAL_H

/* The signal number, or -1 if s names none. Pure. */
int cella_signal_parse(const char *s);
/* "SIGTERM" for 15; NULL for a number without a name (real-time signals). */
const char *cella_signal_name(int sig);

#endif
