/* The element type table and the store rules (see base/dtype.h). */
#include "base/dtype.h"

#include <float.h>
#include <math.h>
#include <string.h>

const struct gpurun_dtype_info gpurun_dtypes[GPURUN_DTYPE_COUNT] = {
    [GPURUN_FLOAT32] = {"float32", "float", "f32", 4, GPURUN_KIND_FLOAT, 0, 0, 0, 0, NULL},
    [GPURUN_FLOAT64] = {"float64", "double", "f64", 8, GPURUN_KIND_FLOAT, 0, 0, 0, 0, NULL},
    [GPURUN_INT32] = {"int32", "int", "i32", 4, GPURUN_KIND_SIGNED, INT32_MIN, INT32_MAX,
                      -0x1p31, 0x1p31, "-2147483648..2147483647"},
    [GPURUN_UINT32] = {"uint32", "unsigned int", "u32", 4, GPURUN_KIND_UNSIGNED, 0, UINT32_MAX,
                       0, 0x1p32, "0..4294967295"},
    [GPURUN_INT64] = {"int64", "long long", "i64", 8, GPURUN_KIND_SIGNED, INT64_MIN, INT64_MAX,
                      -0x1p63, 0x1p63, "-9223372036854775808..9223372036854775807"},
    [GPURUN_UINT64] = {"uint64", "unsigned long long", "u64", 8, GPURUN_KIND_UNSIGNED, 0,
                       INT64_MAX, 0, 0x1p64, "0..18446744073709551615"},
    [GPURUN_INT8] = {"int8", "signed char", "i8", 1, GPURUN_KIND_SIGNED, INT8_MIN, INT8_MAX,
                     -0x1p7, 0x1p7, "-128..127"},
    [GPURUN_UINT8] = {"uint8", "unsigned char", "u8", 1, GPURUN_KIND_UNSIGNED, 0, UINT8_MAX, 0,
                      0x1p8, "0..255"},
    [GPURUN_INT16] = {"int16", "short", "i16", 2, GPURUN_KIND_SIGNED, INT16_MIN, INT16_MAX,
                      -0x1p15, 0x1p15, "-32768..32767"},
    [GPURUN_UINT16] = {"uint16", "unsigned short", "u16", 2, GPURUN_KIND_UNSIGNED, 0,
                       UINT16_MAX, 0, 0x1p16, "0..65535"},
};

/* The smallest magnitude that rounds to infinity as a float32: FLT_MAX plus
 * half an ulp. Anything below it rounds to a finite float32. */
#define FLOAT32_OVERFLOW 0x1.ffffffp127

int gpurun_dtype_from_name(const char *name)
{
    for (int dtype = 0; dtype < GPURUN_DTYPE_COUNT; dtype++)
        if (strcmp(name, gpurun_dtypes[dtype].name) == 0)
            return dtype;
    return -1;
}

const char *gpurun_dtype_names(void)
{
    static char names[256];
    if (names[0] == '\0') {
        for (int dtype = 0; dtype < GPURUN_DTYPE_COUNT; dtype++) {
            if (dtype > 0)
                strcat(names, ", ");
            strcat(names, gpurun_dtypes[dtype].name);
        }
    }
    return names;
}

/* The low bytes of a two's complement value are the narrow value. */
static void store_bits(size_t size, uint64_t bits, void *out)
{
    switch (size) {
    case 1: { uint8_t v = (uint8_t)bits; memcpy(out, &v, 1); break; }
    case 2: { uint16_t v = (uint16_t)bits; memcpy(out, &v, 2); break; }
    case 4: { uint32_t v = (uint32_t)bits; memcpy(out, &v, 4); break; }
    default: memcpy(out, &bits, 8); break;
    }
}

static enum gpurun_fit store_real(int dtype, double value, void *out)
{
    if (dtype == GPURUN_FLOAT64) {
        memcpy(out, &value, sizeof value);
        return GPURUN_FITS;
    }
    if (isfinite(value) && fabs(value) >= FLOAT32_OVERFLOW)
        return GPURUN_OUT_OF_RANGE;
    float single;
    if (isfinite(value) && fabs(value) > FLT_MAX)
        single = value > 0 ? FLT_MAX : -FLT_MAX; /* where it rounds; the cast is undefined */
    else
        single = (float)value;
    memcpy(out, &single, sizeof single);
    return GPURUN_FITS;
}

enum gpurun_fit gpurun_store_integer(int dtype, int64_t value, void *out)
{
    const struct gpurun_dtype_info *info = &gpurun_dtypes[dtype];
    if (info->kind == GPURUN_KIND_FLOAT)
        return store_real(dtype, (double)value, out);
    if (value < info->min || value > info->max)
        return GPURUN_OUT_OF_RANGE;
    store_bits(info->size, (uint64_t)value, out);
    return GPURUN_FITS;
}

enum gpurun_fit gpurun_store_float(int dtype, double value, void *out)
{
    const struct gpurun_dtype_info *info = &gpurun_dtypes[dtype];
    if (info->kind == GPURUN_KIND_FLOAT)
        return store_real(dtype, value, out);
    if (value != floor(value))
        return GPURUN_NOT_INTEGRAL; /* NaN too */
    if (!(value >= info->float_low && value < info->float_high))
        return GPURUN_OUT_OF_RANGE;
    store_bits(info->size, value < 0 ? (uint64_t)(int64_t)value : (uint64_t)value, out);
    return GPURUN_FITS;
}

void gpurun_widen(int dtype, const void *raw, double *out, size_t n)
{
#define WIDEN(T)                       \
    do {                               \
        const T *in = raw;             \
        for (size_t i = 0; i < n; i++) \
            out[i] = (double)in[i];    \
    } while (0)
    switch (dtype) {
    case GPURUN_FLOAT32: WIDEN(float); break;
    case GPURUN_FLOAT64: WIDEN(double); break;
    case GPURUN_INT32: WIDEN(int32_t); break;
    case GPURUN_UINT32: WIDEN(uint32_t); break;
    case GPURUN_INT64: WIDEN(int64_t); break;
    case GPURUN_UINT64: WIDEN(uint64_t); break;
    case GPURUN_INT8: WIDEN(int8_t); break;
    case GPURUN_UINT8: WIDEN(uint8_t); break;
    case GPURUN_INT16: WIDEN(int16_t); break;
    default: WIDEN(uint16_t); break;
    }
#undef WIDEN
}
