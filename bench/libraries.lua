-- bench/libraries.lua: gpurun.matmul (cuBLAS: float32, bfloat16, float16
-- and a small float32 product), gpurun.fft plans (c2c, r2c) and gpurun.spmv
-- (a 5-point Laplacian), each captured into a graph and the graph launched;
-- bench/libraries_compare.sh sets it beside C, CuPy and torch.
--
--   build/gpurun bench/libraries.lua [--gemm 4096] [--small-gemm 64]
--       [--fft-sizes 1048576,16777216] [--spmv-rows 4194304]
--       [--cases gemm,small_gemm,fft,spmv] [--reps 15] [--seconds 0.1]
--       [--device ID] [--json]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local bench = require("gpurun.bench")
local cjson = require("cjson")

local CASES = { "gemm", "small_gemm", "fft", "spmv" }
local KNOWN = { gemm = true, small_gemm = true, fft = true, spmv = true }

local function case_list(text)
  local list, seen = {}, {}
  for item in (text .. ","):gmatch("([^,]*),") do
    if not KNOWN[item] then
      return nil, ("expected a comma-separated list of %s, got '%s'"):format(table.concat(CASES, ", "),
                                                                              item)
    end
    if not seen[item] then list[#list + 1] = item end
    seen[item] = true
  end
  return list
end

-- The Laplacian's rows are the points of a square grid.
local function square_rows(text)
  local rows, why = args.to_integer(text, 1)
  if not rows then return nil, why end
  local side = math.floor(math.sqrt(rows) + 0.5)
  if side * side ~= rows or side < 3 then
    return nil, ("expected a square of 9 or more (a side x side grid's points), got '%s'"):format(text)
  end
  return rows
end

local cli = args.new("bench/libraries.lua",
  "gpurun.matmul, gpurun.fft and gpurun.spmv captured in graphs, in us per graph launch.")
bench.add_options(cli, { reps = 15, seconds = 0.1 })
cli:integer_option("--gemm", "M = N = K of the large products (float32, bfloat16, float16).", 4096)
cli:integer_option("--small-gemm", "M = N = K of the small float32 product.", 64)
cli:converted_option("--fft-sizes", "Comma-separated transform lengths (c2c and r2c).",
                     "1048576,16777216", bench.parse_sizes)
cli:converted_option("--spmv-rows", "Rows of the 5-point Laplacian (a square: side x side grid).",
                     4194304, square_rows)
cli:converted_option("--cases", "Comma-separated cases to run.", table.concat(CASES, ","), case_list)
cli:integer_option("--device", "CUDA device id.", 0, 0)
cli:flag("--json", "Print one JSON object instead of the table.")
local options = cli:parse(arg)
local timing = { seconds = options.seconds, reps = options.reps }

-- The 5-point Laplacian of a side x side grid in CSR, row by row, each
-- row's columns in order (up, left, self, right, down): 4 on the diagonal,
-- -1 for each neighbour inside the grid. Written on the device: at 2^22
-- rows its 2^24 nonzeros are too many to build in Lua tables.
local LAPLACIAN = [[
extern "C" __global__ void laplacian(int side, int *offsets, int *columns, float *values)
{
    long long rows = (long long)side * side;
    long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (r > rows)
        return;
    if (r == rows) {
        offsets[r] = (int)(5 * rows - 4 * (long long)side);
        return;
    }
    long long i = r / side, j = r % side;
    // entries of the rows before: whole grid rows, then this one's columns
    long long per_row = 3 * (long long)side - 2;
    long long before = i * per_row + side * (i > 0 ? i - 1 : 0) + side * i;
    long long here = 1 + (i > 0) + (i < side - 1);
    before += j * here + (j > 0 ? j - 1 : 0) + j;
    offsets[r] = (int)before;
    int at = (int)before;
    if (i > 0) { columns[at] = (int)(r - side); values[at++] = -1.0f; }
    if (j > 0) { columns[at] = (int)(r - 1); values[at++] = -1.0f; }
    columns[at] = (int)r; values[at++] = 4.0f;
    if (j < side - 1) { columns[at] = (int)(r + 1); values[at++] = -1.0f; }
    if (i < side - 1) { columns[at] = (int)(r + side); values[at] = -1.0f; }
}
]]

local function expect(what, got, want, rtol)
  if math.abs(got - want) > rtol * math.abs(want) or got ~= got then
    error(("%s: got %.9g, expected %.9g"):format(what, got, want), 0)
  end
end

-- Times step captured into one graph (run once first, outside, for the
-- library's one-time work: handles, plans, work areas).
local function graphed(stream, step)
  step(stream)
  stream:sync()
  local graph <close> = bench.capture(stream, step)
  local figures = bench.measure(stream, function(target) graph:launch(target) end, timing)
  stream:sync()
  return figures
end

-- out = a b, n x n x n, a and b uniform in [0, 1): the first element is
-- checked against a product computed on the host from the same inputs.
local function gemm(stream, n, dtype)
  local gen <close> = gpurun.device_rng(n)
  local on_stream = { stream = stream }
  local a <close> = gen:random(gpurun.empty(n * n, dtype), on_stream)
  local b <close> = gen:random(gpurun.empty(n * n, dtype), on_stream)
  local out <close> = gpurun.empty(n * n, dtype)
  local va, vb, vo = gpurun.matrix(a, n, n), gpurun.matrix(b, n, n), gpurun.matrix(out, n, n)
  local call = { out = vo }
  local figures = graphed(stream, function(target)
    call.stream = target
    gpurun.matmul(va, vb, call)
  end)
  local row, want = a:to_table(1, n, stream), 0.0
  for k = 1, n do want = want + row[k] * b:get((k - 1) * n + 1, stream) end
  expect(("gemm %s %d"):format(dtype, n), out:get(1, stream), want, dtype == "float32" and 1e-4 or 2e-2)
  figures.tflops = 2.0 * n * n * n / (figures.us_per_iter * 1e-6) / 1e12
  return figures
end

-- One plan's forward transform of n points, out of place, the input a
-- constant: its spectrum is n times it at frequency 0.
local function fft(stream, n, kind)
  local complex = kind == "c2c"
  local x <close> = complex and gpurun.full(n, { 1, 0 }, "complex64") or gpurun.full(n, 1, "float32")
  local y <close> = gpurun.empty(complex and n or n // 2 + 1, "complex64")
  local plan <close> = gpurun.fft.plan(n, { kind = kind, dtype = "complex64", stream = stream })
  local call = {}
  local figures = graphed(stream, function(target)
    call.stream = target
    plan:execute(x, y, call)
  end)
  expect(("fft %s %d"):format(kind, n), y:get(1, stream)[1], n, 1e-5)
  return figures
end

-- y = A x on the Laplacian, x all ones: y is 0 inside the grid, 1 on its
-- edges and 2 at its corners.
local function spmv(stream, device, rows)
  local side = math.floor(math.sqrt(rows) + 0.5)
  local nnz = 5 * rows - 4 * side
  local offsets <close> = gpurun.empty(rows + 1, "int32")
  local columns <close> = gpurun.empty(nnz, "int32")
  local values <close> = gpurun.empty(nnz, "float32")
  local program <close> = gpurun.Program(LAPLACIAN, "c++",
    gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch })
  local code <close> = program:compile("cubin")
  local kernel <close> = code:get_kernel("laplacian")
  gpurun.launch(stream, gpurun.LaunchConfig{ grid = (rows + 1 + 255) // 256, block = 256 }, kernel,
                gpurun.i32(side), offsets, columns, values)
  local a = gpurun.csr(offsets, columns, values, rows, rows)
  local x <close> = gpurun.full(rows, 1, "float32")
  local y <close> = gpurun.full(rows, -1, "float32")
  local call = {}
  local figures = graphed(stream, function(target)
    call.stream = target
    gpurun.spmv(a, x, y, call)
  end)
  expect("spmv corner", y:get(1, stream), 2, 0)
  expect("spmv edge", y:get(2, stream), 1, 0)
  expect("spmv inside", y:get(side + 2, stream) + 1, 1, 0)
  a:close()
  return figures
end

-- The cases as { key, what, run(stream, device) }: the keys every side of
-- bench/libraries_compare.sh reports under.
local function cases()
  local list = {}
  local function add(key, what, run) list[#list + 1] = { key = key, what = what, run = run } end
  for _, case in ipairs(options.cases) do
    if case == "gemm" then
      for _, dtype in ipairs{ "float32", "bfloat16", "float16" } do
        add(("gemm_%s_%d"):format(dtype, options.gemm), ("GEMM %s %d^3"):format(dtype, options.gemm),
            function(stream) return gemm(stream, options.gemm, dtype) end)
      end
    elseif case == "small_gemm" then
      add(("gemm_float32_%d"):format(options.small_gemm), ("GEMM float32 %d^3"):format(options.small_gemm),
          function(stream) return gemm(stream, options.small_gemm, "float32") end)
    elseif case == "fft" then
      for _, n in ipairs(options.fft_sizes) do
        for _, kind in ipairs{ "c2c", "r2c" } do
          add(("fft_%s_%d"):format(kind, n), ("FFT %s %d"):format(kind, n),
              function(stream) return fft(stream, n, kind) end)
        end
      end
    else
      add(("spmv_%d"):format(options.spmv_rows), ("SpMV Laplacian %d rows"):format(options.spmv_rows),
          function(stream, device) return spmv(stream, device, options.spmv_rows) end)
    end
  end
  return list
end

local function main()
  local device = cli:open_device(options.device)
  local stream <close> = device:create_stream()
  local results, order = {}, {}
  for _, case in ipairs(cases()) do
    local figures = case.run(stream, device)
    figures.what = case.what
    results[case.key] = figures
    order[#order + 1] = case.key
  end
  if options.json then
    print(cjson.encode{ device = device.name, reps = options.reps, order = order, cases = results })
    return 0
  end
  print(("gpurun on %s: us per graph launch, median of %d repetitions"):format(device.name, options.reps))
  for _, key in ipairs(order) do
    local figures = results[key]
    print(("%-32s %12.2f%s"):format(figures.what, figures.us_per_iter,
          figures.tflops and ("   %.1f TFLOP/s"):format(figures.tflops) or ""))
  end
  return 0
end

os.exit(main(), true)
