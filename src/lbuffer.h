/* gpurun.Buffer: device memory holding elements of one dtype. */
#ifndef GPURUN_LBUFFER_H
#define GPURUN_LBUFFER_H

#include "runtime.h"
#include "lstream.h"

extern const struct gpurun_tag gpurun_buffer_tag;

struct gpurun_buffer {
    struct gpurun_object header; /* first: the launch path reads it through the tag */
    CUdeviceptr pointer;
    size_t count;                /* elements */
    size_t element_size;
    int dtype;                   /* enum gpurun_dtype */
    CUcontext context;           /* where the memory lives, and is freed */
    int device;
};

/* An open Buffer at index, or an error. */
struct gpurun_buffer *gpurun_check_buffer(lua_State *L, int index);

/* An open Buffer on the current device (a copy or a fill on another
 * device's memory would need its context), or an error. */
struct gpurun_buffer *gpurun_check_live_buffer(lua_State *L, int index);

/* Allocates count elements on the current device and pushes the Buffer;
 * count_arg names the argument when the byte size overflows. */
struct gpurun_buffer *gpurun_push_new_buffer(lua_State *L, size_t count, int dtype, int count_arg);

/* ---- ordering and transfers (lbuffer_transfer.c) ------------------------

 * Every buffer operation goes on gpurun_operation_stream(): queued there
 * and waited for only when host memory is involved; with no stream, the
 * whole device is waited for before (a kernel may still use the buffer) and
 * after (so that what follows sees the result). A stream being captured is
 * refused: the capture would keep neither host memory nor the buffer. */
CUstream gpurun_begin_transfer(lua_State *L, int stream_index, const char *operation);
void gpurun_end_transfer(lua_State *L, CUstream stream, const char *operation);

/* For operations a graph can hold (fills, copies between buffers): the
 * Stream or, while it builds, the GraphBuilder at stream_index (then
 * *capture is set, and the operation becomes a memset or memcpy node). */
CUstream gpurun_begin_device_transfer(lua_State *L, int stream_index, const char *operation,
                                      struct gpurun_capture **capture);

/* The same with the current stream, for functions that take none. */
CUstream gpurun_begin_host_transfer(lua_State *L, const char *operation);

/* With no stream, a copy that involves another device's buffer waits for
 * that device too, before and after. */
void gpurun_sync_other_device(lua_State *L, const struct gpurun_buffer *buffer,
                              const char *operation);

/* Copies count elements from first on, to or from host memory; each returns
 * once its copy is done, so that the host memory can be reused. */
void gpurun_write_elements(lua_State *L, struct gpurun_buffer *buffer, size_t first,
                           size_t count, const void *host, CUstream stream);
void gpurun_read_elements(lua_State *L, const struct gpurun_buffer *buffer, size_t first,
                          size_t count, void *host, CUstream stream);

/* Sets every element to the element at pattern; `capturing`: into a graph
 * (memset nodes only). */
void gpurun_fill_elements(lua_State *L, struct gpurun_buffer *buffer,
                          const unsigned char *pattern, CUstream stream, int capturing);

/* gpurun_cuda_error, saying what to do instead when the call failed because
 * a graph is being captured. */
int gpurun_transfer_error(lua_State *L, const char *what_fmt, ...);

void gpurun_open_buffer(lua_State *L);

#endif
