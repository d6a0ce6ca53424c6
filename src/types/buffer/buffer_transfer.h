/* Buffer operations in order with the GPU's work (types/buffer/buffer_transfer.c):
 * which stream they go on, the copies between host memory and buffers, and
 * fills. */
#ifndef GPURUN_TYPES_BUFFER_TRANSFER_H
#define GPURUN_TYPES_BUFFER_TRANSFER_H

#include "types/buffer/buffer_object.h"

/* Every buffer operation goes on gpurun_operation_stream(): queued there
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

#endif
