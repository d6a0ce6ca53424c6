/* What lbuffer.c shares with lrng.c and lcompare.c (and anyone else who
 * makes buffers from host data or reads them back): the element types, their
 * checks, and the paths between host and device with their ordering rules. */
#ifndef GPURUN_LBUFFER_H
#define GPURUN_LBUFFER_H

#include "gpurun.h"

enum gpurun_dtype {
    GPURUN_FLOAT32, GPURUN_FLOAT64,
    GPURUN_INT32, GPURUN_UINT32, GPURUN_INT64, GPURUN_UINT64,
    GPURUN_INT8, GPURUN_UINT8,
    GPURUN_DTYPE_COUNT
};

enum gpurun_dtype_kind { GPURUN_KIND_FLOAT, GPURUN_KIND_SIGNED, GPURUN_KIND_UNSIGNED };

struct gpurun_dtype_info {
    const char *name;
    size_t size;
    enum gpurun_dtype_kind kind;
    /* Integer kinds: the Lua integers that fit (uint64's top half has no Lua
     * integer, so its max is LUA_MAXINTEGER), the floats that fit as
     * [float_low, float_high), and the range as text for messages. */
    lua_Integer min, max;
    double float_low, float_high;
    const char *range;
};

extern const struct gpurun_dtype_info gpurun_dtypes[GPURUN_DTYPE_COUNT];

/* The dtype named by the optional string at arg (default_dtype when absent);
 * an unknown name raises an error listing the valid ones. */
int gpurun_check_dtype(lua_State *L, int arg, int default_dtype);

/* A positive integer element count at arg, or a "bad argument" error. */
size_t gpurun_check_count(lua_State *L, int arg);

/* A Buffer that can be worked on now, or an error: open, and on the current
 * device. */
struct gpurun_buffer *gpurun_check_live_buffer(lua_State *L, int index);

/* Allocates a buffer of count elements on the current device and pushes it.
 * count_arg names the argument in the error when the byte size overflows. */
struct gpurun_buffer *gpurun_push_new_buffer(lua_State *L, size_t count, int dtype,
                                             int count_arg);

/* Writing or reading buffers from or into host memory in pieces, through
 * staging areas the caller reuses: begin (waits for the whole device when
 * there is no stream), any number of writes and reads (each returns once its
 * copy is done, so the staging area can be reused), end. The stream is the
 * current one; operation names the caller in errors ("Generator:random"). */
CUstream gpurun_begin_host_transfer(lua_State *L, const char *operation);
void gpurun_write_elements(lua_State *L, struct gpurun_buffer *buffer, size_t first,
                           size_t count, const void *host, CUstream stream);
void gpurun_read_elements(lua_State *L, const struct gpurun_buffer *buffer, size_t first,
                          size_t count, void *host, CUstream stream);
void gpurun_end_host_transfer(lua_State *L, CUstream stream, const char *operation);

/* Host staging memory: a userdata left on the stack, so that an error raised
 * while it is in use cannot leak it. */
void *gpurun_push_staging(lua_State *L, size_t bytes);

/* lrng.c: gpurun.default_rng and gpurun.Generator. */
void gpurun_open_rng(lua_State *L);

/* lcompare.c: gpurun.compare and gpurun.allclose. */
void gpurun_open_compare(lua_State *L);

#endif
