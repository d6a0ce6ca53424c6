/* What the Lua binding files share: type names, the object header every
 * gpurun userdata starts with, error helpers and the runtime state.
 *
 * One C file per Lua type (ldevice.c, lstream.c, ...), each registering a
 * metatable named "gpurun.<Type>" from its meth[]/metameth[] arrays. */
#ifndef GPURUN_H
#define GPURUN_H

#include <stddef.h>
#include <stdint.h>

#include <lua.h>
#include <lauxlib.h>

#include "cuda_driver.h"

#define GPURUN_VERSION "0.1.0"

#define GPURUN_DEVICE        "gpurun.Device"
#define GPURUN_STREAM        "gpurun.Stream"
#define GPURUN_EVENT         "gpurun.Event"
#define GPURUN_PROGRAM_OPTIONS "gpurun.ProgramOptions"
#define GPURUN_PROGRAM       "gpurun.Program"
#define GPURUN_OBJECT_CODE   "gpurun.ObjectCode"
#define GPURUN_KERNEL        "gpurun.Kernel"
#define GPURUN_BUFFER        "gpurun.Buffer"
#define GPURUN_RNG           "gpurun.Generator"
#define GPURUN_LAUNCH_CONFIG "gpurun.LaunchConfig"
#define GPURUN_SCALAR        "gpurun.Scalar"
#define GPURUN_PLAN          "gpurun.LaunchPlan"
#define GPURUN_GRAPH_BUILDER "gpurun.GraphBuilder"
#define GPURUN_GRAPH         "gpurun.Graph"

/* ---- identity tags for the launch path ---------------------------------- */

/* A launch checks up to a dozen arguments; comparing metatables costs four
 * API calls each. The userdata the launch path accepts instead begin with a
 * tag pointing at one of these, which two API calls verify: lua_touserdata
 * and lua_rawlen (a light userdata or a smaller block never matches). Only C
 * code that forges a block with gpurun's own tag address could fool it. */
struct gpurun_tag {
    const char *type_name;
};
extern const struct gpurun_tag gpurun_tag_stream, gpurun_tag_buffer, gpurun_tag_scalar,
    gpurun_tag_kernel, gpurun_tag_config, gpurun_tag_plan, gpurun_tag_graph;

/* The tagged userdata at index when it carries `tag`, else NULL. */
static inline void *gpurun_to_tagged(lua_State *L, int index, const struct gpurun_tag *tag)
{
    void *block = lua_touserdata(L, index);
    if (block == NULL || lua_rawlen(L, index) < sizeof tag
        || *(const struct gpurun_tag *const *)block != tag)
        return NULL;
    return block;
}

/* ---- errors (lgpurun.c) ------------------------------------------------- */

/* Raises "<call>: CUDA_ERROR_X (description) while <what>", using the call
 * recorded by CUDA_CALL. A sticky error adds that the context is no longer
 * usable. Never returns. */
int gpurun_cuda_error(lua_State *L, const char *what_fmt, ...);

/* Like CUDA_CALL, raising on failure with a fixed description. */
#define CHECK_CUDA(L, what, name, ...)                                   \
    do {                                                                 \
        if (cuda_checked(cuda.name(__VA_ARGS__), #name) != CUDA_SUCCESS) \
            gpurun_cuda_error((L), "%s", (what));                        \
    } while (0)

/* Loads the driver or raises the loader's reason. */
void gpurun_require_driver(lua_State *L);

/* Raises "attempt to use a closed gpurun.<Type>". */
int gpurun_closed_error(lua_State *L, const char *type_name);

/* ---- type registration ------------------------------------------------- */

/* Creates the metatable `name` with metamethods `metameth` and the methods
 * `meth` in its field "methods", which is also its __index unless metameth
 * has an __index function (types with fields); leaves it on the stack. */
void gpurun_new_type(lua_State *L, const char *name, const luaL_Reg *meth,
                     const luaL_Reg *metameth);

/* For an __index function (object at 1, key at 2): checks that the object
 * is a `type_name`, pushes the method named by the key and returns 1, or
 * returns 0 with the stack as it was. Methods come before the closed check,
 * so close() stays callable on a closed object. */
int gpurun_push_method(lua_State *L, const char *type_name);

/* Per-file registration, each adds its constructors to the module table at
 * the top of the stack. */
void gpurun_open_device(lua_State *L);
void gpurun_open_stream(lua_State *L);
void gpurun_open_program(lua_State *L);
void gpurun_open_kernel(lua_State *L);
void gpurun_open_buffer(lua_State *L);
void gpurun_open_graph(lua_State *L);

/* ---- runtime state shared by the bindings (lgpurun.c) ------------------- */

struct gpurun_runtime {
    CUcontext current_context;  /* set by Device:set_current(), NULL before */
    int current_device;         /* ordinal, -1 before set_current */
    CUstream current_stream;    /* the stream buffer operations go on; NULL: none set */
};
extern struct gpurun_runtime gpurun_runtime;

/* Raises a clear error when no device has been made current. */
CUcontext gpurun_require_context(lua_State *L);

/* Retains (once per process) and returns the primary context of a device;
 * released when the module's state is closed at exit. */
CUcontext gpurun_primary_context(lua_State *L, int ordinal);

/* ---- cross-type helpers ------------------------------------------------- */

/* lstream.c */
struct gpurun_stream {
    const struct gpurun_tag *tag;
    CUstream handle;
    int device;
    int closed;
    int captured;  /* a GraphBuilder is capturing it: plain launches are refused */
};
/* A live Stream's handle at index, or error. */
CUstream gpurun_check_stream_handle(lua_State *L, int index);

/* The stream a buffer operation goes on: the optional Stream argument at
 * `index` when given, else the current stream (gpurun.set_current_stream),
 * else NULL, meaning "no stream: wait for the whole device before and after".
 * lstream.c. */
CUstream gpurun_operation_stream(lua_State *L, int index);

/* lbuffer.c */
struct gpurun_buffer {
    const struct gpurun_tag *tag;
    CUdeviceptr pointer;
    size_t count;          /* elements */
    size_t element_size;
    int dtype;             /* enum gpurun_dtype */
    int graph_users;       /* graphs holding this buffer: close refused while > 0 */
    int closed;
};
struct gpurun_buffer *gpurun_check_buffer(lua_State *L, int index);
struct gpurun_buffer *gpurun_test_buffer(lua_State *L, int index); /* NULL if not a Buffer */

/* lobject_code.c: an ObjectCode's userdata struct begins with this header, so a
 * Kernel can tell cheaply whether its library was unloaded under it. */
struct gpurun_object_code_header {
    CUlibrary library;  /* NULL until the first get_kernel loads it */
    int closed;
    int graph_users;    /* graphs that launch its kernels: close refused while > 0 */
};

/* lkernel.c: makes a Kernel for `kernel` of the ObjectCode at code_index
 * (kept alive by the Kernel), reading its parameter layout once, and pushes
 * it. Needs a current device (for the kernel's launch limits). */
int gpurun_push_kernel(lua_State *L, int code_index, CUkernel kernel, const char *name);

/* lstream.c: creates a non-blocking stream on the current device, pushes it. */
int gpurun_push_new_stream(lua_State *L);

/* lgraph.c: creates a GraphBuilder over the Stream at stream_index. */
int gpurun_push_graph_builder(lua_State *L, int stream_index);

/* lgraph.c: ends every capture in progress and discards what it captured,
 * so that an error raised mid-capture leaves the streams usable. */
void gpurun_abort_captures(lua_State *L);

/* lgraph.c: raises (ending the capture) for plain work on a stream that a
 * GraphBuilder is capturing: it would be recorded into the graph without
 * the graph keeping what it uses alive. */
int gpurun_captured_stream_error(lua_State *L);

/* lgraph.c: whether any graph builder is capturing now (a buffer freed then
 * would invalidate the capture, so the free waits). */
int gpurun_capture_in_progress(void);

/* lgraph.c: the stream a launch goes on when the target at `index` is a
 * GraphBuilder that is building (and remembers that buffers used by the
 * launch must live as long as the graph: gpurun_graph_builder_keep). */
struct gpurun_graph_builder;
struct gpurun_graph_builder *gpurun_test_graph_builder(lua_State *L, int index);
CUstream gpurun_graph_builder_stream(lua_State *L, struct gpurun_graph_builder *builder);
void gpurun_graph_builder_keep(lua_State *L, int builder_index, int value_index);

/* lkernel.c: a GraphBuilder (from the launch that captured them until it
 * lets go of them) and a Graph (for its whole life) count as users of every
 * Buffer and Kernel (through its ObjectCode) a capture kept, so closing one
 * of those explicitly is refused meanwhile. Other values: ignored. */
void gpurun_adjust_graph_users(lua_State *L, int index, int delta);

/* Monotonic seconds. */
double gpurun_now(void);

#endif
