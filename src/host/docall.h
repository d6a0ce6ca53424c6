/* What the executable's parts share: host/main.c (lua.c's command line) and
 * host/repl.c (its interactive mode) call down into host/docall.c. Not part of
 * gpurun.so. */
#ifndef GPURUN_HOST_DOCALL_H
#define GPURUN_HOST_DOCALL_H

#include <lua.h>

/* The prefix of messages on stderr: argv[0], as lua uses; NULL for none
 * (the interactive mode's errors, as in lua). */
extern const char *host_progname;

/* Writes "<progname>: message" (or the message alone) on stderr. */
void host_message(const char *message);

/* Reports the error message at the top (and pops it) unless status is
 * LUA_OK; returns status. */
int host_report(lua_State *L, int status);

/* Calls the function below `nargs` arguments under a message handler that
 * adds the traceback, with Ctrl-C turned into an error meanwhile. */
int host_docall(lua_State *L, int nargs, int nresults);

/* The read-eval-print loop, until the end of input (host/repl.c). */
void host_repl(lua_State *L);

#endif
