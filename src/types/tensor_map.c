/* gpurun.TensorMap, Buffer:as_tensor_map and gpurun.check_tensor_map.
 *
 * The options are cuda.core's (StridedMemoryView.as_tensor_map), with the
 * view's shape and strides given as options, since a Buffer is flat. Every
 * rule cuTensorMapEncodeTiled would refuse with a bare
 * CUDA_ERROR_INVALID_VALUE is checked first, with a message naming the
 * option; check_tensor_map runs the same checks with no Buffer and no
 * driver, which is what keeps them testable on a machine without a GPU. */
#include "types/tensor_map.h"

#include "types/buffer/pinned_buffer.h"

#include <stdint.h>
#include <string.h>

const struct gpurun_tag gpurun_tensor_map_tag = {"gpurun.TensorMap"};

#define MAX_RANK 5

/* As cuda.core (and Python) order them: dimension 1 is the outermost, the
 * last one the innermost, contiguous one. The driver's order is reversed. */
struct layout {
    int rank;
    uint64_t shape[MAX_RANK];
    uint64_t strides[MAX_RANK];    /* in elements */
    uint64_t box_dim[MAX_RANK];
    uint64_t element_strides[MAX_RANK];
    int data_type;                 /* enum gpurun_dtype */
    int interleave, swizzle, l2_promotion, oob_fill; /* the CU_TENSOR_MAP_* values */
};

/* The option names: cuda.core's enum members in lower case, each the
 * CU_TENSOR_MAP_* value at its index. */
static const char *const interleave_names[] = {"none", "interleave_16b", "interleave_32b", NULL};
static const char *const swizzle_names[] = {"none", "swizzle_32b", "swizzle_64b", "swizzle_128b",
                                            NULL};
static const char *const l2_promotion_names[] = {"none", "l2_64b", "l2_128b", "l2_256b", NULL};
static const char *const oob_fill_names[] = {"none", "nan_request_zero_fma", NULL};
static const unsigned int swizzle_span[] = {0, 32, 64, 128};

static const char *const known_options[] = {
    "shape", "strides", "box_dim", "element_strides", "data_type",
    "interleave", "swizzle", "l2_promotion", "oob_fill", NULL,
};

/* Pushes options[key] (raw), or nil when there are no options. */
static int push_option(lua_State *L, int arg, const char *key)
{
    if (lua_isnoneornil(L, arg)) {
        lua_pushnil(L);
        return LUA_TNIL;
    }
    lua_pushstring(L, key);
    return lua_rawget(L, arg);
}

/* options[key], a sequence of 1..5 integers in lo..hi (`what` says why
 * when one is not): its length, or 0 when the option is absent. */
static int read_sequence(lua_State *L, int arg, const char *key, uint64_t *out, uint64_t lo,
                         uint64_t hi, const char *what)
{
    int type = push_option(L, arg, key);
    if (type == LUA_TNIL) {
        lua_pop(L, 1);
        return 0;
    }
    if (type != LUA_TTABLE)
        gpurun_arg_error(L, arg, "%s: a sequence of integers expected, got %s", key,
                         gpurun_type_name(L, -1));
    lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
    if (n < 1 || n > MAX_RANK)
        gpurun_arg_error(L, arg, "%s has %I entries: a TMA tensor has 1 to %d dimensions", key,
                         (LUAI_UACINT)n, MAX_RANK);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, -1, i);
        lua_Integer value = 0;
        if (!gpurun_exact_integer(L, -1, &value))
            gpurun_arg_error(L, arg, "%s[%I]: an integer expected, got %s", key, (LUAI_UACINT)i,
                             gpurun_value_text(L, -1));
        if (value < 0 || (uint64_t)value < lo || (uint64_t)value > hi)
            gpurun_arg_error(L, arg, "%s[%I] is %I: %s", key, (LUAI_UACINT)i,
                             (LUAI_UACINT)value, what);
        out[i - 1] = (uint64_t)value;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return (int)n;
}

/* options[key], one of `names` ("none" when absent): its index. */
static int read_name(lua_State *L, int arg, const char *key, const char *const *names)
{
    int type = push_option(L, arg, key);
    int found = 0;
    if (type == LUA_TSTRING) {
        const char *name = lua_tostring(L, -1);
        while (names[found] && strcmp(names[found], name) != 0)
            found++;
    }
    if (type != LUA_TNIL && (type != LUA_TSTRING || names[found] == NULL)) {
        const char *got = type == LUA_TSTRING ? lua_pushfstring(L, "'%s'", lua_tostring(L, -1))
                                              : gpurun_type_name(L, -1);
        luaL_Buffer b;
        luaL_buffinit(L, &b);
        for (int i = 0; names[i]; i++) {
            luaL_addstring(&b, i ? ", " : "");
            luaL_addstring(&b, names[i]);
        }
        luaL_pushresult(&b);
        gpurun_arg_error(L, arg, "%s: one of %s expected, got %s", key, lua_tostring(L, -1), got);
    }
    lua_pop(L, 1);
    return type == LUA_TNIL ? 0 : found;
}

/* options.data_type: a dtype name that has a TMA type (the buffer's dtype
 * when absent). */
static int read_data_type(lua_State *L, int arg, int fallback)
{
    int type = push_option(L, arg, "data_type");
    int dtype = fallback;
    if (type == LUA_TSTRING) {
        dtype = gpurun_dtype_from_name(lua_tostring(L, -1));
        if (dtype < 0)
            gpurun_arg_error(L, arg, "data_type: unknown dtype '%s' (expected one of: %s)",
                             lua_tostring(L, -1), gpurun_dtype_names());
    } else if (type != LUA_TNIL) {
        gpurun_arg_error(L, arg, "data_type: a dtype name expected, got %s",
                         gpurun_type_name(L, -1));
    }
    lua_pop(L, 1);
    if (gpurun_dtypes[dtype].tensor_map_type < 0) {
        luaL_Buffer b;
        luaL_buffinit(L, &b);
        for (int d = 0, first = 1; d < GPURUN_DTYPE_COUNT; d++) {
            if (gpurun_dtypes[d].tensor_map_type < 0)
                continue;
            luaL_addstring(&b, first ? "" : ", ");
            luaL_addstring(&b, gpurun_dtypes[d].name);
            first = 0;
        }
        luaL_pushresult(&b);
        gpurun_arg_error(L, arg, "data_type %s has no TMA element type (TMA moves %s; pass "
                                 "data_type = one of those of the same size)",
                         gpurun_dtypes[dtype].name, lua_tostring(L, -1));
    }
    return dtype;
}

/* A product or sum past 2^64 saturates: every bound checked is far below. */
static uint64_t saturate(unsigned __int128 value)
{
    return value > UINT64_MAX ? UINT64_MAX : (uint64_t)value;
}

/* The options at arg, over `count` elements of `dtype`. */
static void read_layout(lua_State *L, int arg, int dtype, size_t count, struct layout *layout)
{
    gpurun_check_options(L, arg, known_options);
    memset(layout, 0, sizeof *layout);
    layout->data_type = read_data_type(L, arg, dtype);
    layout->rank = read_sequence(L, arg, "shape", layout->shape, 1, (uint64_t)1 << 32,
                                 "a dimension is 1..4294967296 elements");
    if (layout->rank == 0) { /* the whole buffer, in data_type's elements */
        size_t size = gpurun_dtypes[layout->data_type].size;
        size_t bytes = count * gpurun_dtypes[dtype].size;
        if (bytes % size != 0)
            gpurun_arg_error(L, arg, "shape is required: the buffer's %I bytes are no whole "
                                     "number of %s elements", (LUAI_UACINT)bytes,
                             gpurun_dtypes[layout->data_type].name);
        count = bytes / size;
        if (count == 0)
            gpurun_arg_error(L, arg, "an empty buffer has no tensor map");
        if (count > (uint64_t)1 << 32)
            gpurun_arg_error(L, arg, "shape is required for more than 4294967296 elements (a "
                                     "dimension holds no more); the buffer has %I",
                             (LUAI_UACINT)count);
        layout->rank = 1;
        layout->shape[0] = count;
    }
    int rank = layout->rank;
    int given = read_sequence(L, arg, "strides", layout->strides, 1, (uint64_t)1 << 62,
                              "a stride is a positive number of elements");
    if (given == 0) { /* C order, as cuda.core's default */
        layout->strides[rank - 1] = 1;
        for (int i = rank - 2; i >= 0; i--) {
            layout->strides[i] =
                saturate((unsigned __int128)layout->strides[i + 1] * layout->shape[i + 1]);
            if (layout->strides[i] > (uint64_t)1 << 62)
                gpurun_arg_error(L, arg, "shape: its dimensions after the first hold more than "
                                         "2^62 elements");
        }
    } else if (given != rank) {
        gpurun_arg_error(L, arg, "strides has %d entries; shape has %d", given, rank);
    }
    given = read_sequence(L, arg, "box_dim", layout->box_dim, 1, 256,
                          "a box dimension is 1..256 elements");
    if (given == 0)
        gpurun_arg_error(L, arg, "box_dim is required: the tile one copy moves, one entry per "
                                 "dimension of shape");
    if (given != rank)
        gpurun_arg_error(L, arg, "box_dim has %d entries; shape has %d", given, rank);
    given = read_sequence(L, arg, "element_strides", layout->element_strides, 1, 8,
                          "an element stride is 1..8");
    if (given == 0)
        for (int i = 0; i < rank; i++)
            layout->element_strides[i] = 1;
    else if (given != rank)
        gpurun_arg_error(L, arg, "element_strides has %d entries; shape has %d", given, rank);
    layout->interleave = read_name(L, arg, "interleave", interleave_names);
    layout->swizzle = read_name(L, arg, "swizzle", swizzle_names);
    layout->l2_promotion = read_name(L, arg, "l2_promotion", l2_promotion_names);
    layout->oob_fill = read_name(L, arg, "oob_fill", oob_fill_names);
}

/* The rules between the options, and against the memory at `address` of
 * `bytes`: cuTensorMapEncodeTiled's (cuda.h), and that the layout stays
 * inside the buffer. Returns the bytes the layout reaches. */
static size_t check_layout(lua_State *L, int arg, const struct layout *layout, uint64_t address,
                           size_t bytes)
{
    int rank = layout->rank;
    size_t size = gpurun_dtypes[layout->data_type].size;
    int interleaved = layout->interleave != CU_TENSOR_MAP_INTERLEAVE_NONE;
    unsigned int align = layout->interleave == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16;
    if (interleaved && rank < 3)
        gpurun_arg_error(L, arg, "interleave '%s' needs a shape of 3 or more dimensions; this "
                                 "one has %d", interleave_names[layout->interleave], rank);
    if (layout->interleave == CU_TENSOR_MAP_INTERLEAVE_32B
        && layout->swizzle != CU_TENSOR_MAP_SWIZZLE_32B)
        gpurun_arg_error(L, arg, "interleave 'interleave_32b' needs swizzle 'swizzle_32b', not "
                                 "'%s'", swizzle_names[layout->swizzle]);
    if (layout->strides[rank - 1] != 1)
        gpurun_arg_error(L, arg, "strides[%d] is %I: the innermost dimension is read "
                                 "contiguously, so its stride must be 1", rank,
                         (LUAI_UACINT)layout->strides[rank - 1]);
    for (int i = 0; i < rank - 1; i++) {
        uint64_t stride = saturate((unsigned __int128)layout->strides[i] * size);
        if (stride % align != 0)
            gpurun_arg_error(L, arg, "strides[%d] is %I elements = %I bytes: a stride must be "
                                     "a multiple of %d bytes", i + 1,
                             (LUAI_UACINT)layout->strides[i], (LUAI_UACINT)stride, (int)align);
        if (stride >= (uint64_t)1 << 40)
            gpurun_arg_error(L, arg, "strides[%d] is %I elements: a stride must be less than "
                                     "2^40 bytes", i + 1, (LUAI_UACINT)layout->strides[i]);
    }
    uint64_t inner = layout->box_dim[rank - 1] * size;
    if (!interleaved && inner % 16 != 0)
        gpurun_arg_error(L, arg, "box_dim[%d] is %I elements = %I bytes: the innermost box "
                                 "dimension must be a multiple of 16 bytes", rank,
                         (LUAI_UACINT)layout->box_dim[rank - 1], (LUAI_UACINT)inner);
    if (!interleaved && layout->swizzle != CU_TENSOR_MAP_SWIZZLE_NONE
        && inner > swizzle_span[layout->swizzle])
        gpurun_arg_error(L, arg, "box_dim[%d] is %I elements = %I bytes, more than swizzle "
                                 "'%s' spans (%d bytes)", rank,
                         (LUAI_UACINT)layout->box_dim[rank - 1], (LUAI_UACINT)inner,
                         swizzle_names[layout->swizzle], (int)swizzle_span[layout->swizzle]);
    if (layout->oob_fill != CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE
        && gpurun_dtypes[layout->data_type].kind != GPURUN_KIND_FLOAT)
        gpurun_arg_error(L, arg, "oob_fill '%s' needs a floating-point data_type, not %s",
                         oob_fill_names[layout->oob_fill],
                         gpurun_dtypes[layout->data_type].name);
    if (address % align != 0)
        gpurun_arg_error(L, arg, "the buffer's address %p is not %d-byte aligned (a view must "
                                 "start a multiple of %d bytes into its buffer)",
                         (void *)(uintptr_t)address, (int)align, (int)align);
    unsigned __int128 last = 0;
    for (int i = 0; i < rank; i++)
        last += (unsigned __int128)(layout->shape[i] - 1) * layout->strides[i];
    uint64_t extent = saturate((last + 1) * size);
    if (extent > bytes)
        gpurun_arg_error(L, arg, "the layout reaches %I bytes but the buffer holds %I",
                         (LUAI_UACINT)extent, (LUAI_UACINT)bytes);
    return (size_t)extent;
}

static void encode(lua_State *L, const struct layout *layout, CUdeviceptr address,
                   CUcontext context, CUtensorMap *out)
{
    int rank = layout->rank;
    size_t size = gpurun_dtypes[layout->data_type].size;
    cuuint64_t dims[MAX_RANK], strides[MAX_RANK - 1];
    cuuint32_t box[MAX_RANK], element_strides[MAX_RANK];
    for (int i = 0; i < rank; i++) {
        dims[i] = layout->shape[rank - 1 - i];
        box[i] = (cuuint32_t)layout->box_dim[rank - 1 - i];
        element_strides[i] = (cuuint32_t)layout->element_strides[rank - 1 - i];
    }
    for (int i = 0; i < rank - 1; i++)
        strides[i] = layout->strides[rank - 2 - i] * size;
    CUcontext previous = gpurun_enter_context(context);
    CUresult result = CUDA_CALL(
        cuTensorMapEncodeTiled, out,
        (CUtensorMapDataType)gpurun_dtypes[layout->data_type].tensor_map_type,
        (cuuint32_t)rank, (void *)(uintptr_t)address, dims, strides, box, element_strides,
        (CUtensorMapInterleave)layout->interleave, (CUtensorMapSwizzle)layout->swizzle,
        (CUtensorMapL2promotion)layout->l2_promotion, (CUtensorMapFloatOOBfill)layout->oob_fill);
    gpurun_leave_context(previous);
    if (result != CUDA_SUCCESS)
        gpurun_cuda_error(L, "encoding a TMA descriptor");
}

/* User value 1: the owner of the buffer at index; 2: that buffer. */
static void point_at(lua_State *L, struct gpurun_tensor_map *map, int map_index, int index,
                     struct gpurun_buffer *buffer)
{
    if (buffer->base)
        lua_getiuservalue(L, index, 1);
    else
        lua_pushvalue(L, index);
    lua_setiuservalue(L, map_index, 1);
    lua_pushvalue(L, index);
    lua_setiuservalue(L, map_index, 2);
    map->buffer = buffer;
}

/* buf:as_tensor_map{ shape =, strides =, box_dim =, element_strides =,
 * data_type =, interleave =, swizzle =, l2_promotion =, oob_fill = } */
static int buffer_as_tensor_map(lua_State *L)
{
    struct gpurun_buffer *buffer = gpurun_check_buffer(L, 1);
    gpurun_check_buffer_memory(L, buffer, NULL);
    if (lua_isnoneornil(L, 2))
        gpurun_arg_error(L, 2, "table of options expected (box_dim at least)");
    struct layout layout;
    read_layout(L, 2, buffer->dtype, buffer->count, &layout);
    size_t extent =
        check_layout(L, 2, &layout, buffer->pointer, buffer->count * buffer->element_size);
    struct gpurun_tensor_map *map = gpurun_new_object(L, sizeof *map, 2, &gpurun_tensor_map_tag);
    int map_index = lua_gettop(L);
    /* The allocation can run a finalizer that closed the buffer. */
    buffer = gpurun_check_buffer(L, 1);
    uintptr_t storage = (uintptr_t)map->storage;
    map->map = (CUtensorMap *)((storage + GPURUN_TENSOR_MAP_ALIGN - 1)
                               & ~(uintptr_t)(GPURUN_TENSOR_MAP_ALIGN - 1));
    encode(L, &layout, buffer->pointer, buffer->context, map->map);
    point_at(L, map, map_index, 1, buffer);
    map->buffer_dtype = buffer->dtype;
    map->data_type = layout.data_type;
    map->rank = layout.rank;
    map->extent = extent;
    map->alignment = layout.interleave == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16;
    map->header.closed = 0;
    return 1;
}

/* check_tensor_map(options, dtype, count[, address]) -> true: what
 * as_tensor_map checks, for `count` elements of `dtype` at `address` (0 when
 * absent), without a Buffer or the driver. */
static int module_check_tensor_map(lua_State *L)
{
    if (lua_isnoneornil(L, 2))
        gpurun_type_error(L, 2, "dtype name");
    int dtype = gpurun_check_dtype(L, 2, GPURUN_FLOAT32);
    size_t count = gpurun_check_count(L, 3);
    lua_Integer address = gpurun_opt_integer(L, 4, 0, "a non-negative integer address");
    if (address < 0)
        gpurun_arg_error(L, 4, "address is %I: a non-negative integer expected",
                         (LUAI_UACINT)address);
    if (lua_isnoneornil(L, 1))
        gpurun_arg_error(L, 1, "table of options expected (box_dim at least)");
    if (count > SIZE_MAX / gpurun_dtypes[dtype].size)
        gpurun_arg_error(L, 3, "%I elements of %s are more bytes than memory holds",
                         (LUAI_UACINT)count, gpurun_dtypes[dtype].name);
    struct layout layout;
    read_layout(L, 1, dtype, count, &layout);
    check_layout(L, 1, &layout, (uint64_t)address, count * gpurun_dtypes[dtype].size);
    lua_pushboolean(L, 1);
    return 1;
}

/* map:replace_address(buffer) -> map: the same layout over another buffer,
 * with cuTensorMapReplaceAddress (no new encoding). Launches, plans and
 * graphs made before keep the buffer their copy points at. */
static int tensor_map_replace_address(lua_State *L)
{
    struct gpurun_tensor_map *map = gpurun_check_open(L, 1, &gpurun_tensor_map_tag);
    struct gpurun_buffer *buffer = gpurun_check_buffer(L, 2);
    gpurun_check_buffer_memory(L, buffer, NULL);
    if (buffer->dtype != map->buffer_dtype)
        gpurun_arg_error(L, 2, "a %s buffer expected, as the map was made over; got %s",
                         gpurun_dtypes[map->buffer_dtype].name, gpurun_dtypes[buffer->dtype].name);
    if (buffer->device != map->buffer->device)
        gpurun_arg_error(L, 2, "the buffer lives on device %d; the map was made on device %d",
                         buffer->device, map->buffer->device);
    if (buffer->pointer % map->alignment != 0)
        gpurun_arg_error(L, 2, "the buffer's address %p is not %d-byte aligned",
                         (void *)(uintptr_t)buffer->pointer, (int)map->alignment);
    size_t bytes = buffer->count * buffer->element_size;
    if (bytes < map->extent)
        gpurun_arg_error(L, 2, "the map's layout reaches %I bytes but the buffer holds %I",
                         (LUAI_UACINT)map->extent, (LUAI_UACINT)bytes);
    CUcontext previous = gpurun_enter_context(buffer->context);
    CUresult result = CUDA_CALL(cuTensorMapReplaceAddress, map->map,
                                (void *)(uintptr_t)buffer->pointer);
    gpurun_leave_context(previous);
    if (result != CUDA_SUCCESS)
        gpurun_cuda_error(L, "pointing a TMA descriptor at another buffer");
    point_at(L, map, 1, 2, buffer);
    lua_settop(L, 1);
    return 1;
}

/* What a launch copied stays valid: plans and graphs keep the buffer
 * itself, so closing lets it go. */
static int tensor_map_close(lua_State *L)
{
    struct gpurun_tensor_map *map = gpurun_check_tagged(L, 1, &gpurun_tensor_map_tag);
    if (map->header.closed)
        return 0;
    map->header.closed = 1;
    map->buffer = NULL;
    lua_pushnil(L);
    lua_setiuservalue(L, 1, 1);
    lua_pushnil(L);
    lua_setiuservalue(L, 1, 2);
    return 0;
}

static int tensor_map_tostring(lua_State *L)
{
    struct gpurun_tensor_map *map = gpurun_check_tagged(L, 1, &gpurun_tensor_map_tag);
    if (map->header.closed)
        lua_pushliteral(L, "gpurun.TensorMap(closed)");
    else
        lua_pushfstring(L, "gpurun.TensorMap(%s, %d dimension%s)",
                        gpurun_dtypes[map->data_type].name, map->rank, map->rank == 1 ? "" : "s");
    return 1;
}

int gpurun_push_argument_memory(lua_State *L, int index)
{
    if (gpurun_to_tagged(L, index, &gpurun_buffer_tag)
        || gpurun_to_tagged(L, index, &gpurun_pinned_tag)) {
        lua_pushvalue(L, index);
        return 1;
    }
    if (gpurun_to_tagged(L, index, &gpurun_tensor_map_tag)) {
        if (lua_getiuservalue(L, index, 1) == LUA_TUSERDATA)
            return 1;
        lua_pop(L, 1);
    }
    return 0;
}

static const luaL_Reg tensor_map_methods[] = {
    {"replace_address", tensor_map_replace_address},
    {"close", tensor_map_close},
    {NULL, NULL}
};

static const luaL_Reg tensor_map_metamethods[] = {
    {"__tostring", tensor_map_tostring},
    {"__close", tensor_map_close},
    {"__gc", tensor_map_close},
    {NULL, NULL}
};

static const struct gpurun_type tensor_map_type = {
    &gpurun_tensor_map_tag, tensor_map_methods, tensor_map_metamethods, NULL, NULL,
};

static const luaL_Reg buffer_methods[] = {
    {"as_tensor_map", buffer_as_tensor_map},
    {NULL, NULL}
};

static const luaL_Reg module_functions[] = {
    {"check_tensor_map", module_check_tensor_map},
    {NULL, NULL}
};

void gpurun_open_tensor_map(lua_State *L)
{
    gpurun_register_type(L, &tensor_map_type);
    gpurun_add_methods(L, &gpurun_buffer_tag, buffer_methods);
    gpurun_set_functions(L, module_functions);
}
