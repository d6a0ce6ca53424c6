/* alloc_compare_c: what one device allocation and its free cost the host
 * from plain C, the reference bench/alloc_compare.lua sets gpurun's
 * MemoryPool beside (bench/alloc_compare.sh runs both).
 *
 *   alloc_compare_c [--sizes BYTES,...] [--pairs N] [--reps R] [--json]
 *
 * Exit codes: 0 success, 1 a CUDA failure, 2 usage. */
#define _POSIX_C_SOURCE 200809L
#define BENCH_PROGRAM "alloc_compare_c"

#include "bench_common.h"

#define MAX_SIZES 16
#define DEFAULT_SIZES "4096,1048576,268435456"

struct options {
    size_t sizes[MAX_SIZES];
    int size_count;
    unsigned long pairs;
    unsigned long reps;
    int json;
};

static void usage(const char *why)
{
    fprintf(stderr, "alloc_compare_c: %s\nusage: alloc_compare_c [--sizes BYTES,...] [--pairs N] "
                    "[--reps R] [--json]\n", why);
    exit(2);
}

static unsigned long long parse_positive(const char *text, unsigned long long max, const char *what)
{
    char *end = NULL;
    unsigned long long value = strtoull(text, &end, 10);
    if (end == text || *end != '\0' || value == 0 || value > max || text[0] == '-') {
        fprintf(stderr, "alloc_compare_c: %s expects an integer from 1 to %llu, got '%s'\n", what,
                max, text);
        exit(2);
    }
    return value;
}

static void parse_sizes(struct options *options, const char *list)
{
    char copy[512];
    if (strlen(list) >= sizeof copy)
        usage("--sizes: list too long");
    strcpy(copy, list);
    options->size_count = 0;
    for (char *item = strtok(copy, ","); item; item = strtok(NULL, ",")) {
        if (options->size_count == MAX_SIZES)
            usage("--sizes: too many sizes");
        options->sizes[options->size_count++] =
            (size_t)parse_positive(item, (unsigned long long)1 << 40, "--sizes");
    }
    if (options->size_count == 0)
        usage("--sizes: no size given");
}

static void parse_options(int argc, char **argv, struct options *options)
{
    parse_sizes(options, DEFAULT_SIZES);
    options->pairs = 1000;
    options->reps = 11;
    options->json = 0;
    for (int i = 1; i < argc; i++) {
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--json") == 0) {
            options->json = 1;
        } else if (strcmp(argv[i], "--sizes") == 0 && value) {
            parse_sizes(options, value);
            i++;
        } else if (strcmp(argv[i], "--pairs") == 0 && value) {
            options->pairs = (unsigned long)parse_positive(value, 1000000, "--pairs");
            i++;
        } else if (strcmp(argv[i], "--reps") == 0 && value) {
            options->reps = (unsigned long)parse_positive(value, MAX_REPS, "--reps");
            i++;
        } else {
            usage("unknown option or missing value");
        }
    }
}

/* The pairs a rep times at this size (the same rule in every side): a tenth
 * (at least 10) from 64 MiB on: cuMemAlloc of 256 MiB maps memory at every
 * pair. */
static unsigned long pairs_for(size_t bytes, unsigned long pairs)
{
    if (bytes >= ((size_t)64 << 20))
        return pairs / 10 > 10 ? pairs / 10 : 10;
    return pairs;
}

/* Each rep times `pairs` alloc+free pairs with CLOCK_MONOTONIC, after one
 * pair of warm-up (the pool grows once), on one of two paths:
 *   cuMemAlloc       cuMemAlloc then cuMemFree (which waits for the device)
 *   cuMemAllocAsync  cuMemAllocFromPoolAsync from device 0's default pool
 *                    (its release threshold raised, as gpurun and cuda.core
 *                    do) then cuMemFreeAsync, both on one non-blocking stream,
 *                    synchronized after the timed loop, outside it. */
static void time_plain(size_t bytes, unsigned long pairs, unsigned long reps, double *us)
{
    CUdeviceptr pointer;
    CU(cuMemAlloc, &pointer, bytes);
    CU(cuMemFree, pointer);
    for (unsigned long rep = 0; rep < reps; rep++) {
        double start = now_seconds();
        for (unsigned long i = 0; i < pairs; i++) {
            CU(cuMemAlloc, &pointer, bytes);
            CU(cuMemFree, pointer);
        }
        us[rep] = (now_seconds() - start) * 1e6 / (double)pairs;
    }
}

static void time_pool(CUmemoryPool pool, CUstream stream, size_t bytes, unsigned long pairs,
                      unsigned long reps, double *us)
{
    CUdeviceptr pointer;
    CU(cuMemAllocFromPoolAsync, &pointer, bytes, pool, stream);
    CU(cuMemFreeAsync, pointer, stream);
    CU(cuStreamSynchronize, stream);
    for (unsigned long rep = 0; rep < reps; rep++) {
        double start = now_seconds();
        for (unsigned long i = 0; i < pairs; i++) {
            CU(cuMemAllocFromPoolAsync, &pointer, bytes, pool, stream);
            CU(cuMemFreeAsync, pointer, stream);
        }
        us[rep] = (now_seconds() - start) * 1e6 / (double)pairs;
        CU(cuStreamSynchronize, stream);
    }
}

/* Without --json, a line per path and size with the median microseconds
 * per pair. With it, one object: { "device": name, "reps": R, "results": [ {
 * "path": "cuMemAlloc" | "cuMemAllocAsync", "bytes": n, "pairs": p,
 * "us_per_pair": [ ... one per rep ... ] } ... ] }, of which this prints one
 * result. */
static void report(const struct options *options, int *first, const char *path, size_t bytes,
                   unsigned long pairs, const double *us)
{
    if (!options->json) {
        printf("%-16s %12zu bytes  %10.3f us per alloc+free pair (median of %lu reps of %lu)\n",
               path, bytes, median(us, options->reps), options->reps, pairs);
        return;
    }
    printf("%s{\"path\": \"%s\", \"bytes\": %zu, \"pairs\": %lu, \"us_per_pair\": [", *first ? "" : ", ",
           path, bytes, pairs);
    for (unsigned long rep = 0; rep < options->reps; rep++)
        printf("%s%.4f", rep ? ", " : "", us[rep]);
    printf("]}");
    *first = 0;
}

int main(int argc, char **argv)
{
    struct options options;
    parse_options(argc, argv, &options);
    char name[256];
    CUdevice device = open_device(name, sizeof name);
    CUmemoryPool pool;
    CU(cuDeviceGetDefaultMemPool, &pool, device);
    cuuint64_t keep_all = ~(cuuint64_t)0;
    CU(cuMemPoolSetAttribute, pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep_all);
    CUstream stream;
    CU(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);
    if (options.json)
        printf("{\"device\": \"%s\", \"reps\": %lu, \"results\": [", name, options.reps);
    int first = 1;
    double us[MAX_REPS];
    for (int s = 0; s < options.size_count; s++) {
        size_t bytes = options.sizes[s];
        unsigned long pairs = pairs_for(bytes, options.pairs);
        time_plain(bytes, pairs, options.reps, us);
        report(&options, &first, "cuMemAlloc", bytes, pairs, us);
        time_pool(pool, stream, bytes, pairs, options.reps, us);
        report(&options, &first, "cuMemAllocAsync", bytes, pairs, us);
    }
    if (options.json)
        printf("]}\n");
    CU(cuStreamDestroy, stream);
    return 0;
}
