/* The element type table and the store rules (see base/dtype.h). */
#include "base/dtype.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include <cuda.h>

/* Each type is aligned to its size in C and CUDA C (__half and
 * __nv_bfloat16 are declared __align__(2)). */
#define INTEGER(name_, c, short_, numpy_, bytes, kind_, lo, hi, flo, fhi, text, tma, library) \
    {.name = name_, .c_type = c, .compute_type = c, .short_name = short_, .numpy = numpy_, \
     .size = bytes, .align = bytes, .kind = kind_, .min = lo, .max = hi, .float_low = flo, \
     .float_high = fhi, .range = text, .tensor_map_type = tma, .library_type = library}
#define FLOAT(name_, c, header, compute, short_, numpy_, bytes, digits_, largest_, overflow_, \
              tma, library) \
    {.name = name_, .c_type = c, .c_header = header, .compute_type = compute, \
     .short_name = short_, .numpy = numpy_, .size = bytes, .align = bytes, \
     .kind = GPURUN_KIND_FLOAT, .digits = digits_, .largest = largest_, .overflow = overflow_, \
     .tensor_map_type = tma, .library_type = library, .part = -1}
/* CUDA's float2 and double2, which cuFFT's cufftComplex and
 * cufftDoubleComplex are, aligned to their size as CUDA C declares them. */
#define COMPLEX(name_, c, numpy_, bytes, part_, digits_, largest_, overflow_, library) \
    {.name = name_, .c_type = c, .compute_type = c, .numpy = numpy_, .size = bytes, \
     .align = bytes, .kind = GPURUN_KIND_COMPLEX, .digits = digits_, .largest = largest_, \
     .overflow = overflow_, .tensor_map_type = -1, .library_type = library, .part = part_}

/* cudaDataType's values (library_types.h: CUDA_R_32F, ...), which gpurun
 * builds without. */
enum { R_32F = 0, R_64F = 1, R_16F = 2, R_8I = 3, R_8U = 8, R_32I = 10, R_32U = 12, R_16BF = 14,
       R_16I = 20, R_16U = 22, R_64I = 24, R_64U = 26, C_32F = 4, C_64F = 5 };

/* The TMA types are cuda.core's: int8 and int16 have none. */
const struct gpurun_dtype_info gpurun_dtypes[GPURUN_DTYPE_COUNT] = {
    /* The overflow threshold of a binary format is its largest finite value
     * plus half an ulp: FLT_MAX is 0x1.fffffep127, and so on. */
    [GPURUN_FLOAT32] = FLOAT("float32", "float", NULL, "float", "f32", "<f4", 4, 24, FLT_MAX,
                             0x1.ffffffp127, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, R_32F),
    [GPURUN_FLOAT64] = FLOAT("float64", "double", NULL, "double", "f64", "<f8", 8, 53, DBL_MAX,
                             INFINITY, CU_TENSOR_MAP_DATA_TYPE_FLOAT64, R_64F),
    [GPURUN_INT32] = INTEGER("int32", "int", "i32", "<i4", 4, GPURUN_KIND_SIGNED, INT32_MIN,
                             INT32_MAX, -0x1p31, 0x1p31, "-2147483648..2147483647",
                             CU_TENSOR_MAP_DATA_TYPE_INT32, R_32I),
    [GPURUN_UINT32] = INTEGER("uint32", "unsigned int", "u32", "<u4", 4, GPURUN_KIND_UNSIGNED, 0,
                              UINT32_MAX, 0, 0x1p32, "0..4294967295",
                              CU_TENSOR_MAP_DATA_TYPE_UINT32, R_32U),
    [GPURUN_INT64] = INTEGER("int64", "long long", "i64", "<i8", 8, GPURUN_KIND_SIGNED,
                             INT64_MIN, INT64_MAX, -0x1p63, 0x1p63,
                             "-9223372036854775808..9223372036854775807", CU_TENSOR_MAP_DATA_TYPE_INT64, R_64I),
    [GPURUN_UINT64] = INTEGER("uint64", "unsigned long long", "u64", "<u8", 8,
                              GPURUN_KIND_UNSIGNED, 0, INT64_MAX, 0, 0x1p64,
                              "0..18446744073709551615", CU_TENSOR_MAP_DATA_TYPE_UINT64, R_64U),
    [GPURUN_INT8] = INTEGER("int8", "signed char", "i8", "|i1", 1, GPURUN_KIND_SIGNED, INT8_MIN,
                            INT8_MAX, -0x1p7, 0x1p7, "-128..127", -1, R_8I),
    [GPURUN_UINT8] = INTEGER("uint8", "unsigned char", "u8", "|u1", 1, GPURUN_KIND_UNSIGNED, 0,
                             UINT8_MAX, 0, 0x1p8, "0..255", CU_TENSOR_MAP_DATA_TYPE_UINT8, R_8U),
    [GPURUN_INT16] = INTEGER("int16", "short", "i16", "<i2", 2, GPURUN_KIND_SIGNED, INT16_MIN,
                             INT16_MAX, -0x1p15, 0x1p15, "-32768..32767", -1, R_16I),
    [GPURUN_UINT16] = INTEGER("uint16", "unsigned short", "u16", "<u2", 2, GPURUN_KIND_UNSIGNED,
                              0, UINT16_MAX, 0, 0x1p16, "0..65535",
                              CU_TENSOR_MAP_DATA_TYPE_UINT16, R_16U),
    [GPURUN_FLOAT16] = FLOAT("float16", "__half", "cuda_fp16.h", "float", "f16", "<f2", 2, 11,
                             65504.0, 65520.0, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, R_16F),
    /* NumPy has no bfloat16. */
    [GPURUN_BFLOAT16] = FLOAT("bfloat16", "__nv_bfloat16", "cuda_bf16.h", "float", "bf16", NULL,
                              2, 8, 0x1.fep127, 0x1.ffp127, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, R_16BF),
    /* No typed scalar and no TMA type. */
    [GPURUN_COMPLEX64] = COMPLEX("complex64", "float2", "<c8", 8, GPURUN_FLOAT32, 24, FLT_MAX,
                                 0x1.ffffffp127, C_32F),
    [GPURUN_COMPLEX128] = COMPLEX("complex128", "double2", "<c16", 16, GPURUN_FLOAT64, 53,
                                  DBL_MAX, INFINITY, C_64F),
};

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

/* ---- the 16-bit floats ------------------------------------------------------
 * Both are IEEE-style binary formats of 16 bits: a sign, `15 - m` exponent
 * bits and m stored mantissa bits, with subnormals, infinities and NaNs.
 * float16 (binary16) has m = 10, bfloat16 (float32's top half) m = 7. A
 * double is rounded to them directly, not through float32, which would round
 * twice. */

static int mantissa_bits(int dtype)
{
    return gpurun_dtypes[dtype].digits - 1;
}

/* The exponent bias: 15 for float16, 127 for bfloat16. */
static int bias(int dtype)
{
    return (1 << (14 - mantissa_bits(dtype))) - 1;
}

/* The bits of value rounded to nearest, ties to even; |value| is below the
 * format's overflow threshold, or infinite, or NaN. */
static uint16_t to_half_bits(int dtype, double value)
{
    int m = mantissa_bits(dtype);
    uint16_t sign = signbit(value) ? 0x8000 : 0;
    uint16_t all_ones = (uint16_t)(((1u << (15 - m)) - 1) << m);
    if (isnan(value))
        return sign | all_ones | (uint16_t)(1u << (m - 1)); /* a quiet NaN */
    if (isinf(value))
        return sign | all_ones;
    double magnitude = fabs(value);
    int min_exponent = 1 - bias(dtype);
    if (magnitude < ldexp(1.0, min_exponent)) /* subnormal; may round up to the least normal */
        return sign | (uint16_t)nearbyint(ldexp(magnitude, m - min_exponent));
    int exponent;
    double fraction = frexp(magnitude, &exponent); /* magnitude = fraction * 2^exponent */
    double significand = nearbyint(ldexp(fraction, m + 1)); /* 2^m .. 2^(m + 1) */
    if (significand == ldexp(1.0, m + 1)) {
        significand /= 2;
        exponent++;
    }
    unsigned biased = (unsigned)(exponent - 1 + bias(dtype));
    return sign | (uint16_t)(biased << m) | (uint16_t)((unsigned)significand - (1u << m));
}

static double from_half_bits(int dtype, uint16_t bits)
{
    int m = mantissa_bits(dtype);
    unsigned exponent = (bits >> m) & ((1u << (15 - m)) - 1);
    unsigned mantissa = bits & ((1u << m) - 1);
    double sign = (bits & 0x8000) ? -1.0 : 1.0;
    if (exponent == (1u << (15 - m)) - 1)
        return mantissa ? copysign(NAN, sign) : sign * INFINITY;
    if (exponent == 0)
        return sign * ldexp((double)mantissa, 1 - bias(dtype) - m);
    return sign * ldexp((double)(mantissa | (1u << m)), (int)exponent - bias(dtype) - m);
}

static enum gpurun_fit store_real(int dtype, double value, void *out)
{
    if (dtype == GPURUN_FLOAT64) {
        memcpy(out, &value, sizeof value);
        return GPURUN_FITS;
    }
    if (isfinite(value) && fabs(value) >= gpurun_dtypes[dtype].overflow)
        return GPURUN_OUT_OF_RANGE;
    if (gpurun_dtypes[dtype].size == 2) {
        uint16_t bits = to_half_bits(dtype, value);
        memcpy(out, &bits, sizeof bits);
        return GPURUN_FITS;
    }
    float single;
    if (isfinite(value) && fabs(value) > FLT_MAX)
        single = value > 0 ? FLT_MAX : -FLT_MAX; /* where it rounds; the cast is undefined */
    else
        single = (float)value;
    memcpy(out, &single, sizeof single);
    return GPURUN_FITS;
}

enum gpurun_fit gpurun_store_complex(int dtype, double re, double im, void *out)
{
    int part = gpurun_dtypes[dtype].part;
    unsigned char parts[GPURUN_MAX_ELEMENT_SIZE];
    size_t half = gpurun_dtypes[part].size;
    enum gpurun_fit fit = store_real(part, re, parts);
    if (fit == GPURUN_FITS)
        fit = store_real(part, im, parts + half);
    if (fit == GPURUN_FITS)
        memcpy(out, parts, 2 * half);
    return fit;
}

void gpurun_complex_element(int dtype, const void *raw, double *re, double *im)
{
    int part = gpurun_dtypes[dtype].part;
    *re = gpurun_float_element(part, raw);
    *im = gpurun_float_element(part, (const unsigned char *)raw + gpurun_dtypes[part].size);
}

enum gpurun_fit gpurun_store_integer(int dtype, int64_t value, void *out)
{
    const struct gpurun_dtype_info *info = &gpurun_dtypes[dtype];
    if (info->kind == GPURUN_KIND_COMPLEX)
        return gpurun_store_complex(dtype, (double)value, 0, out);
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
    if (info->kind == GPURUN_KIND_COMPLEX)
        return gpurun_store_complex(dtype, value, 0, out);
    if (info->kind == GPURUN_KIND_FLOAT)
        return store_real(dtype, value, out);
    if (value != floor(value))
        return GPURUN_NOT_INTEGRAL; /* NaN too */
    if (!(value >= info->float_low && value < info->float_high))
        return GPURUN_OUT_OF_RANGE;
    store_bits(info->size, value < 0 ? (uint64_t)(int64_t)value : (uint64_t)value, out);
    return GPURUN_FITS;
}

double gpurun_float_element(int dtype, const void *raw)
{
    switch (dtype) {
    case GPURUN_FLOAT32: { float v; memcpy(&v, raw, sizeof v); return v; }
    case GPURUN_FLOAT64: { double v; memcpy(&v, raw, sizeof v); return v; }
    default: { uint16_t bits; memcpy(&bits, raw, sizeof bits); return from_half_bits(dtype, bits); }
    }
}

uint64_t gpurun_integer_element(int dtype, const void *raw)
{
    const struct gpurun_dtype_info *info = &gpurun_dtypes[dtype];
    int is_signed = info->kind == GPURUN_KIND_SIGNED;
    switch (info->size) {
    case 1: { uint8_t v; memcpy(&v, raw, 1); return is_signed ? (uint64_t)(int64_t)(int8_t)v : v; }
    case 2: { uint16_t v; memcpy(&v, raw, 2); return is_signed ? (uint64_t)(int64_t)(int16_t)v : v; }
    case 4: { uint32_t v; memcpy(&v, raw, 4); return is_signed ? (uint64_t)(int64_t)(int32_t)v : v; }
    default: { uint64_t v; memcpy(&v, raw, 8); return v; }
    }
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
    case GPURUN_UINT16: WIDEN(uint16_t); break;
    case GPURUN_COMPLEX64: n *= 2; WIDEN(float); break;
    case GPURUN_COMPLEX128: n *= 2; WIDEN(double); break;
    default: {
        const uint16_t *in = raw;
        for (size_t i = 0; i < n; i++)
            out[i] = from_half_bits(dtype, in[i]);
        break;
    }
    }
#undef WIDEN
}
