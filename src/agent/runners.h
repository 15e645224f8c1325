/* The interpreter runners' sources (src/agent/runners/), embedded at build time into a
 * generated runners.c (CMakeLists.txt); an empty string where the source was missing. A
 * runner gets its source on stdin (code.c), never in its argv. */
#ifndef CELLA_AGENT_RUNNERS_H
#define CELLA_AGENT_RUNNERS_H

extern const char cella_runner_python[]; /* python-runner.py: python3 -u -I - */
extern const char cella_runner_node[];   /* node-runner.js: node - */

#endif
