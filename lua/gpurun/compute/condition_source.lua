-- CUDA C for the kernel that decides a conditional node from an expression
-- (condition_parse.lua's tree): one block reduces each call's buffers with
-- the reduction engine's block step and operations (reduction_source,
-- reduce_ops), in double, then thread 0 compares and sets the node's
-- condition; a while loop's decision also reads its cancel flag. And the
-- kernel that only checks that flag, for loops whose kernels are the
-- user's. No GPU and no gpurun objects.
--
--   local cs = require("gpurun.compute.condition_source")
--   local text, name = cs.decision(tree, { u = "float32", v = "float32" })

local common = require("gpurun.common")
local ops = require("gpurun.compute.reduce_ops")
local rs = require("gpurun.compute.reduction_source")

local DTYPES = common.DTYPES

local cs = {}

cs.BLOCK = 512

-- The cancel flag is host memory, a bus round trip (about 1 us) away: each
-- kernel reads a flag at most once per cs.CANCEL_PERIOD_NS of the device's
-- clock, so short passes do not each pay the trip. The time of the last
-- read is kept per flag address in a small table of the module; two flags
-- that share an entry only read more often, and a torn entry delays a read
-- by one period at most, so a cancel is seen within a period and a pass.
-- The entry is loaded first and used last (_gc_cancel_peek, then
-- _gc_cancel_check), so that its load overlaps a decision's reductions
-- rather than delaying them.
cs.CANCEL_PERIOD_NS = 200000
local CANCEL_READ = ([[
#define GPURUN_CANCEL_ENTRIES 256
struct _gc_cancel_seen { unsigned long long flag, time; };
__device__ _gc_cancel_seen _gc_cancel_table[GPURUN_CANCEL_ENTRIES];
struct _gc_cancel_peeked { unsigned long long flag, time, now; };
__device__ __forceinline__ _gc_cancel_seen *_gc_cancel_entry(unsigned long long flag)
{
    return &_gc_cancel_table[(flag >> 2) & (GPURUN_CANCEL_ENTRIES - 1)];
}
__device__ __forceinline__ _gc_cancel_peeked _gc_cancel_peek(unsigned long long flag)
{
    _gc_cancel_peeked peeked;
    asm volatile("mov.u64 %%0, %%%%globaltimer;" : "=l"(peeked.now));
    const _gc_cancel_seen *seen = _gc_cancel_entry(flag);
    peeked.flag = __ldcg(&seen->flag);
    peeked.time = __ldcg(&seen->time);
    return peeked;
}
__device__ __forceinline__ unsigned int _gc_cancel_check(unsigned long long flag,
                                                         _gc_cancel_peeked peeked)
{
    if (peeked.flag == flag && peeked.now - peeked.time < %dull)
        return 0u;
    const unsigned int cancelled = *reinterpret_cast<const volatile unsigned int *>(flag);
    _gc_cancel_seen *seen = _gc_cancel_entry(flag);
    __stcg(&seen->flag, flag);
    __stcg(&seen->time, peeked.now);
    return cancelled;
}
__device__ __forceinline__ unsigned int _gc_cancelled(unsigned long long flag)
{
    return _gc_cancel_check(flag, _gc_cancel_peek(flag));
}
]]):format(cs.CANCEL_PERIOD_NS)

-- The kernel for loops whose condition the user's kernels set: after each
-- pass, it clears the condition once the flag is set (after the user's
-- decision in stream order, so the two never race).
cs.CANCEL_NAME = "gpurun_loop_cancel"
cs.CANCEL = "#include <cuda_device_runtime_api.h>\n\n" .. CANCEL_READ .. [[

extern "C" __global__ void gpurun_loop_cancel(cudaGraphConditionalHandle condition,
                                              unsigned long long flag)
{
    if (_gc_cancelled(flag) != 0u)
        cudaGraphSetConditional(condition, 0u);
}
]]

local INF = "__longlong_as_double(0x7ff0000000000000LL)"
local MAX_COMBINE = "(" .. ops.named.max.combine .. ")"
local MIN_COMBINE = "(" .. ops.named.min.combine .. ")"

-- name -> { map (of x, or a and b), combine (of a and b), identity, post
-- (of r and n, the buffer's elements) }, all in double.
local CALLS = {
  sum = { map = "x", combine = "(" .. ops.named.sum.combine .. ")", identity = "0.0" },
  prod = { map = "x", combine = "(" .. ops.named.prod.combine .. ")", identity = "1.0" },
  max = { map = "x", combine = MAX_COMBINE, identity = "(-" .. INF .. ")" },
  min = { map = "x", combine = MIN_COMBINE, identity = INF },
  mean = { map = "x", combine = "(a + b)", identity = "0.0", post = "r / (double)n" },
  norm = { map = "x * x", combine = "(a + b)", identity = "0.0", post = "sqrt(r)" },
  max_abs = { map = "fabs(x)", combine = MAX_COMBINE, identity = "0.0" },
  any = { map = "(x != 0.0 ? 1.0 : 0.0)", combine = "(a > b ? a : b)", identity = "0.0" },
  all = { map = "(x != 0.0 ? 1.0 : 0.0)", combine = "(a < b ? a : b)", identity = "1.0" },
  -- as gpurun.max_abs_diff: 0 where both are the same infinity, NaN wins
  max_abs_diff = { map = "(x == y ? 0.0 : fabs(x - y))", combine = MAX_COMBINE, identity = "0.0" },
}

-- A double as C text that reads back the same.
local function number(value)
  if value ~= value then return "__longlong_as_double(0x7ff8000000000000LL)" end
  if value == math.huge then return INF end
  if value == -math.huge then return "(-" .. INF .. ")" end
  return ("%.17g"):format(value)
end

-- C for the tree's truth, call results named r1, r2, ... in the order
-- the calls are met; `calls` gets each call.
local function truth(node, calls)
  if node.kind == "compare" then
    calls[#calls + 1] = node.call
    local op = node.op == "~=" and "!=" or node.op
    return ("(r%d %s %s)"):format(#calls, op, number(node.value))
  elseif node.kind == "not" then
    return "(!" .. truth(node.operand, calls) .. ")"
  end
  local left = truth(node.left, calls)
  return ("(%s %s %s)"):format(left, node.kind == "and" and "&&" or "||", truth(node.right, calls))
end

local function value_of(dtype, pointer)
  local info = DTYPES[dtype]
  if info.compute ~= info.c then
    return ("(double)(%s)%s[i]"):format(info.compute, pointer)
  end
  return ("(double)%s[i]"):format(pointer)
end

-- decision(tree, dtypes [, name]) -> source, kernel name, the buffer
-- names in parameter order. dtypes: buffer name -> dtype. The kernel
-- takes (condition, cancel flag address or 0, then for each buffer its
-- pointer and element count); it runs as one block of cs.BLOCK threads.
function cs.decision(tree, dtypes, name)
  name = name or "gpurun_decide"
  local calls = {}
  local verdict = truth(tree, calls)
  local names, index = {}, {}
  for _, call in ipairs(calls) do
    for _, arg in ipairs(call.args) do
      if not index[arg] then
        names[#names + 1] = arg
        index[arg] = #names
      end
    end
  end
  local out, headers = {}, {}
  local function add(fmt, ...) out[#out + 1] = select("#", ...) > 0 and fmt:format(...) or fmt end
  add("// gpurun conditional node decision: %s", tostring(#calls) .. " reduction(s)")
  add("#include <cuda_device_runtime_api.h>")
  for _, arg in ipairs(names) do
    local header = DTYPES[dtypes[arg]].header
    if header and not headers[header] then
      headers[header] = true
      add("#include <%s>", header)
    end
  end
  add(rs.COMMON)
  add(CANCEL_READ)
  for k, call in ipairs(calls) do
    add("struct _gc_op%d { __device__ double operator()(double a, double b) const { return %s; } };",
        k, CALLS[call.name].combine)
  end
  local params = { "cudaGraphConditionalHandle condition", "unsigned long long cancel" }
  for k, arg in ipairs(names) do
    params[#params + 1] = ("const %s *__restrict__ p%d"):format(DTYPES[dtypes[arg]].c, k)
    params[#params + 1] = ("unsigned long long n%d"):format(k)
  end
  add('extern "C" __global__ void __launch_bounds__(%d) %s(%s)', cs.BLOCK, name,
      table.concat(params, ", "))
  add("{")
  add("    __shared__ double scratch[%d];", cs.BLOCK // 32)
  add("    _gc_cancel_peeked peeked = {0ull, 0ull, 0ull};")
  add("    if (threadIdx.x == 0 && cancel != 0ull)")
  add("        peeked = _gc_cancel_peek(cancel);")
  for k, call in ipairs(calls) do
    local spec = CALLS[call.name]
    local first = index[call.args[1]]
    local second = call.args[2] and index[call.args[2]]
    add("    double r%d;", k)
    add("    {")
    add("        const unsigned long long n = n%d;", first)
    add("        double acc = %s;", spec.identity)
    add("        for (unsigned long long i = threadIdx.x; i < n; i += %d) {", cs.BLOCK)
    add("            const double x = %s;", value_of(dtypes[call.args[1]], "p" .. first))
    if second then
      add("            const double y = %s;", value_of(dtypes[call.args[2]], "p" .. second))
    end
    add("            const double a = acc, b = %s;", spec.map)
    add("            acc = %s;", spec.combine)
    add("        }")
    add("        const double r = _gr_block_reduce<%d>(acc, _gc_op%d{}, (double)%s, scratch);",
        cs.BLOCK, k, spec.identity)
    add("        r%d = %s;", k, spec.post or "r")
    add("    }")
  end
  add("    if (threadIdx.x == 0) {")
  add("        bool again = %s;", verdict)
  add("        if (cancel != 0ull && _gc_cancel_check(cancel, peeked) != 0u)")
  add("            again = false;")
  add("        cudaGraphSetConditional(condition, again ? 1u : 0u);")
  add("    }")
  add("}")
  return table.concat(out, "\n") .. "\n", name, names
end

return cs
