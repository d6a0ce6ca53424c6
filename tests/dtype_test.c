/* dtype_test: base/dtype.c's float16 and bfloat16 conversions against
 * references written apart from them (no Lua, no GPU): every bit pattern
 * widened, and a million doubles (near ties, subnormals, the overflow
 * threshold and anything else) rounded, against the compiler's _Float16
 * (GCC's conversions from double round once, to nearest even) and, for
 * bfloat16, a search over the representable values. spec/dtypes_spec.lua
 * runs it. Prints "dtype_test: N checks, M failed" and exits 1 on a failure. */
#include "base/dtype.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static long checks, failed;

static void check(int ok, const char *what, double x, unsigned got, unsigned want)
{
    checks++;
    if (!ok && failed++ < 20)
        printf("%s %a: got 0x%04x, expected 0x%04x\n", what, x, got, want);
}

static unsigned long long state = 88172645463325252ull;

static unsigned long long next(void)
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

static double bfloat16_value(unsigned bits)
{
    unsigned wide = bits << 16;
    float value;
    memcpy(&value, &wide, sizeof value);
    return value;
}

/* The nearest bfloat16 to finite x below the overflow threshold, ties to
 * even, found by bisection over the positive patterns. */
static unsigned bfloat16_reference(double x)
{
    double magnitude = fabs(x);
    unsigned low = 0, high = 0x7f80;
    while (high - low > 1) {
        unsigned middle = (low + high) / 2;
        if (bfloat16_value(middle) <= magnitude)
            low = middle;
        else
            high = middle;
    }
    double below = magnitude - bfloat16_value(low), above = bfloat16_value(low + 1) - magnitude;
    unsigned pick = below < above ? low : above < below ? low + 1 : (low & 1 ? low + 1 : low);
    return (signbit(x) ? 0x8000u : 0) | pick;
}

/* A double to try: near a tie between neighbours of the format (widened by
 * `value`), of any scale, or any bits. */
static double draw(double (*value)(unsigned), unsigned top)
{
    unsigned long long r = next();
    double x;
    switch (r % 3) {
    case 0: {
        unsigned bits = (unsigned)(next() % top);
        x = (value(bits) + value(bits + 1)) / 2;
        x += (double)((int)(next() % 3) - 1) * ldexp(fabs(x) + 0x1p-149, -45);
        break;
    }
    case 1:
        x = ldexp((double)(next() >> 11) * 0x1p-53, (int)(next() % 320) - 160);
        break;
    default:
        r = next();
        memcpy(&x, &r, sizeof x);
        break;
    }
    return next() & 1 ? -x : x;
}

static void check_bfloat16(void)
{
    for (unsigned bits = 0; bits < 65536; bits++) {
        unsigned short raw = (unsigned short)bits;
        double widened, want = bfloat16_value(bits);
        gpurun_widen(GPURUN_BFLOAT16, &raw, &widened, 1);
        check(widened == want || (isnan(widened) && isnan(want)), "bfloat16 widen", want, bits, bits);
    }
    for (int i = 0; i < 500000; i++) {
        double x = draw(bfloat16_value, 0x7f7f);
        if (!isfinite(x))
            continue;
        unsigned short got = 0;
        enum gpurun_fit fit = gpurun_store_float(GPURUN_BFLOAT16, x, &got);
        if (fabs(x) >= 0x1.ffp127) {
            check(fit == GPURUN_OUT_OF_RANGE, "bfloat16 overflow", x, got, 0x7f80);
            continue;
        }
        unsigned want = bfloat16_reference(x);
        check(fit == GPURUN_FITS && got == want, "bfloat16", x, got, want);
    }
}

#ifdef __FLT16_MAX__
static double float16_value(unsigned bits)
{
    unsigned short raw = (unsigned short)bits;
    _Float16 value;
    memcpy(&value, &raw, sizeof value);
    return (double)value;
}

static void check_float16(void)
{
    for (unsigned bits = 0; bits < 65536; bits++) {
        unsigned short raw = (unsigned short)bits;
        double widened, want = float16_value(bits);
        gpurun_widen(GPURUN_FLOAT16, &raw, &widened, 1);
        check(widened == want || (isnan(widened) && isnan(want)), "float16 widen", want, bits, bits);
    }
    for (int i = 0; i < 500000; i++) {
        double x = draw(float16_value, 0x7bff);
        if (!isfinite(x))
            continue;
        unsigned short got = 0, want;
        _Float16 rounded = (_Float16)x;
        memcpy(&want, &rounded, sizeof want);
        enum gpurun_fit fit = gpurun_store_float(GPURUN_FLOAT16, x, &got);
        if (isinf((double)rounded))
            check(fit == GPURUN_OUT_OF_RANGE, "float16 overflow", x, got, want);
        else
            check(fit == GPURUN_FITS && got == want, "float16", x, got, want);
    }
}
#endif

int main(void)
{
    check_bfloat16();
#ifdef __FLT16_MAX__
    check_float16();
#else
    printf("dtype_test: this compiler has no _Float16: float16 not checked\n");
#endif
    printf("dtype_test: %ld checks, %ld failed\n", checks, failed);
    return failed != 0;
}
