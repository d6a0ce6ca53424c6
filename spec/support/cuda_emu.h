/* A small CUDA emulator for the specs: gpurun's generated kernels, compiled
 * as C++ with g++, run on the CPU, so that what they compute is checked on a
 * machine with no GPU (spec/support/emulated_gpu.lua drives it through
 * main() at the end, whose commands come on stdin). Memory operations that
 * order blocks (fences, atomics, acquire/release, ld.cg) map to the C++
 * atomics builtins. The scan's inline-PTX helpers are replaced by their
 * C++ equivalents (GPURUN_SCAN_COMMON is defined first). */
#ifndef GPURUN_CUDA_EMU_H
#define GPURUN_CUDA_EMU_H

#include <ucontext.h>
#include <sched.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <math.h>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __shared__ static thread_local

struct dim3 {
    unsigned int x = 1, y = 1, z = 1;
};
struct int4 {
    int x, y, z, w;
};

// Switching fibers: on x86-64 a few instructions that save the callee-saved
// registers and the stack pointer (glibc's swapcontext also saves the signal
// mask, a system call per switch, which made the specs slow); elsewhere
// swapcontext.
#if defined(__x86_64__)
extern "C" void emu_switch(void **from, void *to);
asm(R"(
    .text
    .globl emu_switch
    .type emu_switch, @function
emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_switch, .-emu_switch
)");
#define EMU_FAST_SWITCH 1
#endif

/* Each CUDA thread is a fiber (ucontext); the fibers of a block run in one
 * OS thread, switching at every barrier, shuffle, ballot and __nanosleep, so
 * __shared__ variables are `static thread_local` (one copy per block in
 * flight). Several blocks run at once on a few OS threads, so that blocks
 * really race: the last-block ticket of reductions and the decoupled
 * look-back of scans see other blocks mid-way. */
namespace emu {

const size_t STACK_BYTES = 256 * 1024;

struct Fiber {
#ifdef EMU_FAST_SWITCH
    void *sp = nullptr;
#else
    ucontext_t context;
#endif
    std::unique_ptr<char[]> stack; // left uninitialised: only the pages a fiber uses are touched
    bool done = false;
};

struct Warp {
    unsigned long generation = 0;
    int arrived = 0, live = 0;
    unsigned int slots[32];
};

struct Block {
    int threads = 0, live = 0, current = 0;
    std::vector<Fiber> *fibers = nullptr;
#ifdef EMU_FAST_SWITCH
    void *scheduler = nullptr;
#else
    ucontext_t scheduler;
#endif
    unsigned long generation = 0;
    int arrived = 0;
    Warp warps[32];
    const std::function<void()> *body = nullptr;
};

inline thread_local Block *block = nullptr;
inline thread_local dim3 thread_index, block_index, grid_size, block_size;

// From the running fiber back to its block's scheduler, and from the
// scheduler into fiber t.
inline void to_scheduler(Block *b)
{
#ifdef EMU_FAST_SWITCH
    emu_switch(&(*b->fibers)[b->current].sp, b->scheduler);
#else
    swapcontext(&(*b->fibers)[b->current].context, &b->scheduler);
#endif
}

inline void to_fiber(Block *b, int t)
{
#ifdef EMU_FAST_SWITCH
    emu_switch(&b->scheduler, (*b->fibers)[t].sp);
#else
    swapcontext(&b->scheduler, &(*b->fibers)[t].context);
#endif
}

inline void yield()
{
    to_scheduler(block);
}

inline void release_waiting(Block *b)
{
    if (b->arrived > 0 && b->arrived == b->live) {
        b->arrived = 0;
        b->generation++;
    }
    for (int w = 0; w < (b->threads + 31) / 32; w++) {
        Warp &warp = b->warps[w];
        if (warp.arrived > 0 && warp.arrived == warp.live) {
            warp.arrived = 0;
            warp.generation++;
        }
    }
}

inline void sync_block()
{
    Block *b = block;
    unsigned long generation = b->generation;
    b->arrived++;
    release_waiting(b);
    while (b->generation == generation)
        yield();
}

inline Warp &my_warp()
{
    return block->warps[thread_index.x / 32];
}

inline void sync_warp()
{
    Warp &warp = my_warp();
    unsigned long generation = warp.generation;
    warp.arrived++;
    release_waiting(block);
    while (warp.generation == generation)
        yield();
}

// Every live lane of the warp puts `value`; each gets lane `source`'s.
inline unsigned int exchange(unsigned int value, int source)
{
    Warp &warp = my_warp();
    unsigned int lane = thread_index.x % 32;
    warp.slots[lane] = value;
    sync_warp();
    unsigned int result = source >= 0 && source < 32 ? warp.slots[source] : value;
    sync_warp();
    return result;
}

inline void fiber_entry()
{
    Block *b = block;
    (*b->body)();
    (*b->fibers)[b->current].done = true;
    b->live--;
    b->warps[thread_index.x / 32].live--;
    release_waiting(b);
    to_scheduler(b);
    std::abort(); // a finished fiber is never switched to again
}

inline void run_block(unsigned int id, int threads, const std::function<void()> &body,
                      std::vector<Fiber> &fibers)
{
    Block b;
    b.threads = b.live = threads;
    b.fibers = &fibers;
    b.body = &body;
    for (int w = 0; w < (threads + 31) / 32; w++)
        b.warps[w].live = std::min(32, threads - 32 * w);
    block = &b;
    block_index.x = id;
    for (int t = 0; t < threads; t++) {
        Fiber &f = fibers[t];
        f.done = false;
        if (!f.stack)
            f.stack.reset(new char[STACK_BYTES]);
#ifdef EMU_FAST_SWITCH
        // emu_switch's frame: six registers, then fiber_entry as the return
        // address, at a 16-byte boundary as a call would leave it
        uintptr_t top = (reinterpret_cast<uintptr_t>(f.stack.get()) + STACK_BYTES - 64) & ~uintptr_t(15);
        void **slot = reinterpret_cast<void **>(top);
        slot[0] = reinterpret_cast<void *>(&fiber_entry);
        slot[1] = nullptr;
        for (int r = 1; r <= 6; r++)
            slot[-r] = nullptr;
        f.sp = slot - 6;
#else
        getcontext(&f.context);
        f.context.uc_stack.ss_sp = f.stack.get();
        f.context.uc_stack.ss_size = STACK_BYTES;
        f.context.uc_link = nullptr;
        makecontext(&f.context, fiber_entry, 0);
#endif
    }
    while (b.live > 0) {
        for (int t = 0; t < threads; t++) {
            if (fibers[t].done)
                continue;
            b.current = t;
            thread_index.x = (unsigned int)t;
            to_fiber(&b, t);
        }
        sched_yield(); // a block spinning on another lets the other run
    }
    block = nullptr;
}

// A launch: `grid` blocks of `threads`, a few blocks at a time.
inline void launch(unsigned int grid, int threads, const std::function<void()> &kernel, int concurrency)
{
    std::atomic<unsigned int> next{0};
    std::vector<std::thread> workers;
    // one set of fiber stacks per worker, kept for every launch
    static std::vector<std::vector<Fiber>> stacks(64);
    for (int w = 0; w < concurrency; w++) {
        workers.emplace_back([&, grid, threads, w]() {
            std::vector<Fiber> &fibers = stacks[w];
            if ((int)fibers.size() < threads)
                fibers.resize(threads);
            grid_size.x = grid;
            block_size.x = (unsigned int)threads;
            for (unsigned int id; (id = next.fetch_add(1)) < grid;)
                run_block(id, threads, kernel, fibers);
        });
    }
    for (auto &worker : workers)
        worker.join();
}

} // namespace emu

#define threadIdx (emu::thread_index)
#define blockIdx (emu::block_index)
#define gridDim (emu::grid_size)
#define blockDim (emu::block_size)

inline void __syncthreads() { emu::sync_block(); }
inline void __syncwarp(unsigned int = 0xffffffffu) { emu::sync_warp(); }
inline unsigned int __shfl_down_sync(unsigned int, unsigned int value, unsigned int delta)
{
    return emu::exchange(value, (int)(threadIdx.x % 32 + delta));
}
inline unsigned int __shfl_up_sync(unsigned int, unsigned int value, unsigned int delta)
{
    return emu::exchange(value, (int)(threadIdx.x % 32) - (int)delta);
}
inline unsigned int __shfl_sync(unsigned int, unsigned int value, int lane)
{
    return emu::exchange(value, lane & 31);
}
inline unsigned int __ballot_sync(unsigned int, int predicate)
{
    emu::Warp &warp = emu::my_warp();
    unsigned int lane = threadIdx.x % 32;
    warp.slots[lane] = predicate ? 1u : 0u;
    emu::sync_warp();
    unsigned int bits = 0;
    for (int l = 0; l < warp.live && l < 32; l++)
        bits |= warp.slots[l] << l;
    emu::sync_warp();
    return bits;
}
inline void __nanosleep(unsigned int) { emu::yield(); }
inline int __ffs(unsigned int x) { return __builtin_ffs((int)x); }
inline int __popc(unsigned int x) { return __builtin_popcount(x); }
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline unsigned int atomicAdd(unsigned int *p, unsigned int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline unsigned int __ldcg(const unsigned int *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
inline float __int_as_float(int x) { float f; memcpy(&f, &x, 4); return f; }
inline int __float_as_int(float x) { int i; memcpy(&i, &x, 4); return i; }
inline double __longlong_as_double(long long x) { double d; memcpy(&d, &x, 8); return d; }

// float16 and bfloat16 as the generated code uses cuda_fp16.h's and
// cuda_bf16.h's types (whose #include lines the driver removes): 16 bits
// stored, converted to float to compute and back from float, rounding to
// nearest even. float16 through g++'s _Float16; bfloat16 is float's top
// half, rounded.
struct __half {
    unsigned short bits;
    __half() = default;
    __half(float f)
    {
        const _Float16 h = (_Float16)f;
        memcpy(&bits, &h, 2);
    }
    operator float() const
    {
        _Float16 h;
        memcpy(&h, &bits, 2);
        return (float)h;
    }
};
struct __nv_bfloat16 {
    unsigned short bits;
    __nv_bfloat16() = default;
    __nv_bfloat16(float f)
    {
        unsigned int u;
        memcpy(&u, &f, 4);
        if ((u & 0x7fffffffu) > 0x7f800000u)
            bits = (unsigned short)((u >> 16) | 0x40u); // NaN stays NaN, quiet
        else
            bits = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
    operator float() const
    {
        const unsigned int u = (unsigned int)bits << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
};

// The device_rng kernels' intrinsics: the high half of a 64-bit product,
// conversions rounding down (toward -inf), and sine and cosine of pi x.
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b)
{
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
inline float __double2float_rd(double x)
{
    float f = (float)x;
    return (double)f > x ? nextafterf(f, -INFINITY) : f;
}
// The 16-bit value just below a finite one (sign and magnitude, as IEEE).
inline unsigned short emu_bits_below(unsigned short bits)
{
    if (bits & 0x8000u)
        return (unsigned short)(bits + 1u);
    return bits == 0 ? (unsigned short)0x8001u : (unsigned short)(bits - 1u);
}
inline __half __float2half_rd(float x)
{
    __half h(x);
    if ((float)h > x)
        h.bits = emu_bits_below(h.bits);
    return h;
}
inline __nv_bfloat16 __float2bfloat16_rd(float x)
{
    __nv_bfloat16 h(x);
    if ((float)h > x)
        h.bits = emu_bits_below(h.bits);
    return h;
}
inline void sincospif(float x, float *s, float *c)
{
    *s = (float)sin(M_PI * (double)x);
    *c = (float)cos(M_PI * (double)x);
}
inline void __sincosf(float x, float *s, float *c)
{
    *s = sinf(x);
    *c = cosf(x);
}
inline void sincospi(double x, double *s, double *c)
{
    *s = sin(M_PI * x);
    *c = cos(M_PI * x);
}

// The scan's helpers, as C++ (the real ones are inline PTX).
#define GPURUN_SCAN_COMMON
inline void _gs_store_release(unsigned int *p, unsigned int v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
inline unsigned int _gs_load_acquire(const unsigned int *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
template <typename T>
inline void _gs_store_value(unsigned long long *p, const T &value)
{
    unsigned long long bits = 0;
    memcpy(&bits, &value, sizeof(T));
    __atomic_store_n(p, bits, __ATOMIC_RELAXED);
}
template <typename T>
inline T _gs_load_value(const unsigned long long *p)
{
    unsigned long long bits = __atomic_load_n(p, __ATOMIC_RELAXED);
    T value;
    memcpy(&value, &bits, sizeof(T));
    return value;
}
template <typename T>
inline void _gs_store_word(unsigned long long *p, unsigned int status, const T &value)
{
    static_assert(sizeof(T) <= 4, "a word holds a value of at most 4 bytes");
    unsigned int bits = 0;
    memcpy(&bits, &value, sizeof(T));
    __atomic_store_n(p, ((unsigned long long)status << 32) | bits, __ATOMIC_RELAXED);
}
inline unsigned long long _gs_load_word(const unsigned long long *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
template <typename T>
inline T _gs_word_value(unsigned long long word)
{
    const unsigned int bits = (unsigned int)word;
    T value;
    memcpy(&value, &bits, sizeof(T));
    return value;
}

// The streaming helpers, as plain 16-byte moves.
#define GPURUN_STREAMING_VEC
template <typename V>
inline V _ew_load_cs(const V *p) { return *p; }
template <typename V>
inline void _ew_store_cs(V *p, const V &value) { *p = value; }

namespace emu {

typedef void (*Call)(void **arguments);
std::map<std::string, Call> &kernels();

struct Buffer {
    unsigned char *bytes = nullptr;
    size_t size = 0;
};

inline unsigned char hex_digit(char c)
{
    return (unsigned char)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
}

inline std::vector<unsigned char> from_hex(const char *text, size_t size)
{
    std::vector<unsigned char> bytes(size);
    for (size_t i = 0; i < size; i++)
        bytes[i] = (unsigned char)(hex_digit(text[2 * i]) << 4 | hex_digit(text[2 * i + 1]));
    return bytes;
}

/* Input on stdin, one command a line:
 *   buffer ID BYTES PATH|-|garbage   make a buffer: PATH's bytes, zeros (-) or 0xA5 bytes
 *   fill ID BYTE_OFFSET COUNT SIZE HEX   COUNT elements of SIZE bytes, each the bytes of HEX
 *   launch KEY GRID BLOCK NARGS      then NARGS lines:
 *   b ID OFFSET                      a pointer into buffer ID
 *   s SIZE HEX                       a scalar of SIZE bytes
 *   dump ID PATH                     write the buffer's bytes to PATH
 */
inline int main(int concurrency)
{
    std::map<long, Buffer> buffers;
    char line[4096];
    while (std::fgets(line, sizeof line, stdin)) {
        char word[64], text[2048];
        long id;
        size_t bytes;
        if (std::sscanf(line, "buffer %ld %zu %2047s", &id, &bytes, text) == 3) {
            Buffer &b = buffers[id];
            b.size = bytes;
            b.bytes = static_cast<unsigned char *>(std::aligned_alloc(256, (b.size + 255) / 256 * 256 + 256));
            std::memset(b.bytes, std::strcmp(text, "-") == 0 ? 0 : 0xA5, b.size);
            if (std::strcmp(text, "-") != 0 && std::strcmp(text, "garbage") != 0) {
                FILE *file = std::fopen(text, "rb");
                if (!file || std::fread(b.bytes, 1, b.size, file) != b.size) {
                    std::fprintf(stderr, "cuda_emu: cannot read %s\n", text);
                    return 1;
                }
                std::fclose(file);
            }
        } else if (std::sscanf(line, "fill %ld", &id) == 1 && std::strncmp(line, "fill", 4) == 0) {
            size_t offset, count, size;
            if (std::sscanf(line, "fill %ld %zu %zu %zu %2047s", &id, &offset, &count, &size, text) != 5)
                return 1;
            std::vector<unsigned char> element = from_hex(text, size);
            for (size_t i = 0; i < count; i++)
                std::memcpy(buffers[id].bytes + offset + i * size, element.data(), size);
        } else if (std::sscanf(line, "launch %63s", word) == 1 && std::strncmp(line, "launch", 6) == 0) {
            unsigned int grid;
            int threads, count;
            if (std::sscanf(line, "launch %63s %u %d %d", word, &grid, &threads, &count) != 4)
                return 1;
            std::vector<std::vector<unsigned char>> slots(count);
            std::vector<void *> arguments(count);
            for (int a = 0; a < count; a++) {
                if (!std::fgets(line, sizeof line, stdin))
                    return 1;
                size_t offset, size;
                if (std::sscanf(line, "b %ld %zu", &id, &offset) == 2 && line[0] == 'b') {
                    void *pointer = buffers[id].bytes + offset;
                    slots[a].resize(sizeof pointer);
                    std::memcpy(slots[a].data(), &pointer, sizeof pointer);
                } else if (std::sscanf(line, "s %zu %2047s", &size, text) == 2) {
                    slots[a] = from_hex(text, size);
                } else {
                    std::fprintf(stderr, "cuda_emu: bad argument line %s", line);
                    return 1;
                }
                arguments[a] = slots[a].data();
            }
            auto found = kernels().find(word);
            if (found == kernels().end()) {
                std::fprintf(stderr, "cuda_emu: no kernel %s\n", word);
                return 1;
            }
            Call call = found->second;
            void **list = arguments.data();
            launch(grid, threads, [call, list]() { call(list); }, concurrency);
        } else if (std::sscanf(line, "dump %ld %2047s", &id, text) == 2) {
            FILE *file = std::fopen(text, "wb");
            if (!file || std::fwrite(buffers[id].bytes, 1, buffers[id].size, file) != buffers[id].size)
                return 1;
            std::fclose(file);
        } else if (line[0] != '\n') {
            std::fprintf(stderr, "cuda_emu: bad line %s", line);
            return 1;
        }
    }
    return 0;
}

} // namespace emu

#endif
