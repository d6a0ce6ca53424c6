/* gpurun.compare and gpurun.allclose: numpy's isclose over a Buffer and a
 * Buffer or a number, or over a Lua sequence and a sequence or a number:
 * the one copy of the rule (gpurun.check compares Lua sequences through it).
 * The buffers are read back in chunks into staging memory and checked in C,
 * so any size is compared in bounded host memory and no Lua runs per
 * element. */
#include "types/compare.h"

#include "types/buffer/buffer.h"

#include <math.h>

/* Elements compared per round trip: bounds the host memory compare needs. */
#define COMPARE_CHUNK ((size_t)1 << 20)

struct comparison {
    double rtol, atol;
    size_t count, mismatches, nan;
    size_t worst;           /* 0-based */
    double worst_excess;    /* how far the worst mismatch is past its tolerance */
    double largest_pass;    /* largest difference among passing elements */
    double worst_actual, worst_expected, worst_abs_diff;
};

static void record_worst(struct comparison *c, size_t index, double actual, double expected,
                         double diff)
{
    c->worst = index;
    c->worst_actual = actual;
    c->worst_expected = expected;
    c->worst_abs_diff = diff;
}

/* numpy's isclose: |x - y| <= atol + rtol*|y|, where infinities are close
 * only to themselves and NaN to nothing. */
static void compare_chunk(struct comparison *c, size_t first, const double *x,
                          const double *y, double y_scalar, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double actual = x[i];
        double expected = y ? y[i] : y_scalar;
        double diff = fabs(actual - expected);
        double tolerance = c->atol + c->rtol * fabs(expected);
        int close = isfinite(actual) && isfinite(expected) ? diff <= tolerance
                                                           : actual == expected;
        if (close) {
            if (c->mismatches == 0 && diff > c->largest_pass) {
                c->largest_pass = diff;
                record_worst(c, first + i, actual, expected, diff);
            }
            continue;
        }
        if (isnan(actual) && !isnan(expected))
            c->nan++;
        double excess = isfinite(diff) ? diff - tolerance : INFINITY;
        if (c->mismatches == 0 || excess > c->worst_excess) {
            c->worst_excess = excess;
            record_worst(c, first + i, actual, expected, diff);
        }
        c->mismatches++;
    }
}

/* One side of a comparison, read in chunks into staging memory. */
struct operand {
    const struct gpurun_buffer *buffer;
    void *raw;        /* the chunk as stored; unused for float64 */
    double *values;   /* the chunk as doubles */
};

static void stage_operand(lua_State *L, struct operand *operand, size_t chunk)
{
    operand->values = gpurun_push_staging(L, chunk * sizeof(double));
    operand->raw = operand->buffer->dtype == GPURUN_FLOAT64
        ? (void *)operand->values
        : gpurun_push_staging(L, chunk * operand->buffer->element_size);
}

static void read_operand(lua_State *L, struct operand *operand, size_t first, size_t n,
                         CUstream stream)
{
    gpurun_read_elements(L, operand->buffer, first, n, operand->raw, stream);
    if (operand->buffer->dtype != GPURUN_FLOAT64)
        gpurun_widen(operand->buffer->dtype, operand->raw, operand->values, n);
}

/* A Lua table, and not an object made of one (a gpurun.ProgramOptions):
 * one whose metatable names a type. */
static int is_sequence(lua_State *L, int index)
{
    if (lua_type(L, index) != LUA_TTABLE)
        return 0;
    int named = luaL_getmetafield(L, index, "__name");
    if (named != LUA_TNIL)
        lua_pop(L, 1);
    return named != LUA_TSTRING;
}

static void check_tolerances(lua_State *L, struct comparison *c)
{
    c->rtol = gpurun_opt_number(L, 3, 1e-5);
    c->atol = gpurun_opt_number(L, 4, 1e-8);
    if (!(c->rtol >= 0))
        gpurun_arg_error(L, 3, "non-negative relative tolerance expected");
    if (!(c->atol >= 0))
        gpurun_arg_error(L, 4, "non-negative absolute tolerance expected");
    lua_settop(L, 4);
}

/* compare(x, y [, rtol [, atol]]) with x a sequence of numbers and y a
 * sequence of as many or a number, converted to doubles in staging memory. */
static void compare_sequences(lua_State *L, struct comparison *c)
{
    size_t count = lua_rawlen(L, 1);
    int y_table = is_sequence(L, 2);
    double y_scalar = 0;
    if (y_table) {
        if (lua_rawlen(L, 2) != count)
            gpurun_arg_error(L, 2, "table of %I numbers expected, got %I", (LUAI_UACINT)count,
                             (LUAI_UACINT)lua_rawlen(L, 2));
    } else if (lua_type(L, 2) == LUA_TNUMBER) {
        y_scalar = lua_tonumber(L, 2);
    } else {
        gpurun_type_error(L, 2, "table of numbers or number");
    }
    check_tolerances(L, c);
    c->count = count;
    double *x = gpurun_push_staging(L, count * sizeof(double));
    gpurun_store_sequence(L, 1, 1, count, GPURUN_FLOAT64, x);
    double *y = NULL;
    if (y_table) {
        y = gpurun_push_staging(L, count * sizeof(double));
        gpurun_store_sequence(L, 2, 2, count, GPURUN_FLOAT64, y);
    }
    if (count == 0)
        return;
    double expected = y ? y[0] : y_scalar;
    record_worst(c, 0, x[0], expected, fabs(x[0] - expected));
    compare_chunk(c, 0, x, y, y_scalar, count);
}

/* A complex element is two numbers, which one tolerance does not cover. */
static void refuse_complex(lua_State *L, int arg, const struct gpurun_buffer *buffer)
{
    if (gpurun_dtypes[buffer->dtype].kind == GPURUN_KIND_COMPLEX)
        gpurun_arg_error(L, arg, "%s buffers are not compared (compare the tables of their "
                                 "parts: gpurun.from_bytes(buf:to_bytes(), \"%s\"))",
                         gpurun_dtypes[buffer->dtype].name,
                         gpurun_dtypes[gpurun_dtypes[buffer->dtype].part].name);
}

/* compare(x, y [, rtol [, atol]]) with x a Buffer and y a Buffer of as many
 * elements (any dtype) or a number, or x and y Lua values. */
static void run_comparison(lua_State *L, struct comparison *c, const char *operation)
{
    if (is_sequence(L, 1)) {
        compare_sequences(L, c);
        return;
    }
    if (!gpurun_to_tagged(L, 1, &gpurun_buffer_tag))
        gpurun_type_error(L, 1, "gpurun.Buffer or table of numbers");
    struct operand x = {gpurun_check_live_buffer(L, 1), NULL, NULL};
    refuse_complex(L, 1, x.buffer);
    struct operand y = {NULL, NULL, NULL};
    double y_scalar = 0;
    if (lua_type(L, 2) == LUA_TNUMBER) {
        y_scalar = lua_tonumber(L, 2);
    } else if (gpurun_to_tagged(L, 2, &gpurun_buffer_tag)) {
        y.buffer = gpurun_check_live_buffer(L, 2);
        refuse_complex(L, 2, y.buffer);
        if (y.buffer->count != x.buffer->count)
            gpurun_arg_error(L, 2, "gpurun.Buffer of %I elements expected, got %I",
                             (LUAI_UACINT)x.buffer->count, (LUAI_UACINT)y.buffer->count);
    } else {
        gpurun_type_error(L, 2, "gpurun.Buffer or number");
    }
    check_tolerances(L, c);

    c->count = x.buffer->count;
    size_t chunk = c->count < COMPARE_CHUNK ? c->count : COMPARE_CHUNK;
    /* Staging before the transfer begins: the allocations can run
     * finalizers, which may close what this comparison reads. */
    stage_operand(L, &x, chunk);
    if (y.buffer)
        stage_operand(L, &y, chunk);
    x.buffer = gpurun_check_live_buffer(L, 1);
    if (y.buffer)
        y.buffer = gpurun_check_live_buffer(L, 2);
    CUstream stream = gpurun_begin_host_transfer(L, operation);
    for (size_t first = 0; first < c->count; first += chunk) {
        size_t n = c->count - first < chunk ? c->count - first : chunk;
        read_operand(L, &x, first, n, stream);
        if (y.buffer)
            read_operand(L, &y, first, n, stream);
        if (first == 0) {
            double expected = y.buffer ? y.values[0] : y_scalar;
            record_worst(c, 0, x.values[0], expected, fabs(x.values[0] - expected));
        }
        compare_chunk(c, first, x.values, y.buffer ? y.values : NULL, y_scalar, n);
    }
    gpurun_end_transfer(L, stream, operation);
}

static void set_number(lua_State *L, const char *key, double value)
{
    lua_pushnumber(L, value);
    lua_setfield(L, -2, key);
}

static void set_integer(lua_State *L, const char *key, size_t value)
{
    lua_pushinteger(L, (lua_Integer)value);
    lua_setfield(L, -2, key);
}

/* compare(x, y [, rtol [, atol]]) -> { count, mismatches, nan, worst_index,
 * worst_actual, worst_expected, worst_abs_diff, rtol, atol }. The worst
 * element is the mismatch furthest past its tolerance, or when all pass the
 * one with the largest difference (none for an empty sequence). */
static int module_compare(lua_State *L)
{
    struct comparison c = {.largest_pass = -1};
    run_comparison(L, &c, "gpurun.compare");
    lua_createtable(L, 0, 9);
    set_integer(L, "count", c.count);
    set_integer(L, "mismatches", c.mismatches);
    set_integer(L, "nan", c.nan);
    if (c.count > 0) { /* an empty sequence has no worst element */
        set_integer(L, "worst_index", c.worst + 1);
        set_number(L, "worst_actual", c.worst_actual);
        set_number(L, "worst_expected", c.worst_expected);
        set_number(L, "worst_abs_diff", c.worst_abs_diff);
    }
    set_number(L, "rtol", c.rtol);
    set_number(L, "atol", c.atol);
    return 1;
}

/* allclose(x, y [, rtol=1e-5 [, atol=1e-8]]) -> boolean */
static int module_allclose(lua_State *L)
{
    struct comparison c = {.largest_pass = -1};
    run_comparison(L, &c, "gpurun.allclose");
    lua_pushboolean(L, c.mismatches == 0);
    return 1;
}

static const luaL_Reg module_functions[] = {
    {"compare", module_compare},
    {"allclose", module_allclose},
    {NULL, NULL}
};

void gpurun_open_compare(lua_State *L)
{
    gpurun_set_functions(L, module_functions);
}
