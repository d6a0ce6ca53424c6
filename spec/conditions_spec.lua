-- Conditional nodes from expressions ("max_abs_diff(u, v) > 1e-6") and
-- cancellable while loops (graph:cancel(), Ctrl-C): the parser and the
-- generated kernels without a GPU, the nodes and the cancel flag with one.
local gpurun = require("gpurun")
local bench = require("gpurun.bench")
local parse = require("gpurun.compute.condition_parse")
local cs = require("gpurun.compute.condition_source")

local ARCH = "sm_90"

local function compiles(source)
  return gpurun.Program(source, "c++", gpurun.ProgramOptions({ std = "c++17", arch = ARCH })):compile("ptx")
end

describe("condition expressions", function()
  it("parses reductions compared with numbers, joined by and, or, not", function()
    local tree = assert(parse.parse("max_abs_diff(u, v) > 1e-6"))
    assert.are.same({ kind = "compare", op = ">", value = 1e-6,
                      call = { name = "max_abs_diff", args = { "u", "v" }, position = 1 } }, tree)
    tree = assert(parse.parse("1 < norm2(w)"))
    assert.are.equal(">", tree.op)
    assert.are.equal("norm", tree.call.name)
    tree = assert(parse.parse("not sum(a) >= -2.5 or max(b) ~= 0 and (min(c) <= 0x10 or any(d) != 1)"))
    assert.are.equal("or", tree.kind)
    assert.are.equal("not", tree.left.kind)
    assert.are.equal(-2.5, tree.left.operand.value)
    assert.are.equal("and", tree.right.kind)
    assert.are.equal("~=", tree.right.right.right.op)
    assert.are.equal(16, tree.right.right.left.value)
    assert.are.same({ "a", "b", "c", "d" }, parse.names(tree))
    tree = assert(parse.parse("max(x) < -inf"))
    assert.are.equal(-math.huge, tree.value)
    tree = assert(parse.parse("mean(x) == nan"))
    assert.is_true(tree.value ~= tree.value)
  end)

  it("refuses bad expressions with one line naming the token and its position", function()
    local cases = {
      { "", "unexpected the end of the expression at position 1" },
      { "max(u", "unexpected the end of the expression at position 6 (expected ',' or ')')" },
      { "mux(u) > 1", "unknown reduction 'mux' at position 1" },
      { "u > 1", "unknown reduction 'u' at position 1" },
      { "max(u) > v", "unexpected 'v' at position 10 (expected a number)" },
      { "max(u) > 1 max(v) > 1", "unexpected 'max' at position 12 (expected 'and', 'or' or the end)" },
      { "max(1) > 1", "unexpected '1' at position 5 (expected a buffer name)" },
      { "1 > 2", "unexpected '2' at position 5 (expected a reduction" },
      { "max_abs_diff(u) > 0", "max_abs_diff takes 2 buffers, got 1 at position 1" },
      { "max(u) > 1.5.5", "unexpected '.5' at position 13" },
      { "max(u) > 2x", "bad number '2x' at position 10" },
      { "max(u) > 1 and", "unexpected the end of the expression at position 15" },
      { "max(u) = 1", "unexpected character '=' at position 8" },
      { "max(u)\0 > 1", "unexpected character '?' at position 7" },
      { 5, "an expression string expected, got number" },
    }
    for _, case in ipairs(cases) do
      local tree, why = parse.parse(case[1])
      assert.is_nil(tree)
      assert.matches(case[2], why, 1, true)
      assert.is_nil(why:find("\n"))
    end
  end)

  it("gives a tree or a one-line reason for hundreds of random expressions", function()
    local pieces = { "max", "min", "sum", "prod", "mean", "norm", "norm2", "max_abs", "max_abs_diff",
      "any", "all", "mux", "u", "v", "(", ")", ",", "<", "<=", ">", ">=", "==", "~=", "!=", "=", "and",
      "or", "not", "1", "-2.5", "1e-6", "1e", "0x1f", ".5", "inf", "nan", "-", "+", "#", "@", "\0", " ",
      "\n", "é", "((((", "))))" }
    local seed = 12345
    local function random(n)
      seed = (seed * 1103515245 + 12345) % 2147483648
      return seed % n + 1
    end
    for _ = 1, 600 do
      local parts = {}
      for k = 1, random(12) do parts[k] = pieces[random(#pieces)] end
      local text = table.concat(parts, random(2) == 1 and " " or "")
      local ok, tree, why = pcall(parse.parse, text)
      assert.is_true(ok, tree)
      if tree then
        assert.is_true(#parse.names(tree) >= 1)
      else
        assert.are.equal("string", type(why))
        assert.is_nil(why:find("\n"), why)
      end
    end
    -- well-formed ones too, built from the grammar
    local function expression(depth)
      local r = random(depth > 3 and 1 or 4)
      if r == 1 then
        local names = { "sum", "max", "min", "mean", "norm", "max_abs", "any", "all", "prod" }
        return ("%s(u) %s %d"):format(names[random(#names)], ({ "<", ">", "<=", ">=", "==", "~=" })[random(6)],
                                     random(100) - 50)
      elseif r == 2 then
        return "not " .. expression(depth + 1)
      elseif r == 3 then
        return "(" .. expression(depth + 1) .. " and " .. expression(depth + 1) .. ")"
      end
      return expression(depth + 1) .. " or max_abs_diff(u, v) > 1e-3"
    end
    for _ = 1, 200 do
      local text = expression(0)
      assert.is_truthy(parse.parse(text), text)
    end
  end)

  it("writes decision kernels that NVRTC compiles, for every reduction and real dtype", function()
    local tree = assert(parse.parse("sum(a) > 1 and prod(b) < 2 or max(c) >= 0 and min(d) <= 0 or "
      .. "not mean(e) == 0 and norm(f) ~= 1 and max_abs(g) < 5 and any(h) == 1 and all(i) == 0 "
      .. "and max_abs_diff(j, k) > 1e-6"))
    local dtypes = { a = "float32", b = "float64", c = "int8", d = "uint8", e = "int16", f = "float16",
      g = "bfloat16", h = "int32", i = "uint32", j = "int64", k = "uint64" }
    local source, name, order = cs.decision(tree, dtypes)
    assert.are.same({ "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k" }, order)
    local code = compiles(source)
    assert.truthy(code.code:find(name, 1, true))
    assert.truthy(code.code:find("entry " .. name, 1, true))
    local cancel = compiles(cs.CANCEL)
    assert.truthy(cancel.code:find(cs.CANCEL_NAME, 1, true))
  end)

  it("checks a while loop's options", function()
    local conditions = require("gpurun.compute.conditions")
    assert.is_true(conditions.loop_options("GraphBuilder:while_loop", 2, nil))
    assert.is_true(conditions.loop_options("GraphBuilder:while_loop", 2, { cancellable = true }))
    assert.is_false(conditions.loop_options("GraphBuilder:while_loop", 2, { cancellable = false }))
    local cases = {
      { { cancellable = "yes" }, "options.cancellable must be a boolean, got 'yes'" },
      { { cancel = true }, "unknown option 'cancel' (known: cancellable)" },
      { 5, "options table expected, got number" },
    }
    for _, case in ipairs(cases) do
      local ok, err = pcall(conditions.loop_options, "GraphBuilder:while_loop", 2, case[1])
      assert.is_false(ok)
      assert.matches("bad argument #2 to 'GraphBuilder:while_loop' (" .. case[2], err, 1, true)
    end
  end)
end)

-- Kernels of the loops below: a pass counter, a countdown that stops its
-- loop at zero, and one that only counts down (an expression decides).
local SOURCE = [[
#include <cuda_device_runtime_api.h>

extern "C" __global__ void add(int *x, int amount) { *x += amount; }

extern "C" __global__ void count_down(cudaGraphConditionalHandle condition, int *left)
{
    int now = --*left;
    cudaGraphSetConditional(condition, now > 0 ? 1u : 0u);
}

extern "C" __global__ void decrement(int *left) { --*left; }

extern "C" __global__ void relax(const float *u, float *v, unsigned int n)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) v[i] = i == 0 || i == n - 1 ? u[i] : 0.5f * (u[i - 1] + u[i + 1]);
}

extern "C" __global__ void decide(cudaGraphConditionalHandle condition, const float *residual, float tol)
{
    cudaGraphSetConditional(condition, *residual > tol ? 1u : 0u);
}
]]

local ONE = gpurun.LaunchConfig({ grid = 1, block = 1 })

describe("conditional nodes from expressions, and cancellable loops", function()
  local device, code, stream
  local function kernel(name) return code:get_kernel(name) end
  before_each(function()
    device = gpurun.Device(0)
    device:set_current()
    if not code then
      code = gpurun.Program(SOURCE, "c++", gpurun.ProgramOptions({ std = "c++17", arch = "sm_" .. device.arch }))
        :compile("cubin")
    end
    stream = device:create_stream()
  end)
  after_each(function() stream:close() end)

  local function value(buffer) return buffer:get(1, stream) end
  local function run(graph)
    graph:launch(stream)
    stream:sync()
  end

  it("takes an if node's body from an expression, for both outcomes #gpu", function()
    local x, flag = gpurun.zeros(1, "int32"), gpurun.zeros(4, "float32")
    local graph <close> = bench.capture(stream, function(builder)
      local body = builder:if_then("max(flag) > 0.5", { flag = flag })
      body:begin_building()
      gpurun.launch(body, ONE, kernel("add"), x, 5)
      body:end_building()
      local yes, no = builder:if_else("sum(flag) == 0", { flag = flag })
      yes:begin_building()
      gpurun.launch(yes, ONE, kernel("add"), x, 100)
      yes:end_building()
      no:begin_building()
      gpurun.launch(no, ONE, kernel("add"), x, 1000)
      no:end_building()
    end)
    run(graph)
    assert.are.equal(100, value(x))
    flag:copy_from({ 0, 0, 1, 0 }, stream)
    run(graph)
    assert.are.equal(1105, value(x))
    flag:copy_from({ 0, 0.25, 0, 0 }, stream)
    run(graph)
    assert.are.equal(2105, value(x))
  end)

  it("loops while an expression holds, deciding before the first pass #gpu", function()
    local x, left = gpurun.zeros(1, "int32"), gpurun.zeros(1, "int32")
    local graph <close> = bench.capture(stream, function(builder)
      local body = builder:while_loop("max(left) > 0", { left = left })
      body:begin_building()
      gpurun.launch(body, ONE, kernel("add"), x, 1)
      gpurun.launch(body, ONE, kernel("decrement"), left)
      body:end_building()
    end)
    assert.is_true(graph.has_loop)
    assert.is_true(graph.cancellable)
    for _, passes in ipairs({ 5, 0, 1, 300 }) do
      x:fill(0, stream)
      left:fill(passes, stream)
      run(graph)
      assert.are.equal(passes, value(x))
      assert.are.equal(0, value(left))
    end
  end)

  it("converges to the same answer from an expression as from a hand-written decision #gpu", function()
    local n, tol = 24, 1e-4
    local initial = {}
    for i = 1, n do initial[i] = i == n and 1 or 0 end
    local grid = gpurun.LaunchConfig({ grid = 1, block = 32 })
    -- Each pass relaxes u into v and copies v back; the loop goes on while
    -- the pass changed some point by more than tol (by hand: a residual
    -- reduced in the body and a kernel that decides; from the expression:
    -- the values before the pass kept in w, compared after it).
    local function solve(expression)
      local u, v = gpurun.array(initial, "float32"), gpurun.zeros(n, "float32")
      local w, residual, steps = gpurun.zeros(n, "float32"), gpurun.zeros(1, "float32"), gpurun.zeros(1, "int32")
      gpurun.max_abs_diff(stream, v, u, residual) -- compiled before the capture
      local graph <close> = bench.capture(stream, function(builder)
        local body, again
        if expression then
          w:fill(1e30, builder) -- far from u: the first pass runs
          body = builder:while_loop("max_abs_diff(u, w) > 1e-4", { u = u, w = w })
        else
          again = builder:create_condition(1)
          body = builder:while_loop(again)
        end
        body:begin_building()
        if expression then
          w:copy_from(u, body)
          gpurun.launch(body, grid, kernel("relax"), u, v, n)
          u:copy_from(v, body)
        else
          gpurun.launch(body, grid, kernel("relax"), u, v, n)
          gpurun.max_abs_diff(body, v, u, residual)
          u:copy_from(v, body)
          gpurun.launch(body, ONE, kernel("decide"), again, residual, tol)
        end
        gpurun.launch(body, ONE, kernel("add"), steps, 1)
        body:end_building()
      end)
      run(graph)
      return u:to_table(), value(steps)
    end
    local by_hand, hand_steps = solve(false)
    local by_expression, expression_steps = solve(true)
    assert.is_true(hand_steps > 10)
    assert.are.equal(hand_steps, expression_steps)
    assert.are.same(by_hand, by_expression)
  end)

  it("ends a while-true loop at graph:cancel() from another coroutine, and runs later launches in full #gpu",
     function()
    local x, left = gpurun.zeros(1, "int32"), gpurun.zeros(1, "int32")
    local graph <close> = bench.capture(stream, function(builder)
      local again = builder:create_condition(1)
      local body = builder:while_loop(again)
      body:begin_building()
      gpurun.launch(body, ONE, kernel("add"), x, 1)
      gpurun.launch(body, ONE, kernel("count_down"), again, left)
      body:end_building()
    end)
    assert.is_true(graph.cancellable)
    left:fill(2000000000, stream) -- hours of passes
    graph:launch(stream)
    local canceller = coroutine.wrap(function() return graph:cancel() end)
    assert.are.equal(graph, canceller())
    stream:sync()
    local passes = value(x)
    assert.is_true(passes >= 1 and passes < 2000000000)
    assert.are.equal(2000000000 - passes, value(left))
    -- the next launch clears the flag first: it runs every pass
    x:fill(0, stream)
    left:fill(7, stream)
    run(graph)
    assert.are.equal(7, value(x))
    assert.are.equal(0, value(left))
  end)

  it("ends a while-true loop from a host callback beside it #gpu", function()
    local x = gpurun.zeros(1, "int32")
    local graph
    local callback <close> = gpurun.HostCallback(function() graph:cancel() end)
    graph = bench.capture(stream, function(builder)
      local _, side = builder:split(2)
      callback:launch(side)
      local again = builder:create_condition(1)
      local body = builder:while_loop(again)
      body:begin_building()
      gpurun.launch(body, ONE, kernel("add"), x, 1)
      body:end_building()
      gpurun.join(builder, side)
    end)
    run(graph)
    assert.is_true(value(x) >= 1)
    assert.are.equal(1, callback.calls)
    graph:close()
  end)

  it("leaves the passes of loops that end by themselves as they were, cancellable or not #gpu", function()
    for _, cancellable in ipairs({ true, false }) do
      local x, left = gpurun.zeros(1, "int32"), gpurun.zeros(1, "int32")
      local graph <close> = bench.capture(stream, function(builder)
        local again = builder:create_condition(1)
        local body = builder:while_loop(again, { cancellable = cancellable })
        body:begin_building()
        gpurun.launch(body, ONE, kernel("add"), x, 1)
        gpurun.launch(body, ONE, kernel("count_down"), again, left)
        body:end_building()
      end)
      assert.are.equal(cancellable, graph.cancellable)
      for _, passes in ipairs({ 1, 3, 1000 }) do
        x:fill(0, stream)
        left:fill(passes, stream)
        run(graph)
        assert.are.equal(passes, value(x))
      end
      -- a cancel before a launch reaches only the launches made before it
      graph:cancel()
      x:fill(0, stream)
      left:fill(50, stream)
      run(graph)
      assert.are.equal(50, value(x))
    end
  end)
end)
