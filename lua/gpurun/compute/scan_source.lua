-- CUDA C source for gpurun's scans (inclusive and exclusive, over any
-- associative operation) and for select (stream compaction), one single
-- pass over the data with a decoupled look-back, as Merrill and Garland
-- describe and CUB's DeviceScan does; docs/reductions.md tells the design
-- and why it is so. No GPU and no gpurun objects: lua/gpurun/compute/scan.lua
-- compiles and launches what this writes.

local rs = require("gpurun.compute.reduction_source")
local ew_source = require("gpurun.compute.elementwise_source")

local ss = {}

ss.STATUS_PARTIAL, ss.STATUS_INCLUSIVE = 1, 2

ss.COMMON = [[
#ifndef GPURUN_SCAN_COMMON
#define GPURUN_SCAN_COMMON
// The look-back's memory operations, at GPU scope: a status is stored with
// release semantics after its value, and loaded with acquire semantics
// before its value is read; the values themselves are relaxed 8-byte moves
// (never torn) that bypass the incoherent L1.
__device__ __forceinline__ void _gs_store_release(unsigned int *p, unsigned int v)
{
    asm volatile("st.release.gpu.u32 [%0], %1;" : : "l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned int _gs_load_acquire(const unsigned int *p)
{
    unsigned int v;
    asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
template <typename T>
__device__ __forceinline__ void _gs_store_value(unsigned long long *p, const T &value)
{
    static_assert(sizeof(T) <= 8, "scan values are at most 8 bytes");
    unsigned long long bits = 0;
    memcpy(&bits, &value, sizeof(T));
    asm volatile("st.relaxed.gpu.u64 [%0], %1;" : : "l"(p), "l"(bits) : "memory");
}
template <typename T>
__device__ __forceinline__ T _gs_load_value(const unsigned long long *p)
{
    unsigned long long bits;
    asm volatile("ld.relaxed.gpu.u64 %0, [%1];" : "=l"(bits) : "l"(p) : "memory");
    T value;
    memcpy(&value, &bits, sizeof(T));
    return value;
}
// A tile's status (high half) and value (low half) in one word.
template <typename T>
__device__ __forceinline__ void _gs_store_word(unsigned long long *p, unsigned int status, const T &value)
{
    static_assert(sizeof(T) <= 4, "a word holds a value of at most 4 bytes");
    unsigned int bits = 0;
    memcpy(&bits, &value, sizeof(T));
    const unsigned long long word = ((unsigned long long)status << 32) | bits;
    asm volatile("st.relaxed.gpu.u64 [%0], %1;" : : "l"(p), "l"(word) : "memory");
}
__device__ __forceinline__ unsigned long long _gs_load_word(const unsigned long long *p)
{
    unsigned long long word;
    asm volatile("ld.relaxed.gpu.u64 %0, [%1];" : "=l"(word) : "l"(p) : "memory");
    return word;
}
template <typename T>
__device__ __forceinline__ T _gs_word_value(unsigned long long word)
{
    const unsigned int bits = (unsigned int)word;
    T value;
    memcpy(&value, &bits, sizeof(T));
    return value;
}
#endif
]]

local lines = ew_source.lines

-- temp_layout(tiles [, packed]) -> the byte offset of the tiles' values in
-- the temporaries, their size, and how many 4-byte words from the start a
-- launch clears (the counter's 16 bytes, then the statuses, or the words
-- that hold status and value when packed).
function ss.temp_layout(tiles, packed)
  if packed then
    return 16, 16 + 8 * tiles, 4 + 2 * tiles
  end
  local values = (16 + 4 * tiles + 15) // 16 * 16
  return values, values + 16 * tiles, 4 + tiles
end

-- Whether a spec's tiles keep status and value in one word.
function ss.packed(spec)
  return spec.mode ~= "select" and (spec.value_bytes or 8) <= 4
end

-- The operation's namespace: the value type, identity and combine.
local function operation(add, spec)
  add("namespace _gs_%s {", spec.name)
  add("typedef %s _value;", spec.value_c)
  add("__device__ __forceinline__ _value _identity()")
  add("{")
  add("    return (_value)(%s);", spec.identity)
  add("}")
  add("__device__ __forceinline__ _value _combine(const _value a, const _value b)")
  add("{")
  add("    return (_value)(%s);", spec.combine)
  add("}")
  add("} // namespace _gs_%s", spec.name)
end

-- The look-back's pauses in ns, CUB's tuning for sm_90 (DeviceScan's
-- fixed_delay_constructor_t for float and for double): once after a tile
-- publishes its aggregate, before it first looks back, and between two
-- looks at a tile not ready yet. Polling sooner only adds loads to the
-- lines being written. CUB pauses only from LOOK_BACK_PAUSE_GRID tiles up;
-- below that a look waits 8 ns, doubling to 256.
ss.LOOK_BACK_PAUSE_GRID = 500
function ss.look_back_pauses(value_bytes)
  if value_bytes <= 4 then
    return 1140, 688
  end
  return 1215, 576
end

-- Reads tile _q's status into _st, waiting while it is below `least`, and
-- then its value into _v (declared by the caller). `pause`: the tuned
-- pause between looks (nil: the doubling one alone).
local function wait_for_tile(add, spec, i, least, pause)
  add("%sunsigned int _delay = %s;", i, pause and ("_paused ? %du : 8u"):format(pause) or "8u")
  local function wait(load, status)
    add("%s%s", i, load)
    add("%swhile (%s < %du) {", i, status, least)
    add("%s    __nanosleep(_delay);", i)
    add("%s    if (_delay < 256)", i)
    add("%s        _delay <<= 1;", i)
    add("%s    %s", i, load)
    add("%s}", i)
  end
  if ss.packed(spec) then
    add("%sunsigned long long _word;", i)
    wait("_word = _gs_load_word(_desc + _q);", "(unsigned int)(_word >> 32)")
    add("%s_st = (unsigned int)(_word >> 32);", i)
    add("%s_v = _gs_word_value<_value>(_word);", i)
    return
  end
  wait("_st = _gs_load_acquire(_status + _q);", "_st")
  add("%s_v = _gs_load_value<_value>((_st == %du ? _inclusive : _partial) + _q);", i, ss.STATUS_INCLUSIVE)
end

-- Publishes `value` as tile `tile`'s status STATUS.
local function publish(add, spec, i, tile, status, value)
  if ss.packed(spec) then
    add("%s_gs_store_word(_desc + %s, %du, %s);", i, tile, status, value)
    return
  end
  add("%s_gs_store_value(%s + %s, %s);", i, status == ss.STATUS_INCLUSIVE and "_inclusive" or "_partial",
      tile, value)
  add("%s_gs_store_release(_status + %s, %du);", i, tile, status)
end

-- Warp 0's look-back: the combined values of every tile before `tile`.
local function look_back(add, spec, indent)
  local i = indent
  add("%s_value _running = _identity();", i)
  if spec.deterministic then
    add("%s// chained: only the tile just before, once it has its inclusive prefix", i)
    add("%sif (_lane == 0) {", i)
    add("%s    const unsigned long long _q = _tile - 1;", i)
    add("%s    unsigned int _st;", i)
    add("%s    _value _v;", i)
    wait_for_tile(add, spec, i .. "    ", ss.STATUS_INCLUSIVE)
    add("%s    _running = _v;", i)
    add("%s}", i)
    return
  end
  local first, pause = ss.look_back_pauses(spec.value_bytes or 8)
  add("%sconst bool _paused = gridDim.x >= %du;", i, ss.LOOK_BACK_PAUSE_GRID)
  add("%sif (_paused)", i)
  add("%s    __nanosleep(%du); // the predecessors' aggregates are on their way", i, first)
  add("%slong long _p = (long long)_tile - 1; // the window's nearest tile", i)
  add("%swhile (true) {", i)
  add("%s    const long long _q = _p - (long long)_lane; // farther tiles on higher lanes", i)
  add("%s    unsigned int _st = %du;", i, ss.STATUS_INCLUSIVE)
  add("%s    _value _v = _identity(); // before tile 0: nothing, and nothing further", i)
  add("%s    if (_q >= 0) {", i)
  wait_for_tile(add, spec, i .. "        ", ss.STATUS_PARTIAL, pause)
  add("%s    }", i)
  add("%s    const unsigned int _done = __ballot_sync(0xffffffffu, _st == %du);", i, ss.STATUS_INCLUSIVE)
  add("%s    // the nearest lane with an inclusive prefix ends the window", i)
  add("%s    const int _last = _done ? __ffs(_done) - 1 : 31;", i)
  add("%s    if ((int)_lane > _last)", i)
  add("%s        _v = _identity();", i)
  add("%s    // farther tiles combine on the left: lane 0 gets v[last] ... v[0] in order", i)
  add("%s#pragma unroll", i)
  add("%s    for (unsigned int _d = 1; _d < 32; _d <<= 1) {", i)
  add("%s        const _value _farther = _gr_shfl_down(_v, _d);", i)
  add("%s        if (_lane + _d < 32)", i)
  add("%s            _v = _combine(_farther, _v);", i)
  add("%s    }", i)
  add("%s    _running = _combine(_gr_shfl_idx(_v, 0), _running);", i)
  add("%s    if (_done)", i)
  add("%s        break;", i)
  add("%s    _p -= 32;", i)
  add("%s}", i)
end

-- spec: { name, mode = "inclusive" | "exclusive" | "select", in_c (x's
-- element as stored), in_compute (as the code sees it: float for float16
-- and bfloat16), out_c, value_c (the scanned type: y's compute type, whose
-- values are rounded to out_c only when stored), combine, identity,
-- predicate (select), count_c (select), headers (to include), block,
-- items, deterministic }.
--
-- Each block takes the next tile of block * items elements (its number
-- from a counter, so that a tile only ever waits on tiles already being
-- worked on), loads it coalesced, turns it into `items` consecutive
-- elements per thread through shared memory, and scans it: each thread its
-- own, then a warp scan of the threads' totals, then the warps' totals.
-- It publishes its aggregate (status PARTIAL), and warp 0 looks back at
-- the tiles before it, 32 at a time, combining their aggregates until one
-- has published its inclusive prefix (status INCLUSIVE); the block then
-- publishes its own inclusive prefix and writes its outputs. Where the
-- scanned value has 4 bytes or fewer, a tile's status and value share one
-- 8-byte word, stored and loaded whole (relaxed, at GPU scope, never torn),
-- as CUB does: a look at a tile is one load, and publishing needs no fence.
-- Past 500 tiles, warp 0 pauses as CUB's sm_90 tuning does
-- (ss.look_back_pauses). The words or statuses and the counter live in
-- temporaries that a memset clears before every launch (a memset node in a
-- graph).
--
-- With `deterministic`, a tile waits for the inclusive prefix of the tile
-- just before it instead (a chained scan): the combines are then always
-- done in the same order, so float sums give the same bits every run, at
-- the cost of a serial chain of tiles.
--
-- Kernels take (n, temp, tiles, x, y) for scans and (n, temp, tiles, x,
-- out, capacity, count) for select.
function ss.generate(spec)
  local out, add = lines()
  local block, items = spec.block, spec.items
  local warps = block // 32
  local select_mode = spec.mode == "select"
  add("// gpurun %s (%s -> %s)%s", spec.mode, spec.in_c, select_mode and spec.in_c or spec.out_c,
      spec.deterministic and ", chained (deterministic)" or "")
  if select_mode then
    add("//   keeps x where: %s", spec.predicate)
  else
    add("//   combine: %s, identity: %s", spec.combine, spec.identity)
  end
  for _, header in ipairs(spec.headers or {}) do
    add("#include <%s>", header)
  end
  add(rs.COMMON)
  add(ss.COMMON)
  if spec.preamble and spec.preamble ~= "" then
    add(spec.preamble)
  end
  operation(add, spec)
  add("")
  local params = select_mode
    and ("const %s *_in_x, %s *_out, unsigned long long _capacity, %s *_count"):format(
        spec.in_c, spec.in_c, spec.count_c)
    or ("const %s *_in_x, %s *_out_y"):format(spec.in_c, spec.out_c)
  add('extern "C" __global__ void __launch_bounds__(%d) %s(unsigned long long n, '
      .. "unsigned char *__restrict__ _temp, unsigned long long _tiles, %s)", block, spec.name, params)
  add("{")
  ew_source.add_grid_dependency(add)
  add("    using namespace _gs_%s;", spec.name)
  add("    constexpr int ITEMS = %d, WARPS = %d;", items, warps)
  add("    constexpr unsigned long long TILE = %dull * ITEMS;", block)
  -- the exchange holds the loaded type: the scanned values, or select's x
  local exchange_c = select_mode and spec.in_c or "_value"
  add("    __shared__ %s _exchange[WARPS][32 * ITEMS];", exchange_c)
  add("    __shared__ _value _warp_totals[WARPS];")
  add("    __shared__ _value _tile_prefix;")
  add("    __shared__ unsigned int _tile_number;")
  add("    unsigned int *_counter = reinterpret_cast<unsigned int *>(_temp);")
  if ss.packed(spec) then
    add("    unsigned long long *_desc = reinterpret_cast<unsigned long long *>(_temp + 16);")
  else
    add("    unsigned int *_status = reinterpret_cast<unsigned int *>(_temp + 16);")
    add("    unsigned long long *_partial = reinterpret_cast<unsigned long long *>(")
    add("        _temp + ((16 + 4 * _tiles + 15) / 16) * 16);")
    add("    unsigned long long *_inclusive = _partial + _tiles;")
    add("    (void)_inclusive;")
  end
  add("    if (threadIdx.x == 0)")
  add("        _tile_number = atomicAdd(_counter, 1u);")
  add("    __syncthreads();")
  add("    const unsigned long long _tile = _tile_number;")
  add("    const unsigned int _lane = threadIdx.x & 31u, _warp = threadIdx.x >> 5;")
  add("    const unsigned long long _base = _tile * TILE + _warp * (32ull * ITEMS);")
  add("    // coalesced loads, then each thread's ITEMS consecutive elements (ITEMS odd:")
  add("    // no two lanes of a warp hit one shared-memory bank)")
  add("    %s _loaded[ITEMS];", exchange_c)
  add("#pragma unroll")
  add("    for (int _k = 0; _k < ITEMS; _k++) {")
  add("        const unsigned long long i = _base + _k * 32 + _lane;")
  if select_mode then
    add("        if (i < n)")
    add("            _loaded[_k] = _in_x[i];")
  else
    -- through x's compute type: a __half converts to float, then to _value
    add("        _loaded[_k] = i < n ? (_value)((%s)_in_x[i]) : _identity();", spec.in_compute or spec.in_c)
  end
  add("    }")
  add("#pragma unroll")
  add("    for (int _k = 0; _k < ITEMS; _k++)")
  add("        _exchange[_warp][_k * 32 + _lane] = _loaded[_k];")
  add("    __syncwarp();")
  add("#pragma unroll")
  add("    for (int _k = 0; _k < ITEMS; _k++)")
  add("        _loaded[_k] = _exchange[_warp][_lane * ITEMS + _k];")
  add("    __syncwarp();")
  add("    _value _items[ITEMS];")
  if select_mode then
    add("#pragma unroll")
    add("    for (int _k = 0; _k < ITEMS; _k++) {")
    add("        const unsigned long long i = _base + _lane * ITEMS + _k;")
    add("        const %s x = (%s)_loaded[_k];", spec.in_compute or spec.in_c, spec.in_compute or spec.in_c)
    add("        _items[_k] = (i < n && (%s)) ? 1ull : 0ull;", spec.predicate)
    add("    }")
  else
    add("#pragma unroll")
    add("    for (int _k = 0; _k < ITEMS; _k++)")
    add("        _items[_k] = _loaded[_k];")
  end
  add("    // the thread's total, then the warp's scan of the totals")
  add("    _value _total = _items[0];")
  add("#pragma unroll")
  add("    for (int _k = 1; _k < ITEMS; _k++)")
  add("        _total = _combine(_total, _items[_k]);")
  add("    _value _scan = _total;")
  add("#pragma unroll")
  add("    for (unsigned int _d = 1; _d < 32; _d <<= 1) {")
  add("        const _value _other = _gr_shfl_up(_scan, _d);")
  add("        if (_lane >= _d)")
  add("            _scan = _combine(_other, _scan);")
  add("    }")
  add("    _value _thread_prefix = _gr_shfl_up(_scan, 1);")
  add("    if (_lane == 0)")
  add("        _thread_prefix = _identity();")
  add("    if (_lane == 31)")
  add("        _warp_totals[_warp] = _scan;")
  add("    __syncthreads();")
  add("    _value _warp_prefix = _identity(), _aggregate = _identity();")
  add("#pragma unroll")
  add("    for (int _w = 0; _w < WARPS; _w++) {")
  add("        if (_w == (int)_warp)")
  add("            _warp_prefix = _aggregate;")
  add("        _aggregate = _combine(_aggregate, _warp_totals[_w]);")
  add("    }")
  add("    _value _prefix = _identity();")
  add("    if (_tile == 0) {")
  add("        if (threadIdx.x == 0) {")
  publish(add, spec, "            ", "0", ss.STATUS_INCLUSIVE, "_aggregate")
  add("        }")
  add("    } else {")
  if not spec.deterministic then
    add("        if (threadIdx.x == 0) {")
    publish(add, spec, "            ", "_tile", ss.STATUS_PARTIAL, "_aggregate")
    add("        }")
  end
  add("        if (_warp == 0) {")
  look_back(add, spec, "            ")
  add("            if (_lane == 0) {")
  publish(add, spec, "                ", "_tile", ss.STATUS_INCLUSIVE, "_combine(_running, _aggregate)")
  add("                _tile_prefix = _running;")
  add("            }")
  add("        }")
  add("        __syncthreads();")
  add("        _prefix = _tile_prefix;")
  add("    }")
  add("    _value _run = _combine(_combine(_prefix, _warp_prefix), _thread_prefix);")
  if select_mode then
    add("    if (_tile == _tiles - 1 && threadIdx.x == 0)")
    add("        *_count = (%s)_combine(_prefix, _aggregate);", spec.count_c)
    add("#pragma unroll")
    add("    for (int _k = 0; _k < ITEMS; _k++) {")
    add("        if (_items[_k] && _run < _capacity)")
    add("            _out[_run] = _loaded[_k];")
    add("        _run = _combine(_run, _items[_k]);")
    add("    }")
  else
    add("#pragma unroll")
    add("    for (int _k = 0; _k < ITEMS; _k++) {")
    if spec.mode == "inclusive" then
      add("        _run = _combine(_run, _items[_k]);")
      add("        _items[_k] = _run;")
    else
      add("        const _value _next = _combine(_run, _items[_k]);")
      add("        _items[_k] = _run;")
      add("        _run = _next;")
    end
    add("    }")
    add("    // back to coalesced stores")
    add("#pragma unroll")
    add("    for (int _k = 0; _k < ITEMS; _k++)")
    add("        _exchange[_warp][_lane * ITEMS + _k] = _items[_k];")
    add("    __syncwarp();")
    add("#pragma unroll")
    add("    for (int _k = 0; _k < ITEMS; _k++) {")
    add("        const unsigned long long i = _base + _k * 32 + _lane;")
    add("        if (i < n)")
    add("            _out_y[i] = static_cast<%s>(_exchange[_warp][_k * 32 + _lane]);", spec.out_c)
    add("    }")
  end
  add("}")
  return table.concat(out, "\n") .. "\n"
end

return ss
