/* gpurun: a Lua 5.4 interpreter with the `gpurun` module built in.
 *
 * The shape is lua.c's: main() runs pmain() under lua_pcall so that every
 * error, even one raised while reading the options, reaches one reporter; a
 * message handler adds the traceback; SIGINT sets a hook that raises
 * "interrupted!" at the next Lua instruction, so that a GPU call in progress
 * finishes and to-be-closed objects are released on the way out.
 *
 * Messages begin with argv[0], as lua's do. Exit codes: 0 success, 1 script
 * error, 2 usage error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

#include "base/cuda_driver.h"
#include "runtime/runtime.h"
#include "host/docall.h"
#include "module/searcher.h"
#include "base/nvrtc_compile.h"

#define EXIT_SCRIPT_ERROR 1
#define EXIT_USAGE 2

static int dochunk(lua_State *L, int status)
{
    if (status == LUA_OK)
        status = host_docall(L, 0, 0);
    return host_report(L, status);
}

static int dostring(lua_State *L, const char *chunk, const char *name)
{
    return dochunk(L, luaL_loadbuffer(L, chunk, strlen(chunk), name));
}

/* `-l mod` stores require("mod") in global mod; `-l g=mod` in global g. */
static int dolibrary(lua_State *L, char *spec)
{
    char *module = strchr(spec, '=');
    const char *global = spec;
    if (module)
        *module++ = '\0';
    else
        module = spec;
    lua_getglobal(L, "require");
    lua_pushstring(L, module);
    int status = host_docall(L, 1, 1);
    if (status == LUA_OK)
        lua_setglobal(L, global);
    return host_report(L, status);
}

/* ---- options ------------------------------------------------------------ */

static void print_usage(FILE *out)
{
    fprintf(out,
            "usage: %s [options] [script [args]]\n"
            "Available options are:\n"
            "  -e stat   execute string 'stat'\n"
            "  -i        enter interactive mode after executing 'script'\n"
            "  -l mod    require library 'mod' into global 'mod'\n"
            "  -l g=mod  require library 'mod' into global 'g'\n"
            "  -v        show version information (gpurun, Lua, NVRTC, CUDA driver)\n"
            "  -E        ignore environment variables\n"
            "  -W        turn warnings on\n"
            "  -h        show this help\n"
            "  --        stop handling options\n"
            "  -         stop handling options and execute stdin\n",
            host_progname);
}

/* gpurun's lines, then Lua's banner last, word for word lua -v's: so what
 * -e and the script print comes right after the banner, as under lua. The
 * driver's line needs only its library opened, never cuInit (about 120 ms
 * on an H200 host); counting devices would need cuInit, so -v does not. */
static void print_version(void)
{
    int nvrtc_major = 0, nvrtc_minor = 0;
    nvrtc_compile_version(&nvrtc_major, &nvrtc_minor);
    printf("gpurun %s\nNVRTC %d.%d\n", GPURUN_VERSION, nvrtc_major, nvrtc_minor);
    int version = 0;
    if (cuda_driver_version(&version) == CUDA_SUCCESS)
        printf("CUDA driver %d.%d\n", version / 1000, version % 1000 / 10);
    else
        printf("CUDA driver: not available (%s)\n", cuda_driver_load_error());
    printf("%s\n", LUA_COPYRIGHT);
    fflush(stdout);
}

enum {
    HAS_ERROR = 1, HAS_I = 2, HAS_V = 4, HAS_E = 8, HAS_UPPER_E = 16, HAS_H = 32
};

/* Scans the options; returns the flags and sets *script to the index of the
 * script name (argc when there is none). Sets HAS_ERROR and *script to the
 * offending option on a usage error. */
static int collect_options(char **argv, int argc, int *script)
{
    int flags = 0;
    int i;
    for (i = 1; i < argc; i++) {
        *script = i;
        if (argv[i][0] != '-')
            return flags;
        switch (argv[i][1]) {
        case '-':
            if (argv[i][2] != '\0') {
                if (strcmp(argv[i], "--version") == 0) { flags |= HAS_V; break; }
                if (strcmp(argv[i], "--help") == 0) { flags |= HAS_H; break; }
                return flags | HAS_ERROR;
            }
            *script = i + 1;
            return flags;
        case '\0':
            return flags;
        case 'E':
            if (argv[i][2] != '\0') return flags | HAS_ERROR;
            flags |= HAS_UPPER_E;
            break;
        case 'W':
            if (argv[i][2] != '\0') return flags | HAS_ERROR;
            break;
        case 'i':
            if (argv[i][2] != '\0') return flags | HAS_ERROR;
            flags |= HAS_I | HAS_V;
            break;
        case 'v':
            if (argv[i][2] != '\0') return flags | HAS_ERROR;
            flags |= HAS_V;
            break;
        case 'h':
            if (argv[i][2] != '\0') return flags | HAS_ERROR;
            flags |= HAS_H;
            break;
        case 'e':
            flags |= HAS_E;
            /* fallthrough */
        case 'l':
            if (argv[i][2] == '\0') {
                i++;
                if (i >= argc || argv[i] == NULL || argv[i][0] == '-')
                    return flags | HAS_ERROR;
            }
            break;
        default:
            return flags | HAS_ERROR;
        }
    }
    *script = argc;
    return flags;
}

/* Runs -e, -l and -W in order. */
static int run_options(lua_State *L, char **argv, int script)
{
    for (int i = 1; i < script; i++) {
        char option = argv[i][1];
        if (option == 'e' || option == 'l') {
            char *value = argv[i][2] != '\0' ? argv[i] + 2 : argv[++i];
            int status = option == 'e' ? dostring(L, value, "=(command line)")
                                       : dolibrary(L, value);
            if (status != LUA_OK)
                return 0;
        } else if (option == 'W') {
            lua_warning(L, "@on", 0);
        }
    }
    return 1;
}

/* arg[0] is the script, arg[1..] its arguments, negative indices the
 * interpreter and its options. */
static void create_arg_table(lua_State *L, char **argv, int argc, int script)
{
    if (script == argc)
        script = 0;
    lua_createtable(L, argc - script - 1 > 0 ? argc - script - 1 : 0, script + 1);
    for (int i = 0; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i - script);
    }
    lua_setglobal(L, "arg");
}

static int push_script_args(lua_State *L)
{
    if (lua_getglobal(L, "arg") != LUA_TTABLE)
        luaL_error(L, "'arg' is not a table");
    int n = (int)luaL_len(L, -1);
    luaL_checkstack(L, n + 3, "too many arguments to script");
    for (int i = 1; i <= n; i++)
        lua_rawgeti(L, -i, i);
    lua_remove(L, -n - 1);
    return n;
}

static int run_script(lua_State *L, char **argv, int script)
{
    const char *name = argv[script];
    if (strcmp(name, "-") == 0 && strcmp(argv[script - 1], "--") != 0)
        name = NULL; /* stdin */
    int status = luaL_loadfile(L, name);
    if (status == LUA_OK) {
        int n = push_script_args(L);
        status = host_docall(L, n, LUA_MULTRET);
    }
    return host_report(L, status);
}

static int handle_init(lua_State *L)
{
    const char *name = "=LUA_INIT_5_4";
    const char *init = getenv("LUA_INIT_5_4");
    if (init == NULL) {
        name = "=LUA_INIT";
        init = getenv("LUA_INIT");
    }
    if (init == NULL)
        return LUA_OK;
    if (init[0] == '@')
        return dochunk(L, luaL_loadfile(L, init + 1));
    return dostring(L, init, name);
}

/* ---- pmain -------------------------------------------------------------- */

static int pmain(lua_State *L)
{
    int argc = (int)lua_tointeger(L, 1);
    char **argv = (char **)lua_touserdata(L, 2);
    int script = argc;
    int flags = collect_options(argv, argc, &script);
    luaL_checkversion(L);

    if (flags & HAS_ERROR) {
        const char *bad = argv[script];
        if (bad[1] == 'e' || bad[1] == 'l')
            fprintf(stderr, "%s: '%s' needs argument\n", host_progname, bad);
        else
            fprintf(stderr, "%s: unrecognized option '%s'\n", host_progname, bad);
        print_usage(stderr);
        lua_pushinteger(L, EXIT_USAGE);
        return 1;
    }
    if (flags & HAS_H) {
        print_usage(stdout);
        lua_pushinteger(L, 0);
        return 1;
    }
    if (flags & HAS_V)
        print_version();

    if (flags & HAS_UPPER_E) {
        lua_pushboolean(L, 1);
        lua_setfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");
    }
    luaL_openlibs(L);
    gpurun_setup_paths(L);
    create_arg_table(L, argv, argc, script);
    lua_gc(L, LUA_GCRESTART);
    lua_gc(L, LUA_GCGEN, 0, 0);

    int ok = 1;
    if (!(flags & HAS_UPPER_E) && handle_init(L) != LUA_OK)
        ok = 0;
    if (ok && !run_options(L, argv, script))
        ok = 0;
    if (ok && script < argc && run_script(L, argv, script) != LUA_OK)
        ok = 0;
    if (ok && (flags & HAS_I))
        host_repl(L);
    else if (ok && script == argc && !(flags & (HAS_E | HAS_V))) {
        if (isatty(STDIN_FILENO)) {
            print_version();
            host_repl(L);
        } else if (dochunk(L, luaL_loadfile(L, NULL)) != LUA_OK) {
            ok = 0;
        }
    }
    lua_pushinteger(L, ok ? 0 : EXIT_SCRIPT_ERROR);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc > 0 && argv[0][0] != '\0')
        host_progname = argv[0];
    lua_State *L = luaL_newstate();
    if (L == NULL) {
        host_message("cannot create state: not enough memory");
        return EXIT_SCRIPT_ERROR;
    }
    lua_gc(L, LUA_GCSTOP);
    lua_pushcfunction(L, pmain);
    lua_pushinteger(L, argc);
    lua_pushlightuserdata(L, argv);
    int status = lua_pcall(L, 2, 1, 0);
    int code = EXIT_SCRIPT_ERROR;
    if (status == LUA_OK)
        code = (int)lua_tointeger(L, -1);
    else
        host_report(L, status);
    /* Closing the state runs every pending __close/__gc, which releases GPU
     * objects in reverse order of creation and the contexts last. */
    lua_close(L);
    return code;
}
