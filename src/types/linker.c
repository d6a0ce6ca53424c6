/* gpurun.Linker: ObjectCodes (PTX, cubin, LTO-IR, fatbin, host objects and
 * libraries) and their LinkerOptions, linked through nvJitLink
 * (base/nvjitlink_link.c, opened at run time) into one ObjectCode by
 * :link("cubin" | "ptx"); where nvJitLink is missing, through the driver's
 * cuLink (base/driver_link.c) when the link needs nothing else. LinkerOptions
 * is written in Lua (lua/gpurun/builtin/linker_options.lua): it checks the
 * options and says which nvJitLink option strings a link passes; this file
 * links. Linking through nvJitLink needs no GPU. */
#include "types/linker.h"

#include <string.h>

#include "base/driver_link.h"
#include "base/kernel_cache.h"
#include "base/nvjitlink_link.h"
#include "base/nvjitlink_loader.h"
#include "types/object_code.h"
#include "types/program.h"

const struct gpurun_tag gpurun_linker_tag = {"gpurun.Linker"};

#define LINK_OUTPUT "gpurun.LinkOutput" /* internal: frees nvJitLink's output */

/* cuda.core's LinkerOptions.name default, the linked code's name. */
#define DEFAULT_NAME "<default linker>"

/* Uservalues: 1 = the ObjectCodes (a sequence), 2 = the LinkerOptions,
 * 3 = the last link's info log, 4 = its error log. */
struct linker {
    struct gpurun_object header;
};

static struct linker *check_linker(lua_State *L, int index)
{
    return gpurun_check_open(L, index, &gpurun_linker_tag);
}

/* Pushes LinkerOptions' builtin function `name` (linker_options.lua). */
static void push_options_function(lua_State *L, const char *name)
{
    gpurun_push_options_function(L, "gpurun.LinkerOptions", name);
}

/* Linker(code, code, ... [, options]): the last argument is the options
 * when it is not an ObjectCode (a LinkerOptions, or a table of them). */
static int linker_new(lua_State *L)
{
    int count = lua_gettop(L);
    int options = 0;
    if (count > 0 && !gpurun_to_tagged(L, count, &gpurun_object_code_tag)
        && (lua_istable(L, count) || lua_isnil(L, count)))
        options = count--;
    if (count == 0)
        return gpurun_arg_error(L, 1, "gpurun.ObjectCode expected, got %s: a Linker links one "
                                      "or more ObjectCodes", lua_isnone(L, 1) ? "no value"
                                                                              : gpurun_type_name(L, 1));
    for (int i = 1; i <= count; i++)
        gpurun_check_open(L, i, &gpurun_object_code_tag);
    push_options_function(L, "coerce");
    if (options)
        lua_pushvalue(L, options);
    else
        lua_pushnil(L);
    lua_pushinteger(L, options ? options : count + 1);
    lua_pushliteral(L, "gpurun.Linker");
    lua_call(L, 3, 1);
    int coerced = lua_gettop(L);
    lua_createtable(L, count, 0);
    for (int i = 1; i <= count; i++) {
        lua_pushvalue(L, i);
        lua_rawseti(L, -2, i);
    }
    int codes = lua_gettop(L);
    struct linker *linker = gpurun_new_object(L, sizeof *linker, 4, &gpurun_linker_tag);
    lua_pushvalue(L, codes);
    lua_setiuservalue(L, -2, 1);
    lua_pushvalue(L, coerced);
    lua_setiuservalue(L, -2, 2);
    lua_pushliteral(L, "");
    lua_setiuservalue(L, -2, 3);
    lua_pushliteral(L, "");
    lua_setiuservalue(L, -2, 4);
    linker->header.closed = 0;
    return 1;
}

static int output_gc(lua_State *L)
{
    link_output_free(lua_touserdata(L, 1));
    return 0;
}

/* The nvJitLink option strings for `target`, anchored in a table left on
 * the stack, and the linked code's name (anchored there too). */
static const char **collect_options(lua_State *L, const char *target, size_t *count,
                                    const char **name)
{
    push_options_function(L, "link_options");
    lua_getiuservalue(L, 1, 2);
    lua_pushstring(L, target);
    gpurun_push_current_arch(L);
    lua_pushliteral(L, DEFAULT_NAME);
    lua_call(L, 4, 2);
    *name = lua_tostring(L, -1); /* stays on the stack */
    return gpurun_option_strings(L, -2, count);
}

/* The inputs, their code and names anchored on the stack. An input without
 * a name is called after its place and type ("input 2 (ptx)"). */
static struct link_input *collect_inputs(lua_State *L, size_t *count)
{
    lua_getiuservalue(L, 1, 1);
    int codes = lua_gettop(L);
    size_t n = (size_t)lua_rawlen(L, codes);
    if (!lua_checkstack(L, (int)n * 2 + 8))
        gpurun_error(L, "too many inputs to link (%d)", (int)n);
    struct link_input *inputs = gpurun_push_staging(L, (n + 1) * sizeof *inputs);
    for (size_t i = 0; i < n; i++) {
        lua_rawgeti(L, codes, (lua_Integer)i + 1);
        enum device_code_type type = gpurun_push_code_of(L, -1);
        if (lua_rawlen(L, -1) == 0) {
            lua_pop(L, 1);
            lua_pushfstring(L, "input %d (%s)", (int)i + 1, device_code_type_name(type));
        }
        lua_remove(L, -3); /* the ObjectCode: its table keeps it */
        inputs[i].type = type;
        inputs[i].data = lua_tolstring(L, -2, &inputs[i].size);
        inputs[i].name = lua_tostring(L, -1);
    }
    *count = n;
    return inputs;
}

/* Pushes the signatures of every input's kernels (ObjectCodes that carry
 * PTX, or were compiled from it), one text after another: the parser
 * reads them as one list. */
static void push_input_signatures(lua_State *L)
{
    lua_getiuservalue(L, 1, 1);
    int codes = lua_gettop(L);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (lua_Integer i = 1; i <= (lua_Integer)lua_rawlen(L, codes); i++) {
        lua_rawgeti(L, codes, i);
        gpurun_push_signatures_of(L, -1);
        lua_remove(L, -2);
        luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
    lua_remove(L, codes);
}

/* Drops a log's trailing line ends, for the end of a message. */
static size_t trimmed_length(const char *log)
{
    size_t length = log ? strlen(log) : 0;
    while (length > 0 && (log[length - 1] == '\n' || log[length - 1] == '\r'))
        length--;
    return length;
}

/* Where nvJitLink cannot be opened: returns when the driver's linker can
 * make the link instead (it needs a current context), else raises with
 * both reasons. */
static void without_nvjitlink(lua_State *L, const struct link_request *request, const char *name)
{
    char why[256];
    if (driver_link_refusal(request, why, sizeof why))
        gpurun_error(L, "nvJitLink link of '%s' failed: %s; the driver's linker (cuLink) cannot "
                        "make this link instead: %s", name, nvjitlink_loader_error(), why);
    const char *no_context = gpurun_no_context_reason();
    if (no_context)
        gpurun_error(L, "nvJitLink link of '%s' failed: %s; the driver's linker (cuLink), which "
                        "could make this link instead, needs a current device: %s", name,
                     nvjitlink_loader_error(), no_context);
    gpurun_require_context(L);
}

/* link("cubin" | "ptx") -> ObjectCode, from the kernel cache when it has it
 * (links by the driver's linker are not kept there). */
static int linker_link(lua_State *L)
{
    check_linker(L, 1);
    const char *target = gpurun_check_string(L, 2, NULL);
    int ptx = strcmp(target, "ptx") == 0;
    if (!ptx && strcmp(target, "cubin") != 0)
        return gpurun_arg_error(L, 2, "\"cubin\" or \"ptx\" expected, got \"%s\"", target);
    lua_settop(L, 2);
    struct link_request request = {.ptx = ptx};
    const char *name;
    request.options = collect_options(L, target, &request.option_count, &name);
    check_linker(L, 1);
    request.inputs = collect_inputs(L, &request.input_count);
    check_linker(L, 1);

    struct link_output *output = lua_newuserdatauv(L, sizeof *output, 0);
    memset(output, 0, sizeof *output);
    luaL_setmetatable(L, LINK_OUTPUT);
    int from_cache = 0;
    const char *linker_name = "nvJitLink";
    int ok;
    if (nvjitlink_loader_load() != 0) {
        without_nvjitlink(L, &request, name);
        linker_name = "cuLink";
        ok = driver_link(&request, output);
    } else {
        ok = kernel_cache_link(&request, GPURUN_VERSION, output, &from_cache);
    }
    lua_pushstring(L, output->info_log ? output->info_log : "");
    lua_setiuservalue(L, 1, 3);
    lua_pushstring(L, output->error_log ? output->error_log : "");
    lua_setiuservalue(L, 1, 4);
    if (!ok) {
        size_t length = trimmed_length(output->error_log);
        lua_pushfstring(L, "%s link of '%s' failed: %s%s", linker_name, name, output->error,
                        length ? "\n" : "");
        lua_pushlstring(L, output->error_log ? output->error_log : "", length);
        lua_concat(L, 2);
        link_output_free(output);
        return gpurun_error(L, "%s", lua_tostring(L, -1));
    }
    lua_pushlstring(L, output->code, output->code_size);
    int code = lua_gettop(L);
    /* Linked PTX declares its kernels; a linked cubin's are those its
     * inputs declared. */
    if (ptx)
        lua_pushvalue(L, code);
    else
        push_input_signatures(L);
    size_t signatures_size;
    const char *signatures = lua_tolstring(L, -1, &signatures_size);
    gpurun_push_linked_code(L, ptx ? DEVICE_CODE_PTX : DEVICE_CODE_CUBIN, name,
                            output->info_log ? output->info_log : "", code,
                            signatures_size ? signatures : NULL, signatures_size, from_cache);
    link_output_free(output);
    return 1;
}

static int linker_get_info_log(lua_State *L)
{
    check_linker(L, 1);
    lua_getiuservalue(L, 1, 3);
    return 1;
}

static int linker_get_error_log(lua_State *L)
{
    check_linker(L, 1);
    lua_getiuservalue(L, 1, 4);
    return 1;
}

static int linker_close(lua_State *L)
{
    struct linker *linker = gpurun_check_tagged(L, 1, &gpurun_linker_tag);
    if (linker->header.closed)
        return 0;
    linker->header.closed = 1;
    for (int i = 1; i <= 4; i++) {
        lua_pushnil(L);
        lua_setiuservalue(L, 1, i);
    }
    return 0;
}

static int linker_tostring(lua_State *L)
{
    struct linker *linker = gpurun_check_tagged(L, 1, &gpurun_linker_tag);
    if (linker->header.closed) {
        lua_pushliteral(L, "gpurun.Linker(closed)");
    } else {
        lua_getiuservalue(L, 1, 1);
        lua_pushfstring(L, "gpurun.Linker(%d input(s))", (int)lua_rawlen(L, -1));
    }
    return 1;
}

static const luaL_Reg linker_methods[] = {
    {"link", linker_link},
    {"get_info_log", linker_get_info_log},
    {"get_error_log", linker_get_error_log},
    {"close", linker_close},
    {NULL, NULL}
};

static const luaL_Reg linker_metamethods[] = {
    {"__tostring", linker_tostring},
    {"__close", linker_close},
    {"__gc", linker_close},
    {NULL, NULL}
};

static const luaL_Reg output_metamethods[] = {
    {"__gc", output_gc},
    {NULL, NULL}
};

static const luaL_Reg module_functions[] = {
    {"Linker", linker_new},
    {NULL, NULL}
};

static const struct gpurun_type linker_type = {
    &gpurun_linker_tag, linker_methods, linker_metamethods, NULL, NULL,
};

void gpurun_open_linker(lua_State *L)
{
    gpurun_register_type(L, &linker_type);
    luaL_newmetatable(L, LINK_OUTPUT);
    luaL_setfuncs(L, output_metamethods, 0);
    lua_pop(L, 1);
    gpurun_set_functions(L, module_functions);
}
