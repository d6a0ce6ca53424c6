-- CUDA C source for gpurun.reduction kernels: one program per signature
-- (each parameter's dtype, and whether it is a buffer or a scalar) and
-- family of launch shapes. No GPU and no gpurun objects:
-- lua/gpurun/compute/reduction.lua compiles and launches what this writes.
-- The order in which values are combined depends only on the launch shape
-- (fixed by n, the segments and the device's multiprocessor count), so the
-- same reduction of the same data gives the same bits every time.

local common = require("gpurun.common")
local source = require("gpurun.compute.elementwise_source")
local ops = require("gpurun.compute.reduce_ops")

local DTYPES = common.DTYPES

local rs = {}

-- Shared by every reduction and scan program (and skipped when two are
-- joined in one text). The block and warp steps are warp shuffles: CUB's
-- BlockReduce compiles through NVRTC, but its headers put a program out of
-- the kernel cache's reach (docs/reductions.md says why).
rs.COMMON = [[
#ifndef GPURUN_REDUCE_COMMON
#define GPURUN_REDUCE_COMMON
// Values of any trivially copyable type move between lanes 4 bytes at a
// time, each word through the same warp shuffle.
template <typename T, typename Shuffle>
__device__ __forceinline__ T _gr_shfl_words(const T &value, Shuffle shuffle)
{
    constexpr unsigned int words = (sizeof(T) + 3) / 4;
    unsigned int w[words];
    w[words - 1] = 0u;
    memcpy(w, &value, sizeof(T));
#pragma unroll
    for (unsigned int k = 0; k < words; k++)
        w[k] = shuffle(w[k]);
    T result;
    memcpy(&result, w, sizeof(T));
    return result;
}
struct _gr_down { unsigned int delta;
    __device__ unsigned int operator()(unsigned int w) const { return __shfl_down_sync(0xffffffffu, w, delta); } };
struct _gr_up { unsigned int delta;
    __device__ unsigned int operator()(unsigned int w) const { return __shfl_up_sync(0xffffffffu, w, delta); } };
struct _gr_idx { int lane;
    __device__ unsigned int operator()(unsigned int w) const { return __shfl_sync(0xffffffffu, w, lane); } };
template <typename T>
__device__ __forceinline__ T _gr_shfl_down(const T &value, unsigned int delta)
{ return _gr_shfl_words(value, _gr_down{delta}); }
template <typename T>
__device__ __forceinline__ T _gr_shfl_up(const T &value, unsigned int delta)
{ return _gr_shfl_words(value, _gr_up{delta}); }
template <typename T>
__device__ __forceinline__ T _gr_shfl_idx(const T &value, int lane)
{ return _gr_shfl_words(value, _gr_idx{lane}); }
// A value another block wrote, read past this multiprocessor's L1 (which
// is not coherent with other multiprocessors' writes). T is alignas(4).
template <typename T>
__device__ __forceinline__ T _gr_load_cg(const T *pointer)
{
    constexpr unsigned int words = sizeof(T) / 4;
    unsigned int w[words];
#pragma unroll
    for (unsigned int k = 0; k < words; k++)
        w[k] = __ldcg(reinterpret_cast<const unsigned int *>(pointer) + k);
    T result;
    memcpy(&result, w, sizeof(T));
    return result;
}
// Lane 0 gets every lane's value combined, in one fixed tree.
template <typename T, typename Op>
__device__ __forceinline__ T _gr_warp_reduce(T value, Op op)
{
#pragma unroll
    for (unsigned int delta = 16; delta > 0; delta >>= 1)
        value = op(value, _gr_shfl_down(value, delta));
    return value;
}
// Thread 0 gets the block's values combined: warps first, then the warps'
// results in warp order. Every thread of the block must call it.
template <int BLOCK, typename T, typename Op>
__device__ __forceinline__ T _gr_block_reduce(T value, Op op, T identity, T *scratch)
{
    value = _gr_warp_reduce(value, op);
    if (BLOCK > 32) {
        const unsigned int lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
        if (lane == 0)
            scratch[warp] = value;
        __syncthreads();
        if (warp == 0) {
            value = lane < BLOCK / 32 ? scratch[lane] : identity;
            value = _gr_warp_reduce(value, op);
        }
        __syncthreads(); // scratch is free again
    }
    return value;
}
// Segment s of a reduction: a row of `cols` (kind 0) or the elements
// between offsets[s] and offsets[s + 1] (kind 1 int32, 2 uint32, 3 int64,
// 4 uint64), clamped to [0, n] so that bad offsets read nothing outside.
__device__ __forceinline__ void _gr_segment_bounds(unsigned long long s, const void *offsets,
                                                   unsigned int kind, unsigned long long cols,
                                                   unsigned long long n, unsigned long long &begin,
                                                   unsigned long long &end)
{
    if (kind == 0) {
        begin = s * cols;
        end = begin + cols;
        return;
    }
    long long b, e;
    if (kind == 1) {
        b = reinterpret_cast<const int *>(offsets)[s];
        e = reinterpret_cast<const int *>(offsets)[s + 1];
    } else if (kind == 2) {
        b = reinterpret_cast<const unsigned int *>(offsets)[s];
        e = reinterpret_cast<const unsigned int *>(offsets)[s + 1];
    } else if (kind == 3) {
        b = reinterpret_cast<const long long *>(offsets)[s];
        e = reinterpret_cast<const long long *>(offsets)[s + 1];
    } else {
        const unsigned long long ub = reinterpret_cast<const unsigned long long *>(offsets)[s];
        const unsigned long long ue = reinterpret_cast<const unsigned long long *>(offsets)[s + 1];
        b = ub > n ? (long long)n : (long long)ub;
        e = ue > n ? (long long)n : (long long)ue;
    }
    if (b < 0)
        b = 0;
    if ((unsigned long long)b > n)
        b = (long long)n;
    if (e < b)
        e = b;
    if ((unsigned long long)e > n)
        e = (long long)n;
    begin = (unsigned long long)b;
    end = (unsigned long long)e;
}
#endif
#ifndef GPURUN_ELEMENTWISE_VEC
#define GPURUN_ELEMENTWISE_VEC
template <typename T, int N> struct alignas(sizeof(T) * N) _vec { T v[N]; };
#endif
]]

local lines = source.lines

-- The C type a reduction's values are held in: a dtype's compute type
-- (float for float16 and bfloat16), a type variable (its own name, bound
-- to a compute type) or "bool".
local function c_of(type_name)
  local info = DTYPES[type_name]
  if info then
    return info.compute
  end
  return type_name
end

-- The dtype a reduction's type stands for under this signature's bindings.
local function resolved(type_name, signature)
  return signature.bindings[type_name] or type_name
end

-- Bytes and alignment of the accumulator struct, as C lays it out (at
-- least 4-byte aligned, for the 4-byte moves above): for the temporaries'
-- size.
function rs.accumulator_layout(kernel, signature)
  local size, align = 0, 4
  for _, reduction in ipairs(kernel.reductions) do
    local dtype = resolved(reduction.type, signature)
    local bytes = dtype == "bool" and 1 or DTYPES[dtype].compute_size
    local field_size, field_align = bytes, bytes
    if ops.named[reduction.op] and ops.named[reduction.op].arg then
      field_size, field_align = 16, 8 -- { T v; unsigned long long i; }
    end
    align = math.max(align, field_align)
    size = (size + field_align - 1) // field_align * field_align + field_size
  end
  return (size + align - 1) // align * align, align
end

-- Its identity for `dtype`, as C.
local function identity_of(reduction, dtype)
  local named = ops.named[reduction.op]
  if named then
    return named.identity(dtype)
  end
  return reduction.identity
end

-- The namespace of one kernel: type variables, the accumulator, its
-- identity and how two combine.
local function accumulator(add, kernel, signature)

  add("namespace _gr_%s {", kernel.name)
  for _, variable in ipairs(kernel.type_variables) do
    add("typedef %s %s;", DTYPES[signature.bindings[variable]].compute, variable)
  end
  local fields, identity, combine = {}, {}, {}
  for index, reduction in ipairs(kernel.reductions) do
    local field = "f" .. (index - 1)
    local dtype = resolved(reduction.type, signature)
    local c = c_of(reduction.type)
    local named = ops.named[reduction.op]
    local init = identity_of(reduction, dtype)
    if named and named.arg then
      add("struct alignas(8) _pair%d { %s v; unsigned long long i; };", index - 1, c)
      fields[#fields + 1] = ("    _pair%d %s;"):format(index - 1, field)
      identity[#identity + 1] = ("    r.%s.v = (%s)(%s);\n    r.%s.i = ~0ull;"):format(
                                 field, c, init, field)
      combine[#combine + 1] = ("    r.%s = %s ? y.%s : x.%s;"):format(field,
                               ops.arg_combine(named.arg, "x." .. field, "y." .. field), field, field)
    else
      fields[#fields + 1] = ("    %s %s;"):format(c, field)
      identity[#identity + 1] = ("    r.%s = (%s)(%s);"):format(field, c, init)
      combine[#combine + 1] = ("    {\n        const %s a = x.%s;\n        const %s b = y.%s;\n"
                               .. "        r.%s = (%s)(%s);\n    }"):format(c, field, c, field, field, c,
                               named and named.combine or reduction.combine)
    end
  end
  local _, align = rs.accumulator_layout(kernel, signature)
  add("struct alignas(%d) _acc {", align)
  for _, line in ipairs(fields) do
    add(line)
  end
  add("};")
  add("__device__ __forceinline__ _acc _identity()")
  add("{")
  add("    _acc r;")
  for _, line in ipairs(identity) do
    add(line)
  end
  add("    return r;")
  add("}")
  add("__device__ __forceinline__ _acc _combine(const _acc &x, const _acc &y)")
  add("{")
  add("    _acc r;")
  for _, line in ipairs(combine) do
    add(line)
  end
  add("    return r;")
  add("}")
  add("struct _op {")
  add("    __device__ __forceinline__ _acc operator()(const _acc &x, const _acc &y) const")
  add("    {")
  add("        return _combine(x, y);")
  add("    }")
  add("};")
  add("} // namespace _gr_%s", kernel.name)
end

local compute_type = source.compute_type
local loaded, stored = source.loaded, source.stored

-- The kernel's parameters after the shape arguments.
local function parameter_list(kernel, signature)
  return source.parameter_declarations(kernel, signature)
end

local function head(add, kernel, signature, suffix, shape_params)
  local params = parameter_list(kernel, signature)
  add('extern "C" __global__ void __launch_bounds__(%d) %s_%s(unsigned long long n, %s%s%s)',
      kernel.block, kernel.name, suffix, shape_params, params ~= "" and ", " or "", params)
  add("{")
  source.add_grid_dependency(add)
  add("    using namespace _gr_%s;", kernel.name)
end

-- One element: the inputs as locals named as the parameters, in their
-- compute types (value(param) reads a buffer's element), the body, each
-- reduction's mapped value combined into _a, and the per-element outputs
-- stored (store(param, value): the statement storing value).
local function element(add, kernel, signature, indent, value, position, store)
  add("%s{", indent)
  local inner = indent .. "    "
  for index, param in ipairs(kernel.params) do
    local c = compute_type(signature, index)
    if signature.scalar[index] then
      add("%sconst %s %s = (%s)_in_%s;", inner, c, param.name, c, param.name)
    elseif not param.output then
      add("%sconst %s %s = %s;", inner, c, param.name, loaded(signature, index, value(param)))
    elseif not param.result then
      add("%s%s %s;", inner, c, param.name)
    end
  end
  if kernel.body ~= "" then
    for line in (source.statement(kernel.body) .. "\n"):gmatch("([^\n]*)\n") do
      add("%s%s", inner, line)
    end
  end
  add("%s_acc _m;", inner)
  for index, reduction in ipairs(kernel.reductions) do
    local field = "f" .. (index - 1)
    local c = c_of(reduction.type)
    local named = ops.named[reduction.op]
    if named and named.arg then
      add("%s_m.%s.v = (%s)(%s);", inner, field, c, reduction.map)
      add("%s_m.%s.i = %s;", inner, field, position)
    else
      add("%s_m.%s = (%s)(%s);", inner, field, c, reduction.map)
    end
  end
  add("%s_a = _combine(_a, _m);", inner)
  for index, param in ipairs(kernel.params) do
    if param.output and not param.result then
      add("%s%s;", inner, store(param, stored(signature, index, param.name)))
    end
  end
  add("%s(void)i;", inner)
  add("%s}", indent)
end

local function scalar_value(param)
  return ("_in_%s[i]"):format(param.name)
end

local function scalar_store(param, value)
  return ("_out_%s[i] = %s"):format(param.name, value)
end

-- The outputs written from _a for `segment` (count elements in it).
local function post(add, kernel, signature, indent)
  add("%s{", indent)
  local inner = indent .. "    "
  for index, param in ipairs(kernel.params) do
    if param.result then
      if param.read then
        add("%s%s %s = %s;", inner, compute_type(signature, index), param.name,
            loaded(signature, index, ("_out_%s[segment]"):format(param.name)))
      else
        add("%s%s %s;", inner, compute_type(signature, index), param.name)
      end
    end
  end
  for index, reduction in ipairs(kernel.reductions) do
    local field = "f" .. (index - 1)
    local c = c_of(reduction.type)
    local named = ops.named[reduction.op]
    add("%s{", inner)
    if named and named.arg then
      add("%s    const %s a = _a.%s.v;", inner, c, field)
      add("%s    const long long index = (long long)_a.%s.i;", inner, field)
      add("%s    (void)index;", inner)
    else
      add("%s    const %s a = _a.%s;", inner, c, field)
    end
    add("%s    (void)a;", inner)
    for line in (source.statement(reduction.post) .. "\n"):gmatch("([^\n]*)\n") do
      add("%s    %s", inner, line)
    end
    add("%s}", inner)
  end
  for index, param in ipairs(kernel.params) do
    if param.result then
      add("%s_out_%s[segment] = %s;", inner, param.name, stored(signature, index, param.name))
    end
  end
  add("%s(void)count;", inner)
  add("%s}", indent)
end

-- Every per-element buffer's element size, if they share one; nil when
-- they differ or there is none.
local function vector_width(kernel, signature)
  local size
  for index, param in ipairs(kernel.params) do
    if not signature.scalar[index] and not param.result then
      local bytes = DTYPES[signature.dtypes[index]].size
      if size and bytes ~= size then
        return nil
      end
      size = bytes
    end
  end
  return size and source.VECTOR_BYTES // size
end
rs.vector_width = vector_width

-- The end of a full reduction: the block's value, then the last block's.
local function finish_full(add, kernel, signature)
  add("    __shared__ _acc _scratch[32];")
  add("    __shared__ bool _last;")
  add("    _a = _gr_block_reduce<%d>(_a, _op(), _identity(), _scratch);", kernel.block)
  add("    if (gridDim.x > 1) {")
  add("        // Each block leaves its value; the block that takes the last ticket combines")
  add("        // them all in block order (the same order whichever block is last), and")
  add("        // resets the ticket for the next launch.")
  add("        unsigned int *_ticket = reinterpret_cast<unsigned int *>(_temp);")
  add("        _acc *_partials = reinterpret_cast<_acc *>(_temp + 16);")
  add("        if (threadIdx.x == 0) {")
  add("            _partials[blockIdx.x] = _a;")
  add("            __threadfence(); // the partial is visible before the ticket is taken")
  add("            _last = atomicAdd(_ticket, 1u) == gridDim.x - 1;")
  add("            __threadfence();")
  add("        }")
  add("        __syncthreads();")
  add("        if (!_last)")
  add("            return;")
  add("        __threadfence(); // every other block's partial is visible past this")
  add("        _a = _identity();")
  add("        for (unsigned int _b = threadIdx.x; _b < gridDim.x; _b += %d)", kernel.block)
  add("            _a = _combine(_a, _gr_load_cg(_partials + _b));")
  add("        _a = _gr_block_reduce<%d>(_a, _op(), _identity(), _scratch);", kernel.block)
  add("        if (threadIdx.x == 0)")
  add("            *_ticket = 0u;")
  add("    }")
  add("    if (threadIdx.x == 0) {")
  add("        const unsigned long long count = n;")
  post(add, kernel, signature, "        ")
  add("    }")
end

local FULL_SHAPE = "unsigned char *__restrict__ _temp"

local function full_scalar_kernel(add, kernel, signature)
  head(add, kernel, signature, "scalar", FULL_SHAPE)
  add("    const unsigned long long stride = (unsigned long long)gridDim.x * %d;", kernel.block)
  add("    const unsigned long long segment = 0;")
  add("    (void)segment;")
  add("    _acc _a = _identity();")
  add("    for (unsigned long long i = blockIdx.x * %dull + threadIdx.x; i < n; i += stride)",
      kernel.block)
  element(add, kernel, signature, "    ", scalar_value, "i", scalar_store)
  finish_full(add, kernel, signature)
  add("}")
end

-- An output written element by element (not the reduction's result).
local function is_element_output(param)
  return param.output and not param.result
end

-- `unroll` vectors per thread per step, all loaded before any is combined,
-- then a step of one vector, then the n % width elements past the last.
local function full_vector_kernel(add, kernel, signature, width)
  local unroll = kernel.unroll
  local function at(u)
    return u == 0 and "v" or ("v + %d * stride"):format(u)
  end
  head(add, kernel, signature, "vec", FULL_SHAPE)
  add("    const unsigned long long stride = (unsigned long long)gridDim.x * %d;", kernel.block)
  add("    const unsigned long long first = blockIdx.x * %dull + threadIdx.x;", kernel.block)
  add("    const unsigned long long vectors = n / %d;", width)
  add("    const unsigned long long segment = 0;")
  add("    (void)segment;")
  add("    _acc _a = _identity();")
  add("    unsigned long long v = first;")
  local function step(count, condition, advance)
    add("    for (; %s; v += %s) {", condition, advance)
    source.add_vector_loads(add, kernel, signature, width, count, at, function(index, param)
      return not signature.scalar[index] and not param.output and "in" or nil
    end)
    source.add_output_vectors(add, kernel, signature, width, count, is_element_output)
    for u = 0, count - 1 do
      add("#pragma unroll")
      add("        for (int _k = 0; _k < %d; _k++) {", width)
      add("            const unsigned long long i = (%s) * %d + _k;", at(u), width)
      element(add, kernel, signature, "            ", function(param)
        return ("_l_%s_%d.v[_k]"):format(param.name, u)
      end, "i", function(param, value)
        return ("_s_%s_%d.v[_k] = %s"):format(param.name, u, value)
      end)
      add("        }")
    end
    source.add_vector_stores(add, kernel, signature, width, count, at, is_element_output)
    add("    }")
  end
  if unroll > 1 then
    step(unroll, ("v + %d * stride < vectors"):format(unroll - 1), ("%d * stride"):format(unroll))
  end
  step(1, "v < vectors", "stride")
  add("    for (unsigned long long i = vectors * %d + first; i < n; i += stride)", width)
  element(add, kernel, signature, "    ", scalar_value, "i", scalar_store)
  finish_full(add, kernel, signature)
  add("}")
end

local SEGMENT_SHAPE = "const void *__restrict__ _offsets, unsigned long long _segments, "
                      .. "unsigned long long _cols, unsigned int _offset_kind"

local function segments_block_kernel(add, kernel, signature)
  head(add, kernel, signature, "segments_block", SEGMENT_SHAPE)
  add("    __shared__ _acc _scratch[32];")
  add("    for (unsigned long long segment = blockIdx.x; segment < _segments; segment += gridDim.x) {")
  add("        unsigned long long _begin, _end;")
  add("        _gr_segment_bounds(segment, _offsets, _offset_kind, _cols, n, _begin, _end);")
  add("        _acc _a = _identity();")
  add("        for (unsigned long long i = _begin + threadIdx.x; i < _end; i += %d)", kernel.block)
  element(add, kernel, signature, "        ", scalar_value, "i - _begin", scalar_store)
  add("        _a = _gr_block_reduce<%d>(_a, _op(), _identity(), _scratch);", kernel.block)
  add("        if (threadIdx.x == 0) {")
  add("            const unsigned long long count = _end - _begin;")
  post(add, kernel, signature, "            ")
  add("        }")
  add("    }")
  add("}")
end

local function segments_warp_kernel(add, kernel, signature)
  head(add, kernel, signature, "segments_warp", SEGMENT_SHAPE)
  add("    const unsigned int _lane = threadIdx.x & 31u;")
  add("    const unsigned long long _warps = (unsigned long long)gridDim.x * %d;", kernel.block // 32)
  add("    for (unsigned long long segment = blockIdx.x * %dull + (threadIdx.x >> 5); segment < _segments;",
      kernel.block // 32)
  add("         segment += _warps) {")
  add("        unsigned long long _begin, _end;")
  add("        _gr_segment_bounds(segment, _offsets, _offset_kind, _cols, n, _begin, _end);")
  add("        _acc _a = _identity();")
  add("        for (unsigned long long i = _begin + _lane; i < _end; i += 32)")
  element(add, kernel, signature, "        ", scalar_value, "i - _begin", scalar_store)
  add("        _a = _gr_warp_reduce(_a, _op());")
  add("        if (_lane == 0) {")
  add("            const unsigned long long count = _end - _begin;")
  post(add, kernel, signature, "            ")
  add("        }")
  add("    }")
  add("}")
end

local COLUMN_SHAPE = "unsigned char *__restrict__ _temp, unsigned long long _rows, "
                     .. "unsigned long long _cols, unsigned long long _chunks, unsigned long long _rows_per_chunk"

local function columns_kernel(add, kernel, signature)
  head(add, kernel, signature, "columns", COLUMN_SHAPE)
  add("    _acc *_partials = reinterpret_cast<_acc *>(_temp + 16);")
  add("    const unsigned long long _threads = _chunks * _cols;")
  add("    for (unsigned long long _t = blockIdx.x * %dull + threadIdx.x; _t < _threads;", kernel.block)
  add("         _t += (unsigned long long)gridDim.x * %d) {", kernel.block)
  add("        const unsigned long long segment = _t % _cols, _chunk = _t / _cols;")
  add("        const unsigned long long _r0 = _chunk * _rows_per_chunk;")
  add("        const unsigned long long _r1 = _r0 + _rows_per_chunk < _rows ? _r0 + _rows_per_chunk : _rows;")
  add("        _acc _a = _identity();")
  add("        for (unsigned long long _r = _r0; _r < _r1; _r++) {")
  add("            const unsigned long long i = _r * _cols + segment;")
  element(add, kernel, signature, "            ", scalar_value, "_r", scalar_store)
  add("        }")
  add("        if (_chunks == 1) {")
  add("            const unsigned long long count = _rows;")
  post(add, kernel, signature, "            ")
  add("        } else {")
  add("            _partials[_chunk * _cols + segment] = _a;")
  add("        }")
  add("    }")
  add("}")
  add("")
  head(add, kernel, signature, "columns_finish", COLUMN_SHAPE)
  add("    const _acc *_partials = reinterpret_cast<const _acc *>(_temp + 16);")
  add("    for (unsigned long long segment = blockIdx.x * %dull + threadIdx.x; segment < _cols;", kernel.block)
  add("         segment += (unsigned long long)gridDim.x * %d) {", kernel.block)
  add("        _acc _a = _identity();")
  add("        for (unsigned long long _chunk = 0; _chunk < _chunks; _chunk++)")
  add("            _a = _combine(_a, _partials[_chunk * _cols + segment]);")
  add("        const unsigned long long count = _rows;")
  post(add, kernel, signature, "        ")
  add("    }")
  add("}")
end

local function describe_params(kernel, signature)
  local list = {}
  for index, param in ipairs(kernel.params) do
    list[#list + 1] = ("%s %s%s%s"):format(signature.dtypes[index], param.name,
      signature.scalar[index] and " (scalar)" or "",
      param.result and " (result)" or (param.output and " (per element)" or ""))
  end
  return #list > 0 and table.concat(list, ", ") or "none"
end

-- Families and their kernels, all taking n first, then their shape
-- arguments, then the parameters in order:
--   full      <name>_vec: 16-byte loads in a grid-stride loop (when every
--             per-element buffer has one element size and is aligned), and
--             <name>_scalar; each block leaves a partial in the temporaries,
--             and the block that finishes last (a ticket counter) combines
--             them in block order and writes the result. One block: no
--             temporaries used.
--   segments  <name>_segments_block (a block per segment) and
--             <name>_segments_warp (a warp per segment): rows of a 2-D
--             layout, or segments between offsets.
--   columns   <name>_columns (a thread per column and chunk of rows) and
--             <name>_columns_finish (the chunks' partials per column).
rs.FAMILIES = { full = true, segments = true, columns = true }

-- The kernels of a family, by name.
function rs.kernel_names(kernel, family, width)
  if family == "full" then
    local names = { kernel.name .. "_scalar" }
    if width then
      names[2] = kernel.name .. "_vec"
    end
    return names
  elseif family == "segments" then
    return { kernel.name .. "_segments_block", kernel.name .. "_segments_warp" }
  end
  return { kernel.name .. "_columns", kernel.name .. "_columns_finish" }
end

-- The headers of the signature's dtypes and of the reductions' types
-- (cuda_fp16.h, cuda_bf16.h), once each.
function rs.include_headers(add, kernel, signature)
  local included = {}
  local function include(dtype)
    local header = DTYPES[dtype] and DTYPES[dtype].header
    if header and not included[header] then
      included[header] = true
      add("#include <%s>", header)
    end
  end
  for index in ipairs(kernel.params) do
    include(signature.dtypes[index])
  end
  for _, reduction in ipairs(kernel.reductions) do
    include(resolved(reduction.type, signature))
  end
end

-- The program of one family for one signature ({ dtypes, scalar,
-- bindings }). Returns the source and the vector width (full only; nil:
-- no vector kernel).
--
-- A kernel description (see reduction.lua) has `params` (inputs, then
-- outputs: `result` outputs get one value per segment, the others, a
-- fused pipeline's intermediates, one per element), `body` (statements run
-- for each element before the maps), and `reductions`, each a value to
-- reduce: `type` (a dtype, a type variable or "bool"), `map` (its
-- expression for one element), `op` (a named operation of reduce_ops) or
-- `combine` and `identity` (C expressions), and `post` (statements that
-- write the outputs from the reduced value `a`, and for argmin/argmax its
-- 0-based `index`, -1 when the segment is empty).
function rs.generate(kernel, signature, family)
  local out, add = lines()
  local width = family == "full" and vector_width(kernel, signature) or nil
  add("// gpurun.reduction kernel '%s' (%s)", kernel.name, family)
  add("//   %s", describe_params(kernel, signature))
  for _, reduction in ipairs(kernel.reductions) do
    add("//   reduce %s of: %s", reduction.op or ("(" .. reduction.combine .. ")"), reduction.map)
  end
  rs.include_headers(add, kernel, signature)
  add(rs.COMMON)
  if kernel.cache == "streaming" and width then
    add(source.STREAMING)
  end
  if kernel.preamble ~= "" then
    add(kernel.preamble)
  end
  accumulator(add, kernel, signature)
  add("")
  if family == "full" then
    full_scalar_kernel(add, kernel, signature)
    if width then
      add("")
      full_vector_kernel(add, kernel, signature, width)
    end
  elseif family == "segments" then
    segments_block_kernel(add, kernel, signature)
    add("")
    segments_warp_kernel(add, kernel, signature)
  else
    columns_kernel(add, kernel, signature)
  end
  return table.concat(out, "\n") .. "\n", width
end

return rs
