/* Element types: the one table of names, sizes, ranges and spellings that
 * buffers, kernel arguments, typed scalars, .npy files and the generated
 * elementwise kernels all use (Lua reads it as gpurun.dtypes), and the one
 * set of rules for storing a number as an element. No Lua. */
#ifndef GPURUN_BASE_DTYPE_H
#define GPURUN_BASE_DTYPE_H

#include <stddef.h>
#include <stdint.h>

/* The order is the order error messages and gpurun.dtypes list them in. */
enum gpurun_dtype {
    GPURUN_FLOAT32, GPURUN_FLOAT64,
    GPURUN_INT32, GPURUN_UINT32, GPURUN_INT64, GPURUN_UINT64,
    GPURUN_INT8, GPURUN_UINT8, GPURUN_INT16, GPURUN_UINT16,
    GPURUN_FLOAT16, GPURUN_BFLOAT16,
    GPURUN_COMPLEX64, GPURUN_COMPLEX128,
    GPURUN_DTYPE_COUNT
};

enum gpurun_dtype_kind {
    GPURUN_KIND_FLOAT, GPURUN_KIND_SIGNED, GPURUN_KIND_UNSIGNED,
    GPURUN_KIND_COMPLEX /* a pair (re, im) of the float dtype `part`, re first */
};

/* The most bytes one element takes (complex128). */
#define GPURUN_MAX_ELEMENT_SIZE 16

struct gpurun_dtype_info {
    const char *name;         /* "float32" */
    const char *c_type;       /* "float", "__half": how generated CUDA C stores it */
    const char *c_header;     /* the header declaring c_type ("cuda_fp16.h"), or NULL */
    const char *compute_type; /* what generated code computes it in: c_type, or float for
                               * the 16-bit floats, whose arithmetic the headers give only
                               * on some architectures */
    const char *short_name;   /* "f32": the typed scalar constructor's name */
    const char *numpy;        /* NumPy's little-endian descr ("<f4"), or NULL: none */
    size_t size;
    size_t align;             /* C's alignof: where a struct field of it goes */
    enum gpurun_dtype_kind kind;
    /* Integer kinds: the range as int64 (uint64's upper half has no int64, so
     * its max is INT64_MAX: larger values come as floats), the floats that
     * fit as [float_low, float_high), and the whole range as text. */
    int64_t min, max;
    double float_low, float_high;
    const char *range;
    /* Float kinds (and the parts of a complex kind): significant bits (24
     * for float32), the largest finite value, and the smallest magnitude
     * that rounds to infinity (INFINITY for float64: every finite double is
     * a float64). */
    int digits;
    double largest, overflow;
    /* The CUtensorMapDataType a TMA descriptor of these elements has, or -1
     * (int8 and int16 have none). */
    int tensor_map_type;
    /* The cudaDataType (library_types.h) CUDA's libraries (cuBLAS, cuFFT,
     * cuSPARSE) name these elements by. */
    int library_type;
    /* Complex kinds: the float dtype of each part; -1 for the others. */
    int part;
};

extern const struct gpurun_dtype_info gpurun_dtypes[GPURUN_DTYPE_COUNT];

/* The dtype named `name`, or -1. */
int gpurun_dtype_from_name(const char *name);

/* "float32, float64, ...": every name, for messages. */
const char *gpurun_dtype_names(void);

enum gpurun_fit { GPURUN_FITS, GPURUN_NOT_INTEGRAL, GPURUN_OUT_OF_RANGE };

/* Stores an integer or a float as one element of dtype at out (size bytes,
 * a complex dtype taking it as the real part, with 0 as the imaginary one,
 * little-endian), or says why it does not fit (out is then untouched).
 *
 * The rules: an integer type takes an integer value in its range, or a float
 * with an integral value in its range (2^20 is 1048576 for an int parameter);
 * a float type takes any number, rounded to the nearest value of the type
 * (ties to even), except that a finite value whose rounding overflows (one
 * of magnitude `overflow` or more: beyond the largest finite value by half an
 * ulp) is out of range. NaN and the infinities store as themselves in float
 * types. float16 and bfloat16 follow the same rules, their subnormals
 * included. */
enum gpurun_fit gpurun_store_integer(int dtype, int64_t value, void *out);
enum gpurun_fit gpurun_store_float(int dtype, double value, void *out);

/* Stores re + im i as one element of a complex dtype: each part by the
 * rules of its float dtype. */
enum gpurun_fit gpurun_store_complex(int dtype, double re, double im, void *out);

/* The two parts of one element of a complex dtype at raw. */
void gpurun_complex_element(int dtype, const void *raw, double *re, double *im);

/* Elements at raw widened to doubles (exactly, for every dtype but the
 * 64-bit integers past 2^53); a complex element gives two, re then im. */
void gpurun_widen(int dtype, const void *raw, double *out, size_t n);

/* One element of a float dtype at raw, as a double. */
double gpurun_float_element(int dtype, const void *raw);

/* One element of an integer dtype at raw, widened to 64 bits: sign-extended
 * for a signed dtype, zero-extended for an unsigned one. */
uint64_t gpurun_integer_element(int dtype, const void *raw);

#endif
