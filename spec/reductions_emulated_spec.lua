-- What the generated reductions, scans, select and elementwise kernels
-- compute, checked against host references on a machine with no GPU:
-- their CUDA C, compiled by g++
-- against spec/support/cuda_emu.h (each CUDA thread a fiber, several blocks
-- racing at once on OS threads), launched by gpurun's own Lua code through
-- spec/support/emulated_gpu.lua. The same checks on the real device are
-- spec/reductions_spec.lua's #gpu ones; these catch a wrong index, order or
-- look-back before a GPU ever runs them. Pending where g++ is missing.
local gpurun = require("gpurun")
local emulated = require("spec.support.emulated_gpu")

local available = emulated.available()

-- A deterministic pseudo-random sequence of n values of a dtype.
local function values(n, dtype, seed)
  local state = seed or 12345
  local list = {}
  for i = 1, n do
    state = (state * 1103515245 + 12345) % 2147483648
    local u = state / 2147483648
    if dtype:match("float") then
      -- exact in float32, float16 and bfloat16: quarters in [-8, 8)
      list[i] = math.floor(u * 64) / 4 - 8
    elseif dtype == "int8" then
      list[i] = math.floor(u * 200) - 100
    elseif dtype == "uint8" then
      list[i] = math.floor(u * 250)
    else
      list[i] = math.floor(u * 2000) - (dtype:sub(1, 1) == "u" and 0 or 1000)
    end
  end
  return list
end

-- A value as a dtype stores it (gpurun's one rounding rule).
local function as(dtype, value)
  return gpurun[gpurun.dtypes[dtype].scalar](value).value
end

local function check(cond, fmt, ...)
  if not cond then
    error(fmt:format(...), 2)
  end
end

describe("emulated reductions", function()
  if not available then
    pending("no g++ to compile the emulated kernels")
    return
  end

  it("reduce every dtype with every prebuilt operation, one block and many, against the host", function()
    local session <close> = emulated.session{ multiprocessors = 2 }
    local M, stream = session.modules, session.stream
    local cases = {}
    for _, dtype in ipairs{ "float32", "float64", "int32", "uint32", "int64", "uint64", "int8", "uint8",
                            "int16", "uint16" } do
      for _, n in ipairs{ 1, 5, 33, 1023, 4099, 20011 } do
        local t = values(n, dtype, n)
        local x = session:array(t, dtype)
        local case = { dtype = dtype, n = n, t = t, out = {} }
        for _, op in ipairs{ "sum", "min", "max", "argmin", "argmax", "any", "all", "mean" } do
          case.out[op] = M.prebuilt[op](stream, x)
        end
        case.out.f64 = M.prebuilt.sum(stream, x, nil, { accumulate = "float64" })
        if n <= 33 then case.out.prod = M.prebuilt.prod(stream, x, nil, { accumulate = "float64" }) end
        cases[#cases + 1] = case
      end
    end
    session:run()
    for _, case in ipairs(cases) do
      local what = ("%s n=%d"):format(case.dtype, case.n)
      local sum, lo, hi, lo_at, hi_at, any, all, prod = 0, math.huge, -math.huge, 0, 0, 0, 1, 1.0
      for i, v in ipairs(case.t) do
        sum, prod = sum + v, prod * v
        if v < lo then lo, lo_at = v, i end
        if v > hi then hi, hi_at = v, i end
        if v ~= 0 then any = 1 else all = 0 end
      end
      check(case.out.sum:get(1) == sum, "%s: sum %s, want %s", what, case.out.sum:get(1), sum)
      check(case.out.f64:get(1) == sum, "%s: float64 sum %s, want %s", what, case.out.f64:get(1), sum)
      check(case.out.min:get(1) == lo, "%s: min %s, want %s", what, case.out.min:get(1), lo)
      check(case.out.max:get(1) == hi, "%s: max %s, want %s", what, case.out.max:get(1), hi)
      check(case.out.argmin:get(1) == lo_at, "%s: argmin %s, want %s", what, case.out.argmin:get(1), lo_at)
      check(case.out.argmax:get(1) == hi_at, "%s: argmax %s, want %s", what, case.out.argmax:get(1), hi_at)
      check(case.out.any:get(1) == any, "%s: any", what)
      check(case.out.all:get(1) == all, "%s: all", what)
      local mean = case.out.mean:get(1)
      check(math.abs(mean - sum / case.n) <= 1e-6 * math.max(1, math.abs(sum / case.n)), "%s: mean %s, want %s",
            what, mean, sum / case.n)
      if case.out.prod then
        local got = case.out.prod:get(1)
        check(got == prod or math.abs(got - prod) <= 1e-12 * math.abs(prod), "%s: prod %s, want %s", what, got, prod)
      end
    end
  end)

  it("reduce float16 and bfloat16 in float, rounding only the result, against the host", function()
    local session <close> = emulated.session{ multiprocessors = 2 }
    local M, stream = session.modules, session.stream
    local cases = {}
    for _, dtype in ipairs{ "float16", "bfloat16" } do
      for _, n in ipairs{ 1, 33, 4099, 20011 } do
        local t = values(n, dtype, n)
        local x = session:array(t, dtype)
        local case = { dtype = dtype, n = n, t = t, out = {} }
        for _, op in ipairs{ "sum", "min", "max", "argmin", "argmax", "any", "all", "mean", "norm" } do
          case.out[op] = M.prebuilt[op](stream, x)
        end
        case.out.f32 = M.prebuilt.sum(stream, x, nil, { accumulate = "float32" })
        case.out.rows = M.prebuilt.sum(stream, x, session:zeros(1, dtype), { rows = 1, cols = n, axis = 2 })
        case.out.diff = M.prebuilt.max_abs_diff(stream, x, 0.25)
        cases[#cases + 1] = case
      end
    end
    session:run()
    for _, case in ipairs(cases) do
      local what = ("%s n=%d"):format(case.dtype, case.n)
      local sum, squares, lo, hi, lo_at, hi_at, diff = 0, 0, math.huge, -math.huge, 0, 0, 0
      for i, v in ipairs(case.t) do
        sum, squares = sum + v, squares + v * v
        if v < lo then lo, lo_at = v, i end
        if v > hi then hi, hi_at = v, i end
        diff = math.max(diff, math.abs(v - 0.25))
      end
      assert.are.equal(case.dtype, case.out.sum.dtype, what)
      -- quarters sum exactly in float: only the stored result is rounded
      check(case.out.sum:get(1) == as(case.dtype, sum), "%s: sum %s, want %s", what, case.out.sum:get(1),
            as(case.dtype, sum))
      check(case.out.rows:get(1) == as(case.dtype, sum), "%s: row sum %s", what, case.out.rows:get(1))
      check(case.out.f32:get(1) == sum, "%s: float32 sum %s, want %s", what, case.out.f32:get(1), sum)
      assert.are.same({ lo, hi, lo_at, hi_at }, { case.out.min:get(1), case.out.max:get(1),
                                                 case.out.argmin:get(1), case.out.argmax:get(1) }, what)
      check(case.out.any:get(1) == (lo ~= 0 or hi ~= 0) and 1 or 0, "%s: any", what)
      assert.are.equal("float32", case.out.diff.dtype)
      check(case.out.diff:get(1) == diff, "%s: max_abs_diff %s, want %s", what, case.out.diff:get(1), diff)
      local ulp = 2.0 ^ (1 - gpurun.dtypes[case.dtype].digits)
      for name, want in pairs{ mean = sum / case.n, norm = math.sqrt(squares) } do
        local got = case.out[name]:get(1)
        check(math.abs(got - want) <= ulp * math.abs(want) + 1e-30, "%s: %s %s, want %s", what, name, got, want)
      end
    end
  end)

  it("give the same bits run to run while blocks race, and handle NaN, ties and a misaligned view", function()
    local session <close> = emulated.session{ multiprocessors = 2, concurrency = 4 }
    local M, stream = session.modules, session.stream
    local t = {}
    for i = 1, 30001 do t[i] = 1 / (i + 0.5) end
    local x = session:array(t, "float32")
    local first, again = session:zeros(1, "float32"), session:zeros(1, "float32")
    M.prebuilt.sum(stream, x, first)
    session:run()
    M.prebuilt.sum(stream, x, again)
    session:run()
    assert.are.equal(first:to_bytes(), again:to_bytes())
    local ties = session:array({ 3, 9, 1, 9, 1, 0 / 0, 9, 0 / 0 }, "float64")
    local at_max, at_min, big = session:zeros(1, "int64"), session:zeros(1, "int32"), session:zeros(1, "float64")
    local plain = session:array({ 3, 9, 1, 9, 1, 5 }, "float64")
    local plain_max, plain_min = session:zeros(1, "int64"), session:zeros(1, "int64")
    M.prebuilt.argmax(stream, ties, at_max)
    M.prebuilt.argmin(stream, ties, at_min)
    M.prebuilt.max(stream, ties, big)
    M.prebuilt.argmax(stream, plain, plain_max)
    M.prebuilt.argmin(stream, plain, plain_min)
    local base = session:array(values(4099, "float32", 3), "float32")
    local view = base:view(2, 4097)
    local kernel = M.reduction.reduction("float32 x", "float64 s", "x", "sum", nil, nil, "viewed")
    assert.are.equal("viewed_scalar", kernel:variant(view, session:zeros(1, "float64")).kernel)
    local viewed = session:zeros(1, "float64")
    kernel(stream, view, viewed)
    session:run()
    assert.are.same({ 6, 6 }, { at_max:get(1), at_min:get(1) }) -- the first NaN, both ways
    assert.is_true(big:get(1) ~= big:get(1))
    assert.are.same({ 2, 3 }, { plain_max:get(1), plain_min:get(1) }) -- the first of equals
    local want = 0
    for i, v in ipairs(base:to_table()) do if i >= 2 and i <= 4098 then want = want + v end end
    assert.are.equal(want, viewed:get(1))
  end)

  it("reset the ticket and the tile statuses for the next launch, launched and through bound plans", function()
    local session <close> = emulated.session{ multiprocessors = 4, concurrency = 8 }
    local M, stream = session.modules, session.stream
    local t = values(50001, "int32", 4)
    local x = session:array(t, "int32")
    local sums, scans = {}, {}
    local kernel = M.reduction.reduction("int32 x", "int64 s", "x", "sum", nil, nil, "again")
    local bound_out = session:zeros(1, "int64")
    local plans = kernel:bind(x, bound_out)
    for round = 1, 3 do
      sums[round] = session:zeros(1, "int64")
      kernel(stream, x, sums[round])
      plans:launch(stream)
      scans[round] = session:zeros(#t, "int32")
      M.scan.inclusive_scan(stream, x, scans[round])
    end
    session:run()
    local want = 0
    for _, v in ipairs(t) do want = want + v end
    local running = {}
    local run = 0
    for i, v in ipairs(t) do run = run + v; running[i] = run end
    for round = 1, 3 do
      assert.are.equal(want, sums[round]:get(1))
      assert.are.same(running, scans[round]:to_table())
    end
    assert.are.equal(want, bound_out:get(1))
  end)

  it("reduce rows (by warps and by blocks), columns (in one pass and in chunks) and segments", function()
    local session <close> = emulated.session{ multiprocessors = 2 }
    local M, stream = session.modules, session.stream
    local cases = {}
    for _, shape in ipairs{ { 3, 5 }, { 40, 33 }, { 2, 3000 }, { 3000, 2 }, { 100, 40 }, { 1, 7 } } do
      local rows, cols = shape[1], shape[2]
      local t = values(rows * cols, "int32", rows + cols)
      local x = session:array(t, "int32")
      local case = { rows = rows, cols = cols, t = t,
                     per_row = session:zeros(rows, "int64"), per_col = session:zeros(cols, "int64"),
                     row_max = session:zeros(rows, "int64"), col_min = session:zeros(cols, "int32") }
      M.prebuilt.sum(stream, x, case.per_row, { rows = rows, cols = cols, axis = 2 })
      M.prebuilt.sum(stream, x, case.per_col, { rows = rows, cols = cols, axis = 1 })
      M.prebuilt.argmax(stream, x, case.row_max, { rows = rows, cols = cols, axis = 2 })
      M.prebuilt.argmin(stream, x, case.col_min, { rows = rows, cols = cols, axis = 1 })
      cases[#cases + 1] = case
    end
    local n = 5000
    local t = values(n, "float64", 9)
    local x = session:array(t, "float64")
    local bounds = { 0, 0, 1, 33, 33, 1100, 4999, 5000, 5000 }
    local segments = {}
    for _, dtype in ipairs{ "int32", "uint32", "int64", "uint64" } do
      local sums = session:zeros(#bounds - 1, "float64")
      M.prebuilt.sum(stream, x, sums, { offsets = session:array(bounds, dtype) })
      segments[dtype] = sums
    end
    local wild = session:zeros(2, "float64")
    M.prebuilt.sum(stream, x, wild, { offsets = session:array({ 4990, 1 << 40, 3 }, "int64") })
    session:run()
    for _, case in ipairs(cases) do
      local rows_got, cols_got = case.per_row:to_table(), case.per_col:to_table()
      local max_got, min_got = case.row_max:to_table(), case.col_min:to_table()
      for r = 1, case.rows do
        local sum, best, at = 0, -math.huge, 0
        for c = 1, case.cols do
          local v = case.t[(r - 1) * case.cols + c]
          sum = sum + v
          if v > best then best, at = v, c end
        end
        check(rows_got[r] == sum, "%dx%d row %d: %s, want %s", case.rows, case.cols, r, rows_got[r], sum)
        check(max_got[r] == at, "%dx%d row %d argmax: %s, want %s", case.rows, case.cols, r, max_got[r], at)
      end
      for c = 1, case.cols do
        local sum, best, at = 0, math.huge, 0
        for r = 1, case.rows do
          local v = case.t[(r - 1) * case.cols + c]
          sum = sum + v
          if v < best then best, at = v, r end
        end
        check(cols_got[c] == sum, "%dx%d column %d: %s, want %s", case.rows, case.cols, c, cols_got[c], sum)
        check(min_got[c] == at, "%dx%d column %d argmin: %s, want %s", case.rows, case.cols, c, min_got[c], at)
      end
    end
    for dtype, sums in pairs(segments) do
      local got = sums:to_table()
      for s = 1, #bounds - 1 do
        local want = 0
        for i = bounds[s] + 1, bounds[s + 1] do want = want + t[i] end
        check(got[s] == want, "%s offsets, segment %d: %s, want %s", dtype, s, got[s], want)
      end
    end
    local tail = 0
    for i = 4991, n do tail = tail + t[i] end
    assert.are.same({ tail, 0 }, wild:to_table())
  end)

  it("run a reduction of its own and fused pipelines, with per-element outputs written on the way", function()
    local session <close> = emulated.session{ multiprocessors = 2 }
    local M, stream = session.modules, session.stream
    local n = 9001
    local a, b, c = values(n, "float32", 1), values(n, "float32", 2), values(n, "float32", 3)
    local da, db, dc = session:array(a), session:array(b), session:array(c)
    local pipe = M.elementwise.pipeline("float32 a, float32 b, float32 c",
      { "float32 r3 = (a + b) * c - a", "sum float64 s = (double)r3 * r3", "argmax int64 w = r3",
        "max float32 m = fabsf(r3)", "any uint8 neg = r3 < 0" }, "r3, s, w, m, neg", "fused", { fuse = "always" })
    local r3, s, w, m, neg = session:zeros(n), session:zeros(1, "float64"), session:zeros(1, "int64"),
                             session:zeros(1), session:zeros(1, "uint8")
    pipe(stream, da, db, dc, r3, s, w, m, neg)
    local cut = M.elementwise.pipeline("float32 a, float32 b, float32 c",
      { "float32 r3 = (a + b) * c - a", "mean float64 avg = r3" }, "r3, avg", "cut")
    local r3b, avg = session:zeros(n), session:zeros(1, "float64")
    cut(stream, da, db, dc, r3b, avg)
    local rows = session:zeros(3, "float64")
    local per_row = M.elementwise.pipeline("float32 a, float32 b",
      { "float32 p = a * b", "sum float64 s = p" }, "s", "dots")
    per_row(stream, da:view(1, 9000), db:view(1, 9000), rows, { rows = 3, cols = 3000, axis = 2 })
    local l2 = M.reduction.reduction("T x, float32 w", "T y", "(double)x * x * w", "a + b", "y = sqrt(a)", 0, "wl2",
                                     { reduce_type = "float64" })
    local y = session:zeros(1)
    l2(stream, da, 0.25, y)
    session:run()
    local want_s, want_w, want_m, best, want_neg, total = 0, 0, 0, -math.huge, 0, 0
    local got_r3 = r3:to_table()
    for i = 1, n do
      local v = (a[i] + b[i]) * c[i] - a[i] -- exact: quarters times quarters
      check(got_r3[i] == v, "r3[%d] = %s, want %s", i, got_r3[i], v)
      want_s = want_s + v * v
      if v > best then best, want_w = v, i end
      want_m = math.max(want_m, math.abs(v))
      if v < 0 then want_neg = 1 end
      total = total + v
    end
    assert.are.same({ want_s, want_w, want_m, want_neg }, { s:get(1), w:get(1), m:get(1), neg:get(1) })
    assert.are.same(got_r3, r3b:to_table())
    assert.is_true(math.abs(avg:get(1) - total / n) < 1e-9)
    for r = 1, 3 do
      local dot = 0
      for i = (r - 1) * 3000 + 1, r * 3000 do dot = dot + a[i] * b[i] end
      assert.are.equal(dot, rows:get(r))
    end
    local squares = 0
    for i = 1, n do squares = squares + a[i] * a[i] * 0.25 end
    assert.is_true(math.abs(y:get(1) - math.sqrt(squares)) <= 1e-6 * math.sqrt(squares))
  end)

  it("run float16 pipelines ending in a reduction fused, and unfused through a temporary", function()
    local session <close> = emulated.session{ multiprocessors = 2 }
    local M, stream = session.modules, session.stream
    local n = 9001
    local a, b = values(n, "float16", 1), values(n, "float16", 2)
    local da, db = session:array(a, "float16"), session:array(b, "float16")
    local results = {}
    for _, fuse in ipairs{ "auto", "never" } do
      local pipe = M.elementwise.pipeline("float16 a, float16 b",
        { "float16 r = a * b - a", "sum float32 s = r", "max float16 m = r" }, "s, m", "dot_" .. fuse,
        { fuse = fuse })
      assert.are.equal(fuse == "auto" and 1 or 3, #pipe.kernels)
      local s, m = session:zeros(1, "float32"), session:zeros(1, "float16")
      pipe(stream, da, db, s, m)
      local rows = session:zeros(3, "float32")
      local per_row = M.elementwise.pipeline("float16 a, float16 b", { "float16 r = a * b", "sum float32 s = r" },
                                             "s", "rows_" .. fuse, { fuse = fuse })
      per_row(stream, da:view(1, 9000), db:view(1, 9000), rows, { rows = 3, cols = 3000, axis = 2 })
      results[fuse] = { s = s, m = m, rows = rows }
    end
    session:run()
    -- quarters times quarters less a quarter: exact in float16 and in float, fused or stored
    local sum, best = 0, -math.huge
    for i = 1, n do
      local v = a[i] * b[i] - a[i]
      assert(as("float16", v) == v)
      sum, best = sum + v, math.max(best, v)
    end
    for fuse, got in pairs(results) do
      assert.are.same({ sum, best }, { got.s:get(1), got.m:get(1) }, fuse)
      for r = 1, 3 do
        local dot = 0
        for i = (r - 1) * 3000 + 1, r * 3000 do dot = dot + a[i] * b[i] end
        assert.are.equal(dot, got.rows:get(r), fuse)
      end
    end
  end)
end)

describe("emulated scans and select", function()
  if not available then
    pending("no g++ to compile the emulated kernels")
    return
  end

  local TILE = 128 * 23

  local function scanned(t, mode, combine, identity)
    local out, run = {}, identity
    for i, v in ipairs(t) do
      local next_run = combine(run, v)
      out[i] = mode == "inclusive" and next_run or run
      run = next_run
    end
    return out
  end

  local function add(p, q) return p + q end

  it("scan inclusive and exclusive across tiles racing through the look-back, exactly", function()
    local session <close> = emulated.session{ multiprocessors = 2, concurrency = 4 }
    local M, stream = session.modules, session.stream
    local cases = {}
    for _, n in ipairs{ 1, 31, TILE - 1, TILE, TILE + 1, 7 * TILE + 5, 40001 } do
      for _, dtype in ipairs{ "int32", "float32" } do
        local t = values(n, dtype, n)
        local x = session:array(t, dtype)
        local inclusive, exclusive = session:zeros(n, dtype), session:zeros(n, dtype)
        M.scan.inclusive_scan(stream, x, inclusive)
        M.scan.exclusive_scan(stream, x, exclusive)
        cases[#cases + 1] = { n = n, dtype = dtype, t = t, inclusive = inclusive, exclusive = exclusive }
      end
    end
    local flags = values(5 * TILE + 3, "uint8", 77)
    for i, v in ipairs(flags) do flags[i] = v % 2 end
    local offsets = session:zeros(#flags, "int64")
    M.scan.exclusive_scan(stream, session:array(flags, "uint8"), offsets)
    local maxes = session:zeros(40001, "int64")
    local source = values(40001, "int64", 5)
    M.scan.inclusive_scan(stream, session:array(source, "int64"), maxes, "max")
    local own = session:zeros(40001, "int64")
    M.scan.inclusive_scan(stream, session:array(source, "int64"), own, "a > b ? b : a",
                          { identity = math.maxinteger })
    local in_place = session:array(source, "int64")
    M.scan.inclusive_scan(stream, in_place, in_place)
    session:run()
    for _, case in ipairs(cases) do
      -- quarters and small integers: every partial sum is exact, in any grouping
      for _, mode in ipairs{ "inclusive", "exclusive" } do
        local want, got = scanned(case.t, mode, add, 0), case[mode]:to_table()
        for i = 1, case.n do
          check(got[i] == want[i], "%s %s n=%d: element %d is %s, want %s", mode, case.dtype, case.n, i,
                got[i], want[i])
        end
      end
    end
    assert.are.same(scanned(flags, "exclusive", add, 0), offsets:to_table())
    assert.are.same(scanned(source, "inclusive", math.max, math.mininteger), maxes:to_table())
    assert.are.same(scanned(source, "inclusive", math.min, math.maxinteger), own:to_table())
    assert.are.same(scanned(source, "inclusive", add, 0), in_place:to_table())
  end)

  it("scan from 500 tiles up, where the look-back pauses as CUB's tuning does, exactly", function()
    local session <close> = emulated.session{ multiprocessors = 2, concurrency = 4 }
    local M, stream = session.modules, session.stream
    local small = { block = 32, items = 1 } -- 32-element tiles: 513 of them
    local n = 32 * 512 + 7
    local cases = {}
    for _, dtype in ipairs{ "int32", "int64" } do -- status and value in one word, and apart
      local t = values(n, dtype, 99)
      local y = session:zeros(n, dtype)
      M.scan.inclusive_scan(stream, session:array(t, dtype), y, "sum", small)
      cases[#cases + 1] = { dtype = dtype, t = t, y = y }
    end
    session:run()
    for _, case in ipairs(cases) do
      local want, got = scanned(case.t, "inclusive", add, 0), case.y:to_table()
      for i = 1, n do
        check(got[i] == want[i], "%s: element %d is %s, want %s", case.dtype, i, got[i], want[i])
      end
    end
  end)

  it("scan float16 and bfloat16 in float, rounding each stored prefix once, and select them", function()
    local session <close> = emulated.session{ multiprocessors = 2, concurrency = 4 }
    local M, stream = session.modules, session.stream
    local cases = {}
    for _, dtype in ipairs{ "float16", "bfloat16" } do
      for _, n in ipairs{ 31, TILE + 1, 5 * TILE + 5 } do
        local t = values(n, dtype, n)
        local x = session:array(t, dtype)
        local case = { dtype = dtype, n = n, t = t, inclusive = session:zeros(n, dtype),
                       wide = session:zeros(n, "float32"), max = session:zeros(n, dtype),
                       picked = session:zeros(n, dtype), count = session:zeros(1, "int64") }
        M.scan.inclusive_scan(stream, x, case.inclusive)
        M.scan.exclusive_scan(stream, x, case.wide)
        M.scan.inclusive_scan(stream, x, case.max, "max")
        M.scan.select(stream, x, "x > 0.5f", case.picked, case.count)
        cases[#cases + 1] = case
      end
    end
    session:run()
    for _, case in ipairs(cases) do
      local what = ("%s n=%d"):format(case.dtype, case.n)
      local inclusive, wide = scanned(case.t, "inclusive", add, 0), scanned(case.t, "exclusive", add, 0)
      local maxes = scanned(case.t, "inclusive", math.max, -math.huge)
      local got, got_wide, got_max = case.inclusive:to_table(), case.wide:to_table(), case.max:to_table()
      for i = 1, case.n do
        check(got[i] == as(case.dtype, inclusive[i]), "%s: element %d is %s, want %s", what, i, got[i],
              as(case.dtype, inclusive[i]))
        check(got_wide[i] == wide[i], "%s: float32 element %d is %s, want %s", what, i, got_wide[i], wide[i])
        check(got_max[i] == maxes[i], "%s: max element %d is %s, want %s", what, i, got_max[i], maxes[i])
      end
      local want = {}
      for _, v in ipairs(case.t) do if v > 0.5 then want[#want + 1] = v end end
      assert.are.equal(#want, case.count:get(1), what)
      local picked = case.picked:to_table()
      for i = 1, #want do check(picked[i] == want[i], "%s: picked element %d", what, i) end
    end
  end)

  it("scan deterministically in a chain of tiles when asked", function()
    local session <close> = emulated.session{ multiprocessors = 2, concurrency = 4 }
    local M, stream = session.modules, session.stream
    local t = {}
    for i = 1, 6 * TILE + 7 do t[i] = 1 / (i + 0.25) end
    local x = session:array(t, "float32")
    local first, again = session:zeros(#t, "float32"), session:zeros(#t, "float32")
    M.scan.inclusive_scan(stream, x, first, "sum", { deterministic = true })
    session:run()
    M.scan.inclusive_scan(stream, x, again, "sum", { deterministic = true })
    session:run()
    assert.are.equal(first:to_bytes(), again:to_bytes())
    local want = scanned(x:to_table(), "inclusive", add, 0)
    local got = first:to_table()
    for i = 1, #t do
      check(math.abs(got[i] - want[i]) <= 1e-5 * want[i], "element %d is %s, want %s", i, got[i], want[i])
    end
  end)

  it("select in order, count on the device, and stop at a short out", function()
    local session <close> = emulated.session{ multiprocessors = 2, concurrency = 4 }
    local M, stream = session.modules, session.stream
    local cases = {}
    for _, n in ipairs{ 1, 33, TILE + 1, 4 * TILE + 9 } do
      local t = values(n, "float64", n + 1)
      local x = session:array(t, "float64")
      local case = { t = t, out = session:zeros(n, "float64"), count = session:full(1, -1, "int64"),
                     short = session:full(3, -7, "float64"), short_count = session:zeros(1, "uint32") }
      M.scan.select(stream, x, "x > 0.5", case.out, case.count)
      M.scan.select(stream, x, "x > 0.5", case.short, case.short_count)
      cases[#cases + 1] = case
    end
    local ints = session:array({ 5, 6, 7, 8, 9 }, "int32")
    local every_other, count = session:zeros(5, "int32"), session:zeros(1, "int32")
    M.scan.select(stream, ints, "i % 2 == 0", every_other, count)
    session:run()
    for _, case in ipairs(cases) do
      local want = {}
      for _, v in ipairs(case.t) do if v > 0.5 then want[#want + 1] = v end end
      assert.are.equal(#want, case.count:get(1))
      assert.are.equal(#want, case.short_count:get(1))
      local got = case.out:to_table()
      for i = 1, #want do check(got[i] == want[i], "element %d", i) end
      local short = case.short:to_table()
      for i = 1, 3 do check(short[i] == (want[i] or -7), "short element %d", i) end
    end
    assert.are.same({ 5, 7, 9 }, { every_other:get(1), every_other:get(2), every_other:get(3) })
    assert.are.equal(3, count:get(1))
  end)
end)

describe("emulated elementwise kernels", function()
  if not available then
    pending("no g++ to compile the emulated kernels")
    return
  end

  it("round a Lua number for a float parameter as its typed scalar does, and refuse one out of range", function()
    local session <close> = emulated.session{ multiprocessors = 2 }
    local M, stream = session.modules, session.stream
    local results = {}
    for _, dtype in ipairs{ "float16", "bfloat16", "float32" } do
      local scaled = M.elementwise.elementwise(dtype .. " x, " .. dtype .. " s", dtype .. " r", "r = x * s",
                                               "scaled_" .. dtype)
      local x, r = session:array({ 1, 1, 1 }, dtype), session:zeros(3, dtype)
      scaled(stream, x, 0.1, r)
      results[dtype] = r
      assert.matches("1e%+300 out of range for " .. dtype,
        require("spec.support.expect").error_of(scaled, stream, x, 1e300, r))
    end
    session:run()
    for dtype, r in pairs(results) do
      local rounded = gpurun[gpurun.dtypes[dtype].scalar](0.1).value
      assert.are_not.equal(0.1, rounded, dtype)
      assert.are.same({ rounded, rounded, rounded }, r:to_table(), dtype)
    end
  end)
end)

describe("emulated argmin and argmax over segments", function()
  if not available then
    pending("no g++ to compile the emulated kernels")
    return
  end

  it("give the position within each segment, from 1, and 0 for an empty one", function()
    local session <close> = emulated.session{ multiprocessors = 2 }
    local M, stream = session.modules, session.stream
    --                   segment 1     | 2 (empty) | 3
    local t = { 5, 9, 1, 9,              2, 8, 8, 3 }
    local x = session:array(t, "float32")
    local offsets = session:array({ 0, 4, 4, 8 }, "int64")
    local highest, lowest = session:zeros(3, "int64"), session:zeros(3, "int64")
    M.prebuilt.argmax(stream, x, highest, { offsets = offsets })
    M.prebuilt.argmin(stream, x, lowest, { offsets = offsets })
    local rows = session:zeros(2, "int64")
    M.prebuilt.argmax(stream, x, rows, { rows = 2, cols = 4, axis = 2 })
    session:run()
    assert.are.same({ 2, 0, 2 }, highest:to_table())  -- not 6, the buffer's position
    assert.are.same({ 3, 0, 1 }, lowest:to_table())   -- not 5
    assert.are.same({ 2, 2 }, rows:to_table())
  end)
end)
