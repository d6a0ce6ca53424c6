/* bandwidth_c: host <-> device copy bandwidth from plain C, the reference
 * bench/bandwidth.lua holds gpurun's PinnedBuffer copies to (it runs this
 * with --json); docs/benchmark.md says how both time.
 *
 *   bandwidth_c [--sizes BYTES,...] [--reps R] [--json]
 *
 * Exit codes: 0 success, 1 a CUDA failure or no memory, 2 usage. */
#define _POSIX_C_SOURCE 200809L
#define BENCH_PROGRAM "bandwidth_c"

#include "bench_common.h"

#define MAX_SIZES 16
#define DEFAULT_SIZES "1048576,67108864,1073741824"

struct options {
    size_t sizes[MAX_SIZES];
    int size_count;
    unsigned long reps;
    int json;
};

static void usage(const char *why)
{
    fprintf(stderr, "bandwidth_c: %s\nusage: bandwidth_c [--sizes BYTES,...] [--reps R] [--json]\n", why);
    exit(2);
}

static unsigned long long parse_positive(const char *text, unsigned long long max, const char *what)
{
    char *end = NULL;
    unsigned long long value = strtoull(text, &end, 10);
    if (end == text || *end != '\0' || value == 0 || value > max || text[0] == '-') {
        fprintf(stderr, "bandwidth_c: %s expects an integer from 1 to %llu, got '%s'\n", what, max,
                text);
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
            usage("--sizes: at most 16 sizes");
        options->sizes[options->size_count++] = (size_t)parse_positive(item, 1ULL << 40, "--sizes");
    }
    if (options->size_count == 0)
        usage("--sizes: no sizes");
}

static struct options parse_options(int argc, char **argv)
{
    struct options options = {.reps = 10};
    parse_sizes(&options, DEFAULT_SIZES);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            options.json = 1;
        } else if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc) {
            parse_sizes(&options, argv[++i]);
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            options.reps = (unsigned long)parse_positive(argv[++i], MAX_REPS, "--reps");
        } else if (strcmp(argv[i], "--help") == 0) {
            printf("usage: bandwidth_c [--sizes BYTES,...] [--reps R] [--json]\n");
            exit(0);
        } else {
            usage("unknown option or missing value");
        }
    }
    return options;
}

/* Seconds for one cuMemcpyHtoDAsync or cuMemcpyDtoHAsync on a non-blocking
 * stream and the cuStreamSynchronize after it, timed with CLOCK_MONOTONIC
 * around both: the figure a script sees from "copy, then sync", as gpurun's
 * side times it. */
static double time_copy(CUdeviceptr device, void *host, size_t bytes, int to_device, CUstream stream)
{
    double start = now_seconds();
    if (to_device)
        CU(cuMemcpyHtoDAsync, device, host, bytes, stream);
    else
        CU(cuMemcpyDtoHAsync, host, device, bytes, stream);
    CU(cuStreamSynchronize, stream);
    return now_seconds() - start;
}

static int printed_results;

/* Without --json, a line per size, memory and direction with the median GB/s
 * (10^9 bytes per second). With it, one object: { "device": name, "reps": R,
 * "results": [ { "bytes": n, "memory": "pinned" | "pageable", "direction":
 * "h2d" | "d2h", "seconds": [ ... one per rep ... ] } ... ] }, of which this
 * prints one result. */
static void report(const struct options *options, size_t bytes, const char *memory, int to_device,
                   const double *seconds)
{
    const char *direction = to_device ? "h2d" : "d2h";
    if (options->json) {
        printf("%s{\"bytes\":%zu,\"memory\":\"%s\",\"direction\":\"%s\",\"seconds\":[",
               printed_results++ ? "," : "", bytes, memory, direction);
        for (unsigned long i = 0; i < options->reps; i++)
            printf("%s%.9f", i ? "," : "", seconds[i]);
        printf("]}");
    } else {
        printf("%12zu bytes  %-8s  %s  %8.2f GB/s\n", bytes, memory, direction,
               (double)bytes / median(seconds, options->reps) / 1e9);
    }
}

int main(int argc, char **argv)
{
    struct options options = parse_options(argc, argv);
    char device_name[256];
    CUdevice device = open_device(device_name, sizeof device_name);
    CUstream stream;
    CU(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);

    if (options.json) {
        printf("{\"device\":\"");
        for (const char *c = device_name; *c; c++)
            if (*c != '"' && *c != '\\' && (unsigned char)*c >= 0x20)
                putchar(*c);
        printf("\",\"reps\":%lu,\"results\":[", options.reps);
    }
    for (int s = 0; s < options.size_count; s++) {
        size_t bytes = options.sizes[s];
        /* One device buffer, one page-locked host buffer and one pageable one
         * (malloc, every page touched) per size. */
        CUdeviceptr buffer;
        CU(cuMemAlloc, &buffer, bytes);
        void *pinned = NULL;
        CU(cuMemHostAlloc, &pinned, bytes, CU_MEMHOSTALLOC_PORTABLE);
        unsigned char *pageable = malloc(bytes);
        if (pageable == NULL) {
            fprintf(stderr, "bandwidth_c: out of host memory for %zu bytes\n", bytes);
            return 1;
        }
        memset(pageable, 1, bytes); /* every page mapped before timing */
        memset(pinned, 1, bytes);
        struct {
            const char *name;
            void *host;
        } memories[] = {{"pinned", pinned}, {"pageable", pageable}};
        for (size_t m = 0; m < 2; m++) {
            for (int to_device = 1; to_device >= 0; to_device--) {
                double seconds[MAX_REPS];
                time_copy(buffer, memories[m].host, bytes, to_device, stream); /* warm-up */
                for (unsigned long rep = 0; rep < options.reps; rep++)
                    seconds[rep] = time_copy(buffer, memories[m].host, bytes, to_device, stream);
                report(&options, bytes, memories[m].name, to_device, seconds);
            }
        }
        free(pageable);
        CU(cuMemFreeHost, pinned);
        CU(cuMemFree, buffer);
    }
    if (options.json)
        printf("]}\n");
    CU(cuStreamDestroy, stream);
    CU(cuDevicePrimaryCtxRelease, device);
    return 0;
}
