/* gpurun.default_rng and gpurun.Generator: a seeded generator that fills
 * buffers with uniform floats or integers, and gives the same numbers as Lua
 * tables for host-side references.
 *
 * The algorithm is xoshiro256** seeded through splitmix64, both written out
 * here, so a seed gives the same numbers on every machine and every build.
 * Every element takes exactly one 64-bit draw (integers may take more, only
 * to reject a biased draw): random(n, "float64") and random_table(n) from
 * the same seed agree element for element. */
#include "types/generator.h"

#include "types/buffer/buffer.h"

#include <limits.h>
#include <math.h>
#include <string.h>

/* Elements generated per host-to-device copy: bounds the staging memory. */
#define GENERATE_CHUNK ((size_t)1 << 20)

const struct gpurun_tag gpurun_generator_tag = {"gpurun.Generator"};

struct generator {
    struct gpurun_object header;
    uint64_t state[4];
    lua_Integer seed;
};

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static inline uint64_t rotate_left(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static inline uint64_t next_u64(struct generator *g)
{
    uint64_t *s = g->state;
    uint64_t result = rotate_left(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotate_left(s[3], 45);
    return result;
}

/* The top bits, which are xoshiro's best, as a fraction in [0, 1). */
static inline double next_float64(struct generator *g)
{
    return (double)(next_u64(g) >> 11) * 0x1p-53;
}

static inline float next_float32(struct generator *g)
{
    return (float)(next_u64(g) >> 40) * 0x1p-24f;
}

/* The same for a float dtype of `digits` significant bits: a multiple of
 * 2^-digits, which the dtype holds exactly (next_float32 and next_float64
 * for 24 and 53 bits). */
static inline double next_fraction(struct generator *g, int digits)
{
    return ldexp((double)(next_u64(g) >> (64 - digits)), -digits);
}

/* Uniform in [0, range) without modulo bias (Lemire's multiply-and-reject). */
static inline uint64_t next_below(struct generator *g, uint64_t range)
{
    unsigned __int128 product = (unsigned __int128)next_u64(g) * range;
    uint64_t low = (uint64_t)product;
    if (low < range) {
        uint64_t threshold = -range % range;
        while (low < threshold) {
            product = (unsigned __int128)next_u64(g) * range;
            low = (uint64_t)product;
        }
    }
    return (uint64_t)(product >> 64);
}

static struct generator *check_generator(lua_State *L, int index)
{
    return gpurun_check_open(L, index, &gpurun_generator_tag);
}

static int check_float_dtype(lua_State *L, int arg, int default_dtype, const char *instead)
{
    int dtype = gpurun_check_dtype(L, arg, default_dtype);
    if (gpurun_dtypes[dtype].kind != GPURUN_KIND_FLOAT)
        gpurun_arg_error(L, arg, "float dtype (float32, float64, float16, bfloat16) expected, "
                                 "got %s (%s)", gpurun_dtypes[dtype].name, instead);
    return dtype;
}

/* What a buffer is filled with: uniform floats in [0, 1) for a float dtype,
 * uniform integers in [low, low + range) for the others. */
struct draws {
    struct generator *g;
    int dtype;
    uint64_t low, range;
};

/* The next n draws, as elements of the dtype, at host. */
static void draw_elements(const struct draws *d, void *host, size_t n)
{
    struct generator *g = d->g;
    uint64_t low = d->low, range = d->range;
    if (d->dtype == GPURUN_FLOAT32) {
        float *out = host;
        for (size_t i = 0; i < n; i++)
            out[i] = next_float32(g);
        return;
    }
    if (d->dtype == GPURUN_FLOAT64) {
        double *out = host;
        for (size_t i = 0; i < n; i++)
            out[i] = next_float64(g);
        return;
    }
    const struct gpurun_dtype_info *info = &gpurun_dtypes[d->dtype];
    if (info->kind == GPURUN_KIND_FLOAT) { /* the 16-bit floats */
        unsigned char *out = host;
        for (size_t i = 0; i < n; i++)
            gpurun_store_float(d->dtype, next_fraction(g, info->digits), out + i * info->size);
        return;
    }
    /* Two's complement: the low bytes of low + offset are the element. */
    switch (gpurun_dtypes[d->dtype].size) {
    case 1:
        for (size_t i = 0; i < n; i++)
            ((uint8_t *)host)[i] = (uint8_t)(low + next_below(g, range));
        break;
    case 2:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)host)[i] = (uint16_t)(low + next_below(g, range));
        break;
    case 4:
        for (size_t i = 0; i < n; i++)
            ((uint32_t *)host)[i] = (uint32_t)(low + next_below(g, range));
        break;
    default:
        for (size_t i = 0; i < n; i++)
            ((uint64_t *)host)[i] = low + next_below(g, range);
        break;
    }
}

/* Pushes a new buffer of count elements (the count is argument 2) holding
 * the next draws, generated and copied to the device a chunk at a time, on
 * the stream of the options at options_arg (the current stream by default). */
static void push_drawn_buffer(lua_State *L, const struct draws *d, size_t count, int options_arg,
                              const char *operation)
{
    struct gpurun_placement where;
    gpurun_check_placement(L, options_arg, &where, 1);
    struct gpurun_buffer *buffer = gpurun_push_new_buffer(L, count, d->dtype, 2, &where);
    size_t chunk = count < GENERATE_CHUNK ? count : GENERATE_CHUNK;
    void *host = gpurun_push_staging(L, chunk * buffer->element_size);
    CUstream stream = gpurun_begin_transfer(L, where.stream_index, operation);
    for (size_t first = 0; first < count; first += chunk) {
        size_t n = count - first < chunk ? count - first : chunk;
        draw_elements(d, host, n);
        gpurun_write_elements(L, buffer, first, n, host, stream);
    }
    gpurun_end_transfer(L, stream, operation);
    lua_pop(L, 1); /* the staging: the buffer is left on top */
}

/* default_rng(seed): any integer seed. */
static int module_default_rng(lua_State *L)
{
    lua_Integer seed = gpurun_check_integer(L, 1, "integer seed");
    struct generator *g = gpurun_new_object(L, sizeof *g, 0, &gpurun_generator_tag);
    uint64_t x = (uint64_t)seed;
    for (int i = 0; i < 4; i++)
        g->state[i] = splitmix64(&x);
    g->seed = seed;
    g->header.closed = 0;
    return 1;
}

/* random(n [, dtype="float32" [, { pool =, stream = }]]) -> Buffer of
 * uniform floats in [0, 1). */
static int generator_random(lua_State *L)
{
    struct generator *g = check_generator(L, 1);
    size_t count = gpurun_check_count(L, 2);
    int dtype = check_float_dtype(L, 3, GPURUN_FLOAT32, "integers() makes integer buffers");
    lua_settop(L, 4);
    struct draws draws = {.g = g, .dtype = dtype};
    push_drawn_buffer(L, &draws, count, 4, "Generator:random");
    return 1;
}

/* integers(n, low, high [, dtype="int32" [, options]]) -> Buffer of uniform
 * integers in [low, high). */
static int generator_integers(lua_State *L)
{
    struct generator *g = check_generator(L, 1);
    size_t count = gpurun_check_count(L, 2);
    lua_Integer low = gpurun_check_integer(L, 3, NULL);
    lua_Integer high = gpurun_check_integer(L, 4, NULL);
    int dtype = gpurun_check_dtype(L, 5, GPURUN_INT32);
    const struct gpurun_dtype_info *info = &gpurun_dtypes[dtype];
    if (info->kind == GPURUN_KIND_FLOAT || info->kind == GPURUN_KIND_COMPLEX)
        gpurun_arg_error(L, 5, "integer dtype expected, got %s (random() makes float buffers)",
                         info->name);
    if (high <= low)
        gpurun_arg_error(L, 4, "high (%I) must be greater than low (%I)", (LUAI_UACINT)high,
                         (LUAI_UACINT)low);
    if (low < info->min || high - 1 > info->max)
        gpurun_arg_error(L, 4, "range [%I, %I) does not fit %s (%s)", (LUAI_UACINT)low,
                         (LUAI_UACINT)high, info->name, info->range);
    lua_settop(L, 6);
    struct draws draws = {.g = g, .dtype = dtype, .low = (uint64_t)low,
                          .range = (uint64_t)high - (uint64_t)low};
    push_drawn_buffer(L, &draws, count, 6, "Generator:integers");
    return 1;
}

/* random_table(n [, dtype="float64"]) -> sequence of the floats random(n,
 * dtype) would put in a buffer, each a multiple of 2^-digits of the dtype. */
static int generator_random_table(lua_State *L)
{
    struct generator *g = check_generator(L, 1);
    size_t count = gpurun_check_count(L, 2);
    int dtype = check_float_dtype(L, 3, GPURUN_FLOAT64, "the values are floats");
    if (count > INT_MAX)
        gpurun_arg_error(L, 2, "too many elements for a Lua table");
    lua_createtable(L, (int)count, 0);
    for (size_t i = 0; i < count; i++) {
        lua_pushnumber(L, next_fraction(g, gpurun_dtypes[dtype].digits));
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

static int generator_close(lua_State *L)
{
    struct generator *g = gpurun_check_tagged(L, 1, &gpurun_generator_tag);
    g->header.closed = 1;
    return 0;
}

static int generator_tostring(lua_State *L)
{
    struct generator *g = gpurun_check_tagged(L, 1, &gpurun_generator_tag);
    if (g->header.closed)
        lua_pushliteral(L, "gpurun.Generator(closed)");
    else
        lua_pushfstring(L, "gpurun.Generator(seed=%I)", (LUAI_UACINT)g->seed);
    return 1;
}

static const luaL_Reg generator_methods[] = {
    {"random", generator_random},
    {"integers", generator_integers},
    {"random_table", generator_random_table},
    {"close", generator_close},
    {NULL, NULL}
};

static const luaL_Reg generator_metamethods[] = {
    {"__tostring", generator_tostring},
    {"__close", generator_close},
    {"__gc", generator_close},
    {NULL, NULL}
};

static const luaL_Reg module_functions[] = {
    {"default_rng", module_default_rng},
    {NULL, NULL}
};

static const struct gpurun_type generator_type = {
    &gpurun_generator_tag, generator_methods, generator_metamethods, NULL, NULL,
};

void gpurun_open_rng(lua_State *L)
{
    gpurun_register_type(L, &generator_type);
    gpurun_set_functions(L, module_functions);
}
