/* The runtime layer: what every Lua type of gpurun stands on. error.c
 * raises every error (which makes the capture rule hold); object.c
 * registers types; value.c reads arguments and names them in messages;
 * state.c keeps contexts, the current device and stream, the checks of
 * what work goes on (a Stream, or a GraphBuilder capturing one), the waits
 * and the host callbacks they run; stream_order.c orders one stream after
 * another; capture.c keeps the captures in progress, deferred_frees.c what
 * waits for none; cancel.c the cancel flags of device-side loops. Below
 * it: src/base/ (no Lua). Above: src/types/, then module/opener.c. */
#ifndef GPURUN_RUNTIME_RUNTIME_H
#define GPURUN_RUNTIME_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include <lua.h>
#include <lauxlib.h>

#include "base/cuda_driver.h"
#include "base/dtype.h"
#include "base/version.h"

/* ---- objects (runtime/object.c) ----------------------------------------- */

/* Every gpurun userdata begins with a header whose tag names its type. The
 * launch path tells types apart by the tag (two API calls) instead of by the
 * metatable (four); only C code that forges a block with gpurun's own tag
 * address could fool it. Each type defines its tag in its own file. */
struct gpurun_tag {
    const char *type_name; /* the metatable's name: "gpurun.Buffer" */
};

struct gpurun_object {
    const struct gpurun_tag *tag;
    int closed;
    /* Method look-ups through the type's __index so far (runtime/object.c):
     * an object looked up often enough gets a metatable of its own. */
    unsigned int method_lookups;
    /* Graphs and builders that hold this object (runtime/capture.c): an
     * explicit close is refused while it is above 0. */
    int graph_users;
    /* Where a use counts: NULL for the object itself; a Kernel counts for the
     * ObjectCode whose library holds its code. */
    struct gpurun_object *counts_for;
    /* The capture whose graph allocates this object's memory (a Buffer made
     * on a building GraphBuilder), or NULL: that capture keeps it without
     * counting as its user, since the graph's own nodes allocate and free
     * the memory (runtime/capture.c). */
    const struct gpurun_capture *allocated_in;
};

/* The object at index when it carries `tag` (open or closed), else NULL. */
static inline void *gpurun_to_tagged(lua_State *L, int index, const struct gpurun_tag *tag)
{
    void *block = lua_touserdata(L, index);
    if (block == NULL || lua_rawlen(L, index) < sizeof(struct gpurun_object)
        || ((const struct gpurun_object *)block)->tag != tag)
        return NULL;
    return block;
}

/* The object at index, or a "gpurun.X expected" argument error. */
void *gpurun_check_tagged(lua_State *L, int index, const struct gpurun_tag *tag);

/* As gpurun_check_tagged, and open, or "attempt to use a closed gpurun.X". */
void *gpurun_check_open(lua_State *L, int index, const struct gpurun_tag *tag);

/* Pushes a new zeroed object of `size` bytes with `uservalues` user values,
 * tagged and with its type's metatable, closed until its maker opens it (so
 * that a constructor failing halfway leaves nothing for __gc to release). */
void *gpurun_new_object(lua_State *L, size_t size, int uservalues, const struct gpurun_tag *tag);

/* A Lua type: methods (also callable on a closed object, so that close()
 * always works), metamethods, fields (getters called with the open object at
 * 1 and the key at 2; they push one value), and a getter for keys that name
 * neither (numbers, for buf[i]), or NULL. A method is a plain table read:
 * the methods table is __index for a type without fields, and an object of
 * a type with both has a metatable of its own whose __index table keeps
 * each method once looked up (runtime/object.c says why); a key that is not
 * a method goes to the getters. The type's metatable is what getmetatable
 * returns either way. Every function is registered as a closure over its own
 * name ("Buffer:fill"), which error messages use. */
struct gpurun_type {
    const struct gpurun_tag *tag;
    const luaL_Reg *methods;
    const luaL_Reg *metamethods;
    const luaL_Reg *fields;
    lua_CFunction index_other;
};

void gpurun_register_type(lua_State *L, const struct gpurun_type *type);

/* Adds methods to a registered type, named as its own ("Stream:create_graph_builder"):
 * a type above another gives it methods that make objects of the upper type,
 * so that the lower one needs to know nothing of it. */
void gpurun_add_methods(lua_State *L, const struct gpurun_tag *tag, const luaL_Reg *methods);

/* Sets functions in the table at the top of the stack, named "gpurun.<name>". */
void gpurun_set_functions(lua_State *L, const luaL_Reg *functions);

/* Pushes package.loaded[name], a table of a type's C functions for the Lua
 * parts ("gpurun.fft_core"), made when missing: files that share one each
 * add theirs. */
void gpurun_push_core_table(lua_State *L, const char *name);

/* Adds functions (as gpurun_set_functions names them) to that table. */
void gpurun_set_core_functions(lua_State *L, const char *name, const luaL_Reg *functions);

/* Sets functions in the table at the top of the stack, named as methods of
 * the type ("Graph:update"): the C side of a method written in Lua, whose
 * argument errors read as the method's. */
void gpurun_set_methods_of(lua_State *L, const struct gpurun_tag *tag, const luaL_Reg *functions);

/* Sets the functions in the table gpurun.<Type> of the module table at the
 * top (made when missing), named "gpurun.<Type>.<name>" in their errors:
 * a type's constructors other than itself (gpurun.ObjectCode.from_cubin).
 * Where gpurun.<Type> is the type's constructor function, it becomes a
 * table that calls that function (gpurun.Event{...}, gpurun.Event.from_ipc). */
void gpurun_set_type_functions(lua_State *L, const struct gpurun_tag *tag,
                               const luaL_Reg *functions);

/* ---- errors (runtime/error.c) ------------------------------------------- */

/* Every error gpurun raises ends every capture in progress first (so the
 * streams are usable once it is caught), then raises. None returns. */
int gpurun_error(lua_State *L, const char *fmt, ...);

/* The same with the position of stack level `level` (as luaL_where counts;
 * 0: none) instead of the running function's caller. */
int gpurun_error_at(lua_State *L, int level, const char *message);

/* The same at the first Lua caller whose source does not contain `inside`
 * ("/gpurun/builtin/"): where a C function's error would point, for errors
 * raised by gpurun's own Lua code. */
int gpurun_error_outside(lua_State *L, const char *inside, const char *message);

/* The one capture rule for gpurun's code written in Lua: replaces the
 * function at index with a C closure that calls it and, if it raises, ends
 * every capture in progress before raising the same error object again
 * (its message and position unchanged). Yields pass through. The Lua-part
 * loader guards every function a part exports; a part guards its own
 * objects' methods through internal.guard. */
void gpurun_push_guarded(lua_State *L, int index);

/* Guards every Lua function of the table at index, in place (C functions
 * raise through gpurun_error already). */
void gpurun_guard_table(lua_State *L, int index);

/* "bad argument #n to 'Type:method' (why)": the name is the running
 * function's; a method's arguments count from after self, as in a colon
 * call, and a bad self says "calling 'Type:method' on bad self (why)". */
int gpurun_arg_error(lua_State *L, int arg, const char *fmt, ...);

/* "attempt to use a closed gpurun.<Type>". */
int gpurun_closed_error(lua_State *L, const char *type_name);

/* "<call>: CUDA_ERROR_X (description) while <what>", from the call CUDA_CALL
 * recorded; after a sticky error, that the context is no longer usable. */
int gpurun_cuda_error(lua_State *L, const char *what_fmt, ...);

/* Like CUDA_CALL, raising gpurun_cuda_error with a fixed description. */
#define CHECK_CUDA(L, what, name, ...)                                   \
    do {                                                                 \
        if (cuda_checked(cuda.name(__VA_ARGS__), #name) != CUDA_SUCCESS) \
            gpurun_cuda_error((L), "%s", (what));                        \
    } while (0)

/* For a query (cuStreamQuery, cuEventQuery) that CUDA_CALL made: pushes
 * whether the work is done, or raises for a real failure. Returns 1. */
int gpurun_push_ready(lua_State *L, CUresult result, const char *what);

/* Loads the driver or raises the loader's reason. */
void gpurun_require_driver(lua_State *L);

/* Loads the driver, then raises "<feature> need a CUDA driver of version
 * X.Y or newer: this one has no <name>" where an optional entry point
 * (base/cuda_driver.h) is missing. */
#define GPURUN_REQUIRE_ENTRY(L, feature, name, version)                      \
    do {                                                                   \
        gpurun_require_driver(L);                                          \
        if (cuda.name == NULL)                                             \
            gpurun_missing_entry_error((L), (feature), #name, (version));  \
    } while (0)
int gpurun_missing_entry_error(lua_State *L, const char *feature, const char *name, int version);

/* ---- argument values (runtime/value.c) ---------------------------------- */

/* "gpurun.Buffer", "number", "no value"...: what a message calls the type of
 * the value at index (may push a string; the result lives until it is popped). */
const char *gpurun_type_name(lua_State *L, int index);

/* As gpurun_type_name, but a number is shown as itself ("1.5", "inf"). */
const char *gpurun_value_text(lua_State *L, int index);


/* "bad argument #n to 'f' (expected expected, got <what is there>)". */
int gpurun_type_error(lua_State *L, int arg, const char *expected);


/* An integer argument: a number with an exact integer value, else "expected
 * expected, got 1.5" (or the type); with expected NULL, luaL_checkinteger's
 * words ("number expected", "number has no integer representation"). */
lua_Integer gpurun_check_integer(lua_State *L, int arg, const char *expected);
lua_Integer gpurun_opt_integer(lua_State *L, int arg, lua_Integer fallback, const char *expected);

/* A number argument (not a string that looks like one). */
lua_Number gpurun_check_number(lua_State *L, int arg);
lua_Number gpurun_opt_number(lua_State *L, int arg, lua_Number fallback);

/* A string argument (a number converts, as for Lua's own), with its length. */
const char *gpurun_check_string(lua_State *L, int arg, size_t *length);

/* A table argument. */
void gpurun_check_table(lua_State *L, int arg);

/* The value at index as an exact integer: 1 and *out set, or 0. */
int gpurun_exact_integer(lua_State *L, int index, lua_Integer *out);

/* Options tables (Event{...}, create_stream{...}, kernel:occupancy{...}):
 * nil or none means no options; a table may hold only the keys in `known`
 * (NULL-terminated), else "unknown option 'x' (known: a, b)". Returns
 * whether a table is there. Reads are raw: no metamethod runs. */
int gpurun_check_options(lua_State *L, int arg, const char *const *known);

/* The field of the options table at arg (checked by gpurun_check_options;
 * nil there: fallback), as a boolean, or as an integer (expected: what the
 * message says it must be, "an integer number of bytes"). */
int gpurun_opt_boolean_field(lua_State *L, int arg, const char *key, int fallback);
lua_Integer gpurun_opt_integer_field(lua_State *L, int arg, const char *key, lua_Integer fallback,
                                     const char *expected);

/* The dtype named by the optional string at arg (fallback when absent). */
int gpurun_check_dtype(lua_State *L, int arg, int fallback);

/* A positive element count at arg. */
size_t gpurun_check_count(lua_State *L, int arg);

/* The number at index as one element of dtype at out: NULL, or pushes and
 * returns why it does not fit ("300 out of range for uint8 (0..255)"). A
 * complex dtype takes a number (its real part) or a pair {re, im}. */
const char *gpurun_to_element(lua_State *L, int index, int dtype, void *out);

/* As gpurun_to_element for an argument, raising an argument error. */
void gpurun_check_element(lua_State *L, int arg, int dtype, void *out);

/* Pushes the element of dtype at p: integers for integer dtypes (uint64
 * values past the Lua integers as floats), floats for float dtypes, a new
 * pair {re, im} of floats for complex dtypes. */
void gpurun_push_element(lua_State *L, int dtype, const void *p);
/* Loads a run-time library through its loader and pushes nil, or the
 * loader's reason it cannot be used: the `load()` of a library's core
 * table. Never raises. */
int gpurun_push_load_status(lua_State *L, int (*load)(void), const char *(*why)(void));

/* The first `count` elements of the sequence at table_index, stored as
 * elements of dtype at out; the first that does not fit is an argument
 * error at arg ("element 3: 300 out of range for uint8 (0..255)"). */
void gpurun_store_sequence(lua_State *L, int table_index, int arg, size_t count, int dtype,
                           void *out);

/* Pushes a new sequence of the count elements of dtype at p; `what`
 * names the caller when count is too many for a Lua table. Making the
 * table can run finalizers, so p must be memory no close can free (Lua
 * staging); for other memory, push the table with gpurun_new_sequence,
 * check its owner again, then gpurun_fill_sequence, which runs none. */
void gpurun_push_sequence(lua_State *L, int dtype, const void *p, size_t count, const char *what);
void gpurun_new_sequence(lua_State *L, size_t count, int dtype, const char *what);
void gpurun_fill_sequence(lua_State *L, int dtype, const void *p, size_t count);

/* The fields every container of elements has (Buffer, PinnedBuffer), for
 * the key at 2: "dtype" (its name), "size" (the element count) or "nbytes".
 * Pushes it and returns 1: a type registers one getter that calls this under
 * each of the three names. */
int gpurun_push_elements_field(lua_State *L, int dtype, size_t count);

/* The one check of a 1-based index, at arg, into `count` things (`what`:
 * "element", "node"), returned 0-based; else an argument error, "integer
 * element index expected, got 1.5" or "element index 0 out of range (1..16)". */
size_t gpurun_check_index(lua_State *L, int arg, size_t count, const char *what);

/* An optional element range of a container of `size` elements, in Lua's
 * 1-based element indices: when the argument at arg is a number, it is the
 * first element and arg + 1 the count (nil: default_count, or to the end
 * when default_count is 0); else the whole container. Sets *first
 * (0-based) and *count, and returns the index of the argument after the
 * range (where a stream goes; a non-number at arg + 1 is taken for it). */
int gpurun_opt_range(lua_State *L, int arg, size_t size, size_t default_count, size_t *first,
                     size_t *count);

/* Host scratch memory as a userdata left on the stack, so that an error
 * raised while it is in use cannot leak it. */
void *gpurun_push_staging(lua_State *L, size_t bytes);

/* "4.00 GiB" */
const char *gpurun_format_size(char *text, size_t size, size_t bytes);

/* The IPC descriptor (base/ipc_descriptor.h) string at arg, read into
 * *descriptor: an argument error for a non-string, for bytes that are not
 * a whole descriptor of this version ("bad IPC descriptor: truncated: 12
 * of 120 bytes"), for another kind than `kind`, and for a device ordinal
 * past the devices visible. */
struct ipc_descriptor;
void gpurun_check_ipc_descriptor(lua_State *L, int arg, int kind, struct ipc_descriptor *descriptor);

/* ---- contexts, devices, the current stream (runtime/state.c) ------------ */

struct gpurun_capture;

/* A stream as the runtime knows it; the Stream type (types/stream.c) wraps one. */
struct gpurun_stream {
    CUstream handle;
    CUcontext context;
    int device;
    /* The capture recording it (runtime/capture.c), or NULL: plain launches
     * on a captured stream are refused, so that a graph never holds work
     * whose buffers it does not keep. */
    struct gpurun_capture *capture;
    /* Work queued since the last completed wait may never end (a graph with
     * a while loop): waits poll, so that Ctrl-C can end them. */
    int unbounded;
    /* Recorded when another stream waits for this one, and once more when it
     * is closed (kept until it is collected), so that memory freed later on
     * another stream can still wait for the work it had queued. */
    CUevent order_event;
};

/* A Stream object (types/stream.c is its Lua type): the object header,
 * then the stream. */
extern const struct gpurun_tag gpurun_stream_tag;
struct gpurun_stream_object {
    struct gpurun_object header;
    struct gpurun_stream stream;
};

/* The open Stream at index, or an error. */
struct gpurun_stream *gpurun_check_stream(lua_State *L, int index);

/* The stream a buffer operation goes on: the Stream argument at index when
 * given (index 0: none), else the current stream (gpurun.set_current_stream), else NULL,
 * meaning "no stream: wait for the whole device before and after". */
struct gpurun_stream *gpurun_operation_stream(lua_State *L, int index);

struct gpurun_runtime {
    CUcontext current_context;  /* set by Device:set_current(), NULL before */
    int current_device;         /* ordinal, -1 before set_current */
    struct gpurun_stream *current_stream; /* for buffer operations; NULL: none */
    /* A wait was interrupted with GPU work still running (a replay whose
     * while loop never ends): memory and contexts are then left to the
     * driver at exit rather than freed under that work. */
    int abandoned;
};
extern struct gpurun_runtime gpurun_runtime;

/* For a call on an object of another device: makes `context` current and
 * returns the context to restore with gpurun_leave_context (NULL when it
 * was current already, or could not be made current, in which case the
 * call fails with the driver's own error). Callers make their call, leave,
 * and only then raise, so that an error never leaves another device's
 * context current. Inline: the launch and replay paths pay one compare. */
static inline CUcontext gpurun_enter_context(CUcontext context)
{
    CUcontext current = gpurun_runtime.current_context;
    if (context == current || CUDA_CALL(cuCtxSetCurrent, context) != CUDA_SUCCESS)
        return NULL;
    return current;
}

static inline void gpurun_leave_context(CUcontext previous)
{
    /* Fails only for a context already destroyed, which no later call of
     * gpurun's uses. */
    if (previous != NULL)
        (void)CUDA_CALL(cuCtxSetCurrent, previous);
}

/* Why no device can be used now (the driver's load error first, else no
 * current device), or NULL when a context is current. */
const char *gpurun_no_context_reason(void);

/* The current context, or an error with gpurun_no_context_reason(). */
CUcontext gpurun_require_context(lua_State *L);

/* Retains (once per process) and returns the primary context of a device;
 * released when the module's state is closed at exit. */
CUcontext gpurun_primary_context(lua_State *L, int ordinal);

/* Makes device `ordinal` current. */
void gpurun_make_current(lua_State *L, int ordinal);

/* Peer access that Device:enable_peer_access turned on: whether kernels on
 * device `from` may touch memory of device `to` (always for from == to). */
#define GPURUN_MAX_DEVICES 64
int gpurun_peer_enabled(int from, int to);
void gpurun_record_peer_access(int from, int to);

/* The stream object at index becomes the current stream (nil: none); the
 * registry keeps it, so the record cannot outlive its object. */
void gpurun_set_current_stream(lua_State *L, int index, struct gpurun_stream *stream);
void gpurun_push_current_stream(lua_State *L);

/* Waits for the stream's work (a failed wait raises, naming `what`). Where
 * that work may never end, polls, and an interrupt noted meanwhile raises
 * "interrupted!" instead. */
void gpurun_wait_stream(lua_State *L, struct gpurun_stream *stream, const char *what);

/* Waits for the event (a failed wait raises, naming `what`), running host
 * callbacks meanwhile when any is pending. */
void gpurun_wait_event(lua_State *L, CUevent event, const char *what);

/* Waits for all of a context's work (NULL: the current context's), the
 * pending host callbacks run first; returns the driver's result for the
 * caller to raise in its own words. */
CUresult gpurun_wait_device(lua_State *L, CUcontext context, const char *what);

/* Called from the host's SIGINT handler (async-signal-safe): a wait that
 * polls gives up at once. */
void gpurun_note_interrupt(void);

/* In a polling wait: an interrupt noted since the wait began raises
 * "interrupted!" (the GPU work is then left to the driver at exit). */
void gpurun_check_interrupt(lua_State *L, const char *what);

/* Creates the state object whose __gc releases the contexts: the first
 * gpurun userdata, so the last one collected. Once per Lua state. */
void gpurun_open_runtime(lua_State *L);

/* Monotonic seconds. */
double gpurun_now(void);

/* ---- cancel flags of device-side loops (runtime/cancel.c) -------------- */

/* A new flag, clear, held once (gpurun_cancel_release lets go); *slot is 0
 * and the driver's result returned when none can be had. It may allocate
 * page-locked memory: during a capture, call it relaxed
 * (gpurun_relax_captures). */
CUresult gpurun_cancel_take(int *slot);
void gpurun_cancel_retain(int slot);
void gpurun_cancel_release(int slot);

/* The flag's address for kernels (a 32-bit word, non-zero: cancelled). */
CUdeviceptr gpurun_cancel_address(int slot);

/* Sets it (a host store: no driver call, allowed in host callbacks). */
void gpurun_cancel_set(int slot);
int gpurun_cancel_is_set(int slot);

/* Sets every flag held; async-signal-safe (Ctrl-C). */
void gpurun_cancel_all(void);

/* Clears the flag in the order of `stream`, after the work queued on it. */
CUresult gpurun_cancel_rearm(int slot, CUstream stream);

/* ---- one stream after another (runtime/stream_order.c) ----------------- */

/* Records the stream's ordering event (made on first use, in the stream's
 * context) after the work queued on it so far. Closing a stream marks it
 * once more, so that what waits for it later waits for all it had queued. */
CUresult gpurun_mark_stream(struct gpurun_stream *stream);

/* Makes `into` wait for the work queued on `from` so far (a closed `from`:
 * all it had queued when it was closed). The one way a stream is ordered
 * after another: Stream:wait, a capture's forks and joins, and memory freed
 * on one stream after the others that used it. */
CUresult gpurun_order_after(struct gpurun_stream *into, struct gpurun_stream *from);

/* ---- captures (runtime/capture.c) --------------------------------------- */

enum gpurun_capture_state {
    GPURUN_CAPTURE_IDLE, GPURUN_CAPTURE_BUILDING, GPURUN_CAPTURE_BUILT, GPURUN_CAPTURE_ABANDONED,
    GPURUN_CAPTURE_JOINED
};

/* ORIGIN: a capture begun on a stream (begin_building), which makes a graph.
 * FORK: a stream joined into an origin's capture (builder:split), recording
 * into the same graph until it is joined back. BODY: a conditional node's
 * body graph, recorded on a stream of its own (cuStreamBeginCaptureToGraph);
 * the graph belongs to the conditional node. */
enum gpurun_capture_role { GPURUN_CAPTURE_ORIGIN, GPURUN_CAPTURE_FORK, GPURUN_CAPTURE_BODY };

/* A capture of one stream into a graph; a GraphBuilder holds one. */
struct gpurun_capture {
    struct gpurun_stream *stream;
    enum gpurun_capture_state state;
    enum gpurun_capture_role role;
    struct gpurun_capture *root; /* the origin whose graph this records into (itself for one) */
    CUgraph graph;               /* origin: what end captured, until released; body: its graph */
    int owner;                   /* registry reference to the owner while building */
    int kept;                    /* origin: registry reference to { object = true } */
    int open_forks;              /* origin: forks not joined back yet */
    int open_bodies;             /* origin: conditional bodies (at any depth) still building */
    int has_loop;                /* origin: its graph holds a while loop (replays may not end) */
    int has_conditional;         /* origin: its graph holds a conditional node (no clone) */
    int has_memory_nodes;        /* origin: its graph allocates or frees memory (no clone) */
    int cancel_slot;             /* origin: its loops' cancel flag (runtime/cancel.c), 0: none */
    int allocations;             /* origin: registry reference to { object = true }, the
                                  * objects allocated in it and not freed in it yet */
    CUstreamCaptureMode mode;    /* what it was begun with (thread-local until then) */
    struct gpurun_capture *next; /* in the list of captures in progress */
};

/* ---- the GraphBuilder object (runtime/state.c) ---- */

extern const struct gpurun_tag gpurun_builder_tag;

/* A GraphBuilder object (types/graph_builder.c is its Lua type): the
 * object header, then its capture; user value 1 is the Stream object it
 * captures. */
struct gpurun_graph_builder {
    struct gpurun_object header;
    struct gpurun_capture capture;
};

/* The open GraphBuilder at index (on an open stream), or an error. */
struct gpurun_graph_builder *gpurun_check_builder(lua_State *L, int index);

/* Where work given a GraphBuilder in place of a stream is recorded: the
 * capture of the GraphBuilder at index, open and building (else an error),
 * or NULL when the value there is no GraphBuilder (index 0: none). Its
 * stream is what the work is queued on. */
struct gpurun_capture *gpurun_to_building(lua_State *L, int index);

/* The one refusal of plain work on a stream being captured (such work would
 * run outside the graph, or break the capture): raises "[operation: ]the
 * stream is being captured by a GraphBuilder: <instead>; capture abandoned",
 * as an argument error at arg when arg > 0. Raising ends the capture, as
 * every error does. Never returns. */
int gpurun_refuse_captured(lua_State *L, int arg, const char *operation, const char *instead);

/* ---- the registry (runtime/capture.c), continued ---- */

const char *gpurun_capture_state_name(enum gpurun_capture_state state);

/* Ready to capture `stream` as an origin; nothing held. */
void gpurun_capture_init(struct gpurun_capture *capture, struct gpurun_stream *stream);

/* Starts capturing the stream of the owner at owner_index in `mode`: an
 * origin (drops whatever an earlier capture left) or a body (into
 * capture->graph, set by gpurun_capture_add_conditional). Returns the
 * driver's result. */
CUresult gpurun_capture_begin(lua_State *L, struct gpurun_capture *capture, int owner_index,
                              CUstreamCaptureMode mode);

/* Makes `fork`, whose stream is new and idle, record into parent's capture
 * from here on (an event recorded on the parent's stream, waited on by the
 * fork's). Returns the driver's result. */
CUresult gpurun_capture_fork(lua_State *L, struct gpurun_capture *fork,
                             struct gpurun_capture *parent, int owner_index);

/* What `from` recorded joins `into` (both building, of one graph): into's
 * stream waits for from's. A joined fork is done (JOINED). */
CUresult gpurun_capture_join(struct gpurun_capture *into, struct gpurun_capture *from);

/* Ends the capture: an origin BUILT with capture->graph set (or ABANDONED,
 * with what it kept let go), a body BUILT. An origin with forks not joined or
 * bodies still building is not ended: CUDA_ERROR_STREAM_CAPTURE_UNJOINED,
 * for the caller to explain. Returns the driver's result. */
CUresult gpurun_capture_end(lua_State *L, struct gpurun_capture *capture);

/* Ends every capture in progress and discards what each captured (forks are
 * joined first, so the driver ends every stream's capture). */
void gpurun_capture_abort_all(lua_State *L);

/* Whether any capture is in progress. */
int gpurun_capture_in_progress(void);

/* Whether this thread may make calls the driver counts as unsafe during a
 * capture (an allocation): no capture is in progress, or each was begun
 * relaxed. Frees still wait for the captures' end. */
int gpurun_capture_allows_unsafe(void);

/* The capture keeps the gpurun object at index alive (and counts as its
 * user) until released; forks and bodies keep into their origin. Allocates:
 * callers keep the value anchored. */
void gpurun_capture_keep(lua_State *L, struct gpurun_capture *capture, int index);

/* Pushes a sequence of what the capture kept, each counted once more as used
 * (by the graph that holds the sequence: gpurun_release_users lets go). */
void gpurun_capture_push_kept(lua_State *L, struct gpurun_capture *capture);

/* The same sequence, counted for nobody: to read, not to keep. */
void gpurun_capture_push_objects(lua_State *L, const struct gpurun_capture *capture);

/* Lets go of what it kept and of its graph; abandons it if building. */
void gpurun_capture_release(lua_State *L, struct gpurun_capture *capture);

/* The graph the capture records into now (a conditional body's own). */
CUresult gpurun_capture_current_graph(const struct gpurun_capture *capture, CUgraph *graph);

/* A conditional handle for the graph the capture records into (set in
 * *graph), with a default value set at each launch of the graph. */
CUresult gpurun_capture_create_condition(struct gpurun_capture *capture, unsigned int default_value,
                                         CUgraphConditionalHandle *handle, CUgraph *graph);

/* Adds a conditional node of `type` with `count` bodies after the work
 * captured so far, and sets *node to it and bodies[i] to their graphs (owned
 * by the node); what is captured next depends on the node. */
CUresult gpurun_capture_add_conditional(struct gpurun_capture *capture,
                                        CUgraphConditionalHandle handle,
                                        CUgraphConditionalNodeType type, unsigned int count,
                                        CUgraphNode *node, CUgraph *bodies);

/* Adds a node running a copy of `child` (a graph with neither conditional
 * nor memory nodes) after the work captured so far; what is captured next
 * depends on it. The caller keeps what the child's nodes use. */
CUresult gpurun_capture_add_child_graph(struct gpurun_capture *capture, CUgraph child);

/* ---- memory allocated inside a capture ---- */

/* The object at index (a Buffer whose memory an allocation node of this
 * capture's graph makes) belongs to the capture's graph: the origin keeps
 * it, not as a user, until the graph is completed (the Graph takes it over:
 * gpurun_capture_push_allocations) or dropped (the drop function runs on
 * it). Allocates: callers keep the value anchored. */
void gpurun_capture_add_allocation(lua_State *L, struct gpurun_capture *capture, int index);

/* The object at index (a Buffer of another graph's allocation, which a
 * free node of this capture frees) is kept with the allocations, given to
 * the Graph with them (which tells the two apart) or dropped with them. */
void gpurun_capture_add_free(lua_State *L, struct gpurun_capture *capture, int index);

/* The object at index was freed inside the capture (a free node): its
 * capture lets go of it. */
void gpurun_capture_remove_allocation(lua_State *L, struct gpurun_capture *capture, int index);

/* Pushes a sequence of the objects allocated in the capture and not freed
 * in it, which the capture no longer keeps (a Graph takes them over). */
void gpurun_capture_push_allocations(lua_State *L, struct gpurun_capture *capture);

/* What runs on each object allocated in a capture whose graph goes without
 * a Graph taking it (an error, end_building after an error, a builder
 * closed or building again): the object's memory never comes to exist.
 * Set once by the type that allocates (types/buffer/type.c). */
void gpurun_capture_set_drop(void (*drop)(lua_State *L, int index));

/* While a capture is in progress on this thread, the driver refuses calls
 * it counts as unsafe during a capture (reading or setting a memory pool's
 * attributes, making or destroying a pool, allocating on another stream,
 * unloading code or destroying a stream, as a finalizer may mid-capture),
 * and the refusal invalidates the capture (cuda-python #2834). Around such
 * a call gpurun switches this thread to the relaxed capture mode, which
 * allows them (cuThreadExchangeStreamCaptureMode), and back after; with no
 * capture in progress both do nothing. */
struct gpurun_relaxed { int active; CUstreamCaptureMode saved; };
struct gpurun_relaxed gpurun_relax_captures(void);
void gpurun_restore_captures(struct gpurun_relaxed relaxed);

/* For each gpurun object in the sequence at index: one user fewer. */
void gpurun_release_users(lua_State *L, int index);

/* One user more (delta 1) or fewer (-1) for the gpurun object at index,
 * counted where its header says (a view's for its base, a kernel's for its
 * ObjectCode). */
void gpurun_adjust_users(lua_State *L, int index, int delta);

/* ---- frees deferred while a capture runs (runtime/deferred_frees.c) ---- */

/* Whether a capture is in progress, so that frees wait (capture.c says so
 * as captures begin and end). */
void gpurun_frees_wait(int wait);

/* Frees device memory of `context`, or, while a capture is in progress
 * (cuMemFree would break it), once none is. */
CUresult gpurun_free_memory(CUdeviceptr pointer, CUcontext context);

/* Frees stream-ordered memory (a pool's) after all the work of its context
 * queued so far: waits for the context, then cuMemFree; while a capture is
 * in progress, once none is. For the rare free whose ordering gpurun cannot
 * tell by streams (the buffer's stream was closed, or is being captured). */
CUresult gpurun_free_memory_after_device(CUdeviceptr pointer, CUcontext context);

/* Destroys an executable graph that kernels launch from the device
 * (cuGraphExecDestroy) after all the work of its context queued so far, so
 * that no kernel still queued launches it destroyed; while a capture is in
 * progress, once none is. */
CUresult gpurun_destroy_exec_after_device(CUgraphExec exec, CUcontext context);

/* Runs release(object) (a library's handle whose release waits for the
 * device, as cublasDestroy does) in `context` after all of its work queued
 * so far; while a capture is in progress, once none is. At exit, after
 * the contexts were released, it does not run: that released everything. */
CUresult gpurun_release_after_device(void (*release)(void *object), void *object,
                                     CUcontext context);

/* Frees page-locked host memory (cuMemFreeHost) once the event of its last
 * queued copy (NULL: none) has completed, destroying the event, and, for
 * mapped memory kernels were given, once kernel_context's work is done
 * (NULL: no kernel); while a capture is in progress, once none is. */
CUresult gpurun_free_host_memory(void *pointer, CUevent last_use, CUcontext kernel_context);

/* Frees what was deferred; called before allocating and after captures.
 * Nothing is freed while a capture is in progress or a host callback is
 * pending. */
void gpurun_flush_frees(void);

/* ---- host callbacks (runtime/state.c) ----------------------------------- */

/* What a HostCallback holds: its Lua function (a registry reference), and
 * its runs queued on streams or graph replays and not yet run. */
struct gpurun_host_call {
    int function_ref;
    int anchor_ref; /* the object, kept while runs are pending */
    long pending;
    long calls;     /* runs done */
};

void gpurun_host_call_init(struct gpurun_host_call *call);

/* The host function given to the driver (cuLaunchHostFunc, host nodes),
 * with the call as its data: runs on the driver's thread, posts the call
 * for the main thread and returns without waiting for it. */
void CUDA_CB gpurun_host_call_trampoline(void *data);

/* `runs` more runs of the call were queued; the object at object_index is
 * kept alive until they are done. cancel takes back runs whose queueing
 * failed. */
void gpurun_host_call_expect(lua_State *L, struct gpurun_host_call *call, int object_index,
                             long runs);
void gpurun_host_call_cancel(lua_State *L, struct gpurun_host_call *call, long runs);

/* Runs queued and not yet run, over every call. */
long gpurun_host_calls_pending(void);

/* Runs the Lua functions of the calls the driver has reached (on the main
 * thread); returns how many ran. *failed is
 * how many raised; if any, the first one's error value is pushed. Does
 * nothing inside a callback. */
int gpurun_host_calls_run(lua_State *L, int *failed);

/* gpurun_host_calls_run, then the deferred frees once
 * none is pending, and the first error raised after all of them ran. */
int gpurun_service_host_calls(lua_State *L);

/* Waits up to `nanoseconds` for the driver to reach a call; 1 if one is
 * waiting to run. */
int gpurun_host_calls_await(long nanoseconds);

/* Runs calls until none is pending: the device-wide waits, which run the
 * callbacks as every wait does. */
void gpurun_settle_host_calls(lua_State *L, const char *what);

/* Inside a callback's Lua function: raises that `what` is refused there. */
int gpurun_in_host_call(void);
void gpurun_check_not_in_host_call(lua_State *L, const char *what);

/* At exit, or after an interrupted wait: the driver's threads go on
 * without running what is queued. */
void gpurun_host_calls_shut_down(void);

#endif
