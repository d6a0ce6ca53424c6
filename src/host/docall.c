/* What the executable's command line (host/main.c) and interactive mode (host/repl.c)
 * share, as lua.c has it: the message prefix, the reporter, and calls under
 * a traceback handler with Ctrl-C turned into a Lua error. */
#include <signal.h>
#include <stdio.h>

#include <lua.h>
#include <lauxlib.h>

#include "host/docall.h"
#include "runtime/runtime.h"

const char *host_progname = "gpurun";
static lua_State *signalled_state = NULL;

/* ---- Ctrl-C ------------------------------------------------------------- */

static void interrupt_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    lua_sethook(L, NULL, 0, 0);
    luaL_error(L, "interrupted!");
}

/* Without SA_RESTART, as lua: a blocking read (io.read) ends at once. */
static void set_signal(int sig, void (*handler)(int))
{
    struct sigaction action;
    action.sa_handler = handler;
    action.sa_flags = 0;
    sigemptyset(&action.sa_mask);
    sigaction(sig, &action, NULL);
}

static void on_sigint(int sig)
{
    /* A second Ctrl-C while the first is pending kills the process. */
    set_signal(sig, SIG_DFL);
    gpurun_note_interrupt(); /* a wait for a graph that may never end gives up */
    lua_sethook(signalled_state, interrupt_hook,
                LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT, 1);
}

/* ---- reporting ---------------------------------------------------------- */

void host_message(const char *message)
{
    if (host_progname)
        fprintf(stderr, "%s: ", host_progname);
    fprintf(stderr, "%s\n", message);
    fflush(stderr);
}

int host_report(lua_State *L, int status)
{
    if (status != LUA_OK) {
        const char *message = lua_tostring(L, -1);
        host_message(message ? message : "(error object is not a string)");
        lua_pop(L, 1);
    }
    return status;
}

static int message_handler(lua_State *L)
{
    const char *message = lua_tostring(L, 1);
    if (message == NULL) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
            return 1;
        message = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, message, 1);
    return 1;
}

int host_docall(lua_State *L, int nargs, int nresults)
{
    int base = lua_gettop(L) - nargs;
    lua_pushcfunction(L, message_handler);
    lua_insert(L, base);
    signalled_state = L;
    set_signal(SIGINT, on_sigint);
    int status = lua_pcall(L, nargs, nresults, base);
    set_signal(SIGINT, SIG_DFL);
    lua_remove(L, base);
    return status;
}

