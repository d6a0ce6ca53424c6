/* The interactive mode, as lua 5.4's: lines come through GNU readline (so a
 * terminal gets line editing and history, and piped input is echoed after
 * the prompt, as Debian's lua5.4 does); the prompts are the values of
 * _PROMPT and _PROMPT2, through tostring; a first line "=expr" means
 * "return expr"; a line is tried as an expression first, so that its values
 * print; an unfinished statement reads more lines; errors print without the
 * program name. One difference, on purpose (docs/command-line.md): input
 * that ends inside an unfinished statement reports its syntax error (as lua
 * 5.4.6 does), where lua 5.4.4 prints the prompt's value in its place. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <readline/history.h>
#include <readline/readline.h>

#include <lauxlib.h>

#include "host/docall.h"

/* Pushes the prompt to show and returns it: the global's value through
 * tostring (__tostring and __name included), else the default. */
static const char *push_prompt(lua_State *L, int first_line)
{
    if (lua_getglobal(L, first_line ? "_PROMPT" : "_PROMPT2") == LUA_TNIL) {
        lua_pop(L, 1);
        return lua_pushstring(L, first_line ? "> " : ">> ");
    }
    const char *prompt = luaL_tolstring(L, -1, NULL);
    lua_remove(L, -2);
    return prompt;
}

/* Reads a line and pushes it, "=" at the start of a first line turned into
 * "return "; returns 0 with nothing pushed at the end of input. */
static int push_line(lua_State *L, int first_line)
{
    char *line = readline(push_prompt(L, first_line));
    lua_pop(L, 1);
    if (line == NULL)
        return 0;
    if (first_line && line[0] == '=')
        lua_pushfstring(L, "return %s", line + 1);
    else
        lua_pushstring(L, line);
    free(line);
    return 1;
}

/* Compiles "return <line>;" above the line: on success leaves the function
 * there, else nothing. */
static int load_as_expression(lua_State *L)
{
    const char *line = lua_tostring(L, -1);
    const char *code = lua_pushfstring(L, "return %s;", line);
    int status = luaL_loadbuffer(L, code, strlen(code), "=stdin");
    if (status == LUA_OK) {
        lua_remove(L, -2);
        if (line[0] != '\0')
            add_history(line);
    } else {
        lua_pop(L, 2);
    }
    return status;
}

/* A syntax error that only says the chunk ended too soon. */
static int unfinished(lua_State *L, int status)
{
    static const char eof_mark[] = "<eof>";
    const size_t mark_length = sizeof eof_mark - 1;
    if (status != LUA_ERRSYNTAX)
        return 0;
    size_t length;
    const char *message = lua_tolstring(L, -1, &length);
    return length >= mark_length && strcmp(message + length - mark_length, eof_mark) == 0;
}

/* Compiles the lines as a statement, adding lines while it is unfinished.
 * The lines so far are at 1; leaves the function or the error above. */
static int load_as_statement(lua_State *L)
{
    for (;;) {
        size_t length;
        const char *chunk = lua_tolstring(L, 1, &length);
        int status = luaL_loadbuffer(L, chunk, length, "=stdin");
        /* At the end of input the syntax error stays, to be reported. */
        if (!unfinished(L, status) || !push_line(L, 0)) {
            add_history(chunk);
            return status;
        }
        lua_remove(L, -2);
        lua_pushliteral(L, "\n");
        lua_insert(L, -2);
        lua_concat(L, 3);
    }
}

/* Leaves one value, the compiled statement or its error; -1 at the end of
 * input. */
static int load_statement(lua_State *L)
{
    lua_settop(L, 0);
    if (!push_line(L, 1))
        return -1;
    int status = load_as_expression(L);
    if (status != LUA_OK)
        status = load_as_statement(L);
    lua_remove(L, 1);
    return status;
}

/* Prints the values on the stack with the global print. */
static void print_results(lua_State *L)
{
    int count = lua_gettop(L);
    if (count == 0)
        return;
    luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
    lua_getglobal(L, "print");
    lua_insert(L, 1);
    if (lua_pcall(L, count, 0, 0) != LUA_OK)
        host_message(lua_pushfstring(L, "error calling 'print' (%s)", lua_tostring(L, -1)));
}

void host_repl(lua_State *L)
{
    /* An error that ends the loop itself (a prompt's __tostring that
     * raises, too many results) reaches main's report without the name
     * too, as in lua. */
    const char *progname = host_progname;
    host_progname = NULL;
    /* An ~/.inputrc's "$if lua" sections apply. */
    rl_readline_name = "lua";
    int status;
    while ((status = load_statement(L)) != -1) {
        if (status == LUA_OK)
            status = host_docall(L, 0, LUA_MULTRET);
        if (status == LUA_OK)
            print_results(L);
        else
            host_report(L, status);
    }
    lua_settop(L, 0);
    fputs("\n", stdout);
    fflush(stdout);
    host_progname = progname;
}
