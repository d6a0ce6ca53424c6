-- CUDA C source for gpurun.sort (a stable LSD radix sort, 8 bits a pass)
-- and gpurun.lower_bound / upper_bound (a binary search per query). Keys
-- are moved as their raw bits and ordered by their bits turned into an
-- unsigned integer; docs/sort.md tells the design. No GPU and no gpurun
-- objects: lua/gpurun/compute/sort.lua compiles and launches what this
-- writes.

local common = require("gpurun.common")
local scan_source = require("gpurun.compute.scan_source")

local DTYPES = common.DTYPES

local source = {}

source.BLOCK = 256      -- threads of every kernel; also the radix (one digit per thread)
source.ITEMS = 16       -- elements per thread of a tile: a tile is BLOCK * ITEMS elements
source.TILE = source.BLOCK * source.ITEMS
source.RADIX_BITS = 8

-- The unsigned C type of each element size: keys, values and offsets
-- travel as these bits.
local BITS_C = { [1] = "unsigned char", [2] = "unsigned short", [4] = "unsigned int",
                 [8] = "unsigned long long" }
source.BITS_C = BITS_C

-- A float dtype's sign bit, the largest bits of its infinity's magnitude
-- and its canonical quiet NaN, as C literals: every NaN sorts as this one
-- (after +inf), whatever its sign and payload.
local FLOAT_BITS = {
  [2] = { float16 = { "0x8000u", "0x7c00u", "0x7e00u" }, bfloat16 = { "0x8000u", "0x7f80u", "0x7fc0u" } },
  [4] = { float32 = { "0x80000000u", "0x7f800000u", "0x7fc00000u" } },
  [8] = { float64 = { "0x8000000000000000ull", "0x7ff0000000000000ull", "0x7ff8000000000000ull" } },
}

-- The body of _gsort_order: a key's bits -> an unsigned integer that
-- orders as the keys do (ascending), or in reverse when descending.
local function order_body(dtype, descending)
  local info = DTYPES[dtype]
  local lines = {}
  if info.kind == "float" then
    local sign, infinity, nan = table.unpack(FLOAT_BITS[info.size][dtype])
    lines[#lines + 1] = ("    if ((_gsort_key)(bits & (_gsort_key)~(_gsort_key)%s) > (_gsort_key)%s)")
      :format(sign, infinity)
    lines[#lines + 1] = ("        bits = (_gsort_key)%s;"):format(nan)
    lines[#lines + 1] = ("    bits = (bits & (_gsort_key)%s) ? (_gsort_key)~bits")
      :format(sign)
    lines[#lines + 1] = ("                                  : (_gsort_key)(bits | (_gsort_key)%s);")
      :format(sign)
  elseif info.kind == "signed" then
    lines[#lines + 1] = ("    bits = (_gsort_key)(bits ^ (_gsort_key)((_gsort_key)1 << %d));"):format(info.size * 8 - 1)
  end
  if descending then
    lines[#lines + 1] = "    bits = (_gsort_key)~bits;"
  end
  lines[#lines + 1] = "    return bits;"
  return table.concat(lines, "\n")
end

local TEMPLATE = [==[
// gpurun.sort: @KEY@ keys@ORDER@@VALUES@@SEGMENTS@
@LOOK_BACK@
typedef @KEY_C@ _gsort_key;
typedef @VALUE_C@ _gsort_value;
typedef @OFFSET_C@ _gsort_offset;
#define GSORT_BLOCK @BLOCK@
#define GSORT_ITEMS @ITEMS@
#define GSORT_TILE (GSORT_BLOCK * GSORT_ITEMS)
#define GSORT_WARPS (GSORT_BLOCK / 32)
#define GSORT_HAS_VALUES @HAS_VALUES@
#define GSORT_EXCHANGE_WORDS (GSORT_TILE * @EXCHANGE_BYTES@ / 8)
#define GSORT_MAX_PASSES @MAX_PASSES@
#define GSORT_OFFSET_SIGNED @OFFSET_SIGNED@

__device__ __forceinline__ _gsort_key _gsort_order(_gsort_key bits)
{
@ORDER_BODY@
}

// What a search compares: as the sort orders, but -0.0 equal to +0.0, as
// NumPy's searchsorted has it.
__device__ __forceinline__ _gsort_key _gsort_search_order(_gsort_key bits)
{
@ZERO@    return _gsort_order(bits);
}

// Each element's segment: how many offsets (clamped to [0, n]) are at or
// before it, so segment s (1-based) holds [offsets[s], offsets[s + 1]).
extern "C" __global__ void __launch_bounds__(256) gpurun_sort_segment_ids(unsigned long long n,
    const _gsort_offset *offsets, unsigned long long count, unsigned int *segments)
{
    for (unsigned long long i = (unsigned long long)blockIdx.x * GSORT_BLOCK + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * GSORT_BLOCK) {
        unsigned long long low = 0, high = count;
        while (low < high) {
            unsigned long long middle = (low + high) / 2;
            _gsort_offset raw = offsets[middle];
#if GSORT_OFFSET_SIGNED
            unsigned long long at = raw < 0 ? 0ull : (unsigned long long)raw;
#else
            unsigned long long at = (unsigned long long)raw;
#endif
            if (at > n) at = n;
            if (at <= i) low = middle + 1; else high = middle;
        }
        segments[i] = (unsigned int)low;
    }
}

// Keys (and values) copied as they are: the start of an in-place sort with
// an odd number of passes, so that the last pass lands in place.
extern "C" __global__ void __launch_bounds__(256) gpurun_sort_copy(unsigned long long n, int copy_keys,
    const _gsort_key *keys, _gsort_key *keys_copy, int copy_values, const _gsort_value *values,
    _gsort_value *values_copy)
{
    for (unsigned long long i = (unsigned long long)blockIdx.x * GSORT_BLOCK + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * GSORT_BLOCK) {
        if (copy_keys) keys_copy[i] = keys[i];
#if GSORT_HAS_VALUES
        if (copy_values) values_copy[i] = values[i];
#endif
    }
}

// The digits' totals of every pass, from one read of the keys (and
// segments): totals[pass * 256 + digit], zeroed before. A pass's totals do
// not depend on the order the passes before it leave.
extern "C" __global__ void __launch_bounds__(256) gpurun_sort_upsweep(unsigned long long n,
    unsigned int key_passes, unsigned int segment_passes, const _gsort_key *keys,
    const unsigned int *segments, unsigned int *totals)
{
    __shared__ unsigned int histogram[GSORT_MAX_PASSES * 256];
    const unsigned int t = threadIdx.x, passes = key_passes + segment_passes;
    for (unsigned int k = t; k < passes * 256; k += GSORT_BLOCK) histogram[k] = 0;
    __syncthreads();
    for (unsigned long long i = (unsigned long long)blockIdx.x * GSORT_BLOCK + t; i < n;
         i += (unsigned long long)gridDim.x * GSORT_BLOCK) {
        const _gsort_key bits = _gsort_order(keys[i]);
        for (unsigned int p = 0; p < key_passes; ++p)
            atomicAdd(&histogram[p * 256 + (unsigned int)((bits >> (8 * p)) & (_gsort_key)255u)], 1u);
        if (segment_passes) {
            const unsigned int segment = segments[i];
            for (unsigned int p = 0; p < segment_passes; ++p)
                atomicAdd(&histogram[(key_passes + p) * 256 + ((segment >> (8 * p)) & 255u)], 1u);
        }
    }
    __syncthreads();
    for (unsigned int k = t; k < passes * 256; k += GSORT_BLOCK)
        if (histogram[k]) atomicAdd(&totals[k], histogram[k]);
}

// The sum of `value` over the threads before this one in the block, from
// a scan within each warp by shuffles and the warps' sums in `warp_sums`.
__device__ __forceinline__ unsigned int _gsort_exclusive_sum(unsigned int value, unsigned int *warp_sums)
{
    const unsigned int lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    unsigned int sum = value;
    #pragma unroll
    for (unsigned int d = 1; d < 32; d <<= 1) {
        const unsigned int below = __shfl_up_sync(0xffffffffu, sum, d);
        if (lane >= d) sum += below;
    }
    if (lane == 31u) warp_sums[warp] = sum;
    __syncthreads();
    #pragma unroll
    for (unsigned int w = 0; w < GSORT_WARPS; ++w)
        if (w < warp) sum += warp_sums[w];
    __syncthreads();
    return sum - value;
}

// A tile's element `item` of a thread: each warp holds GSORT_ITEMS * 32
// neighbouring elements, item by item, lane by lane.
__device__ __forceinline__ unsigned int _gsort_element(int item)
{
    return (threadIdx.x >> 5) * (GSORT_ITEMS * 32u) + (unsigned int)item * 32u + (threadIdx.x & 31u);
}

// A tile's array, held by its threads, put in slot order through shared
// memory and written to each slot's place: slot k is written by thread
// k % 256, neighbouring threads to neighbouring places.
template <typename T>
__device__ __forceinline__ void _gsort_write(T *shared, const T *held, T *to, unsigned int in_tile,
                                             const unsigned int *slot, const unsigned int *place)
{
    __syncthreads();
    #pragma unroll
    for (int item = 0; item < GSORT_ITEMS; ++item)
        if (_gsort_element(item) < in_tile) shared[slot[item]] = held[item];
    __syncthreads();
    #pragma unroll
    for (int item = 0; item < GSORT_ITEMS; ++item) {
        const unsigned int k = (unsigned int)item * GSORT_BLOCK + threadIdx.x;
        if (k < in_tile) to[place[item]] = shared[k];
    }
}

// The same for an array not yet read: read, then written.
template <typename T>
__device__ __forceinline__ void _gsort_move(T *shared, const T *from, T *to, unsigned long long start,
                                            unsigned int in_tile, const unsigned int *slot,
                                            const unsigned int *place)
{
    T held[GSORT_ITEMS];
    #pragma unroll
    for (int item = 0; item < GSORT_ITEMS; ++item) {
        const unsigned int k = _gsort_element(item);
        if (k < in_tile) held[item] = from[start + k];
    }
    _gsort_write(shared, held, to, in_tile, slot, place);
}

// One pass of the sort, one tile a block, tiles taken in the order the
// blocks start (a counter), so that a tile waits only for tiles before it.
// Each warp ranks its elements in order among its earlier ones of the
// same digit (the lanes of an item by ballots, the items before by the
// warp's own count of each digit); the warps' counts, added up in warp
// order, then give each element its slot in the tile ordered by digit, so
// equal digits keep their order. The tile publishes its digits' counts,
// then looks back over the tiles before it for how many of each digit they
// hold (a decoupled look-back, one digit a thread). It puts itself in
// digit order in shared memory, one array at a time, and writes from
// there: the digit's start (the totals of smaller digits), plus the
// earlier tiles' elements of the digit, plus the slot's place among the
// tile's elements of that digit.
// status: tiles * 256 words (a tile's digit: its status in the high half,
// 2 pass + 1 for its count, 2 pass + 2 for the count of it and every tile
// before it; lower is not yet written), then a counter of tiles per pass,
// all zeroed once before the first pass.
extern "C" __global__ void __launch_bounds__(256) gpurun_sort_onesweep(unsigned long long n,
    unsigned int tiles, unsigned int pass, unsigned int shift, int segment_pass, const _gsort_key *keys,
    _gsort_key *keys_out, const _gsort_value *values, _gsort_value *values_out, const unsigned int *segments,
    unsigned int *segments_out, int move_segments, const unsigned int *totals, unsigned long long *status)
{
    // base[d]: the place of the tile's first element of digit d, less its
    // slot; counts[w * 256 + d]: warp w's elements of digit d, then the
    // slot of its first.
    __shared__ unsigned int base[256];
    __shared__ unsigned int counts[GSORT_WARPS * 256];
    __shared__ unsigned long long exchange[GSORT_EXCHANGE_WORDS];
    __shared__ unsigned int warp_sums[GSORT_WARPS];
    __shared__ unsigned int tile_taken;
    const unsigned int t = threadIdx.x, lane = t & 31u, warp = t >> 5;
    if (t == 0)
        tile_taken = atomicAdd(reinterpret_cast<unsigned int *>(status + (unsigned long long)tiles * 256 + pass),
                               1u);
    #pragma unroll
    for (int w = 0; w < GSORT_WARPS; ++w) counts[w * 256 + t] = 0;
    const unsigned int digit_start = _gsort_exclusive_sum(totals[pass * 256 + t], warp_sums);
    const unsigned int tile = tile_taken;
    const unsigned long long start = (unsigned long long)tile * GSORT_TILE;
    const unsigned int in_tile = n - start < GSORT_TILE ? (unsigned int)(n - start) : GSORT_TILE;
    unsigned int *warp_count = counts + warp * 256;
    unsigned int slot[GSORT_ITEMS], digit_of[GSORT_ITEMS];
    _gsort_key held[GSORT_ITEMS];
    #pragma unroll
    for (int item = 0; item < GSORT_ITEMS; ++item) {
        const unsigned int k = _gsort_element(item);
        if (k < in_tile) held[item] = keys[start + k];
    }
    #pragma unroll
    for (int item = 0; item < GSORT_ITEMS; ++item) {
        const unsigned int k = _gsort_element(item);
        const bool valid = k < in_tile;
        unsigned int digit = 0u;
        if (valid)
            digit = segment_pass ? (segments[start + k] >> shift) & 255u
                                 : (unsigned int)((_gsort_order(held[item]) >> shift) & (_gsort_key)255u);
        unsigned int peers = __ballot_sync(0xffffffffu, valid);
        #pragma unroll
        for (int bit = 0; bit < 8; ++bit) {
            const unsigned int set = __ballot_sync(0xffffffffu, (digit >> bit) & 1u);
            peers &= ((digit >> bit) & 1u) ? set : ~set;
        }
        const unsigned int leader = peers ? (unsigned int)__ffs(peers) - 1u : lane;
        unsigned int earlier = 0u;
        if (valid && lane == leader) {
            earlier = warp_count[digit];
            warp_count[digit] = earlier + (unsigned int)__popc(peers);
        }
        earlier = __shfl_sync(0xffffffffu, earlier, (int)leader);
        __syncwarp();
        slot[item] = earlier + (unsigned int)__popc(peers & ((1u << lane) - 1u));
        digit_of[item] = digit;
    }
    __syncthreads();
    unsigned int mine = 0;
    #pragma unroll
    for (int w = 0; w < GSORT_WARPS; ++w) {
        const unsigned int c = counts[w * 256 + t];
        counts[w * 256 + t] = mine;
        mine += c;
    }
    // Publish the tile's count of digit t, then add up the tiles' before it.
    unsigned long long *word = status + (unsigned long long)tile * 256 + t;
    unsigned int before_tile = 0;
    if (tile == 0) {
        _gs_store_word(word, 2u * pass + 2u, mine);
    } else {
        _gs_store_word(word, 2u * pass + 1u, mine);
        for (unsigned int j = tile; j-- > 0;) {
            unsigned long long seen = _gs_load_word(status + (unsigned long long)j * 256 + t);
            unsigned int delay = 8;
            while ((unsigned int)(seen >> 32) < 2u * pass + 1u) {
                __nanosleep(delay);
                if (delay < 256) delay *= 2;
                seen = _gs_load_word(status + (unsigned long long)j * 256 + t);
            }
            before_tile += _gs_word_value<unsigned int>(seen);
            if ((unsigned int)(seen >> 32) == 2u * pass + 2u) break;
        }
        _gs_store_word(word, 2u * pass + 2u, before_tile + mine);
    }
    const unsigned int first_slot = _gsort_exclusive_sum(mine, warp_sums);
    #pragma unroll
    for (int w = 0; w < GSORT_WARPS; ++w) counts[w * 256 + t] += first_slot;
    base[t] = digit_start + before_tile - first_slot;
    __syncthreads();
    #pragma unroll
    for (int item = 0; item < GSORT_ITEMS; ++item) slot[item] += warp_count[digit_of[item]];
    // The digits in slot order, each slot's place from its digit.
    unsigned char *digits = reinterpret_cast<unsigned char *>(exchange);
    #pragma unroll
    for (int item = 0; item < GSORT_ITEMS; ++item)
        if (_gsort_element(item) < in_tile) digits[slot[item]] = (unsigned char)digit_of[item];
    __syncthreads();
    unsigned int *place = digit_of;
    #pragma unroll
    for (int item = 0; item < GSORT_ITEMS; ++item) {
        const unsigned int k = (unsigned int)item * GSORT_BLOCK + t;
        if (k < in_tile) place[item] = base[digits[k]] + k;
    }
    _gsort_write(reinterpret_cast<_gsort_key *>(exchange), held, keys_out, in_tile, slot, place);
#if GSORT_HAS_VALUES
    _gsort_move(reinterpret_cast<_gsort_value *>(exchange), values, values_out, start, in_tile, slot, place);
#endif
    if (move_segments)
        _gsort_move(reinterpret_cast<unsigned int *>(exchange), segments, segments_out, start, in_tile,
                    slot, place);
}

// out[j]: the 1-based place of queries[j] in sorted (ascending): before
// the first element not less than it (lower), or greater than it (upper).
extern "C" __global__ void __launch_bounds__(256) gpurun_sort_search(unsigned long long n,
    const _gsort_key *sorted, unsigned long long m, const _gsort_key *queries, long long *out, int upper)
{
    for (unsigned long long j = (unsigned long long)blockIdx.x * GSORT_BLOCK + threadIdx.x; j < m;
         j += (unsigned long long)gridDim.x * GSORT_BLOCK) {
        const _gsort_key query = _gsort_search_order(queries[j]);
        unsigned long long low = 0, high = n;
        while (low < high) {
            const unsigned long long middle = (low + high) / 2;
            const _gsort_key at = _gsort_search_order(sorted[middle]);
            if (upper ? at <= query : at < query) low = middle + 1; else high = middle;
        }
        out[j] = (long long)low + 1;
    }
}
]==]

source.KERNEL_NAMES = { "gpurun_sort_segment_ids", "gpurun_sort_copy", "gpurun_sort_upsweep",
                        "gpurun_sort_onesweep", "gpurun_sort_search" }

-- The program for keys of `dtype`, descending or not, values of
-- value_size bytes (nil: none) and offsets of offset_dtype (nil: none).
function source.generate(dtype, descending, value_size, offset_dtype)
  local info = DTYPES[dtype]
  local offset = offset_dtype and DTYPES[offset_dtype]
  local fields = {
    KEY = dtype, ORDER = descending and ", descending" or "",
    VALUES = value_size and (", %d-byte values"):format(value_size) or "",
    SEGMENTS = offset_dtype and (", %s segment offsets"):format(offset_dtype) or "",
    KEY_C = BITS_C[info.size], VALUE_C = BITS_C[value_size or 1],
    OFFSET_C = offset and offset.c or "unsigned long long",
    BLOCK = tostring(source.BLOCK), ITEMS = tostring(source.ITEMS),
    HAS_VALUES = value_size and "1" or "0",
    -- the widest array a tile moves through shared memory: keys, values, segments
    EXCHANGE_BYTES = tostring(math.max(info.size, value_size or 1, offset_dtype and 4 or 1)),
    MAX_PASSES = tostring(info.size + (offset_dtype and 4 or 0)),
    OFFSET_SIGNED = offset and offset.kind == "signed" and "1" or "0",
    ORDER_BODY = order_body(dtype, descending),
    LOOK_BACK = scan_source.COMMON,
    ZERO = info.kind == "float"
      and ("    if (bits == (_gsort_key)%s) bits = 0;\n"):format(FLOAT_BITS[info.size][dtype][1]) or "",
  }
  return (TEMPLATE:gsub("@([%u_]+)@", fields))
end

return source
