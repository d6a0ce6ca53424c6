-- Every bench/*.lua reads its command line through gpurun.args: --help
-- prints the usage and exits 0, and a bad option or value is one line
-- "<name>: error: <reason>" and exit 2, before any GPU work. The Python
-- peers share bench/common.py: its options, and measure timing as
-- bench.measure does; the shell scripts that run every side print their
-- usage for --help. No GPU, CuPy or PyTorch needed.
local process = require("spec.support.process")

-- A bad value each bench refuses, and what the refusal names.
local BAD_VALUE = {
  ["bench/alloc_compare.lua"] = { "--sizes 4096,1e6", "--sizes: expected a positive integer, got '1e6'" },
  ["bench/bandwidth.lua"] = { "--sizes 1048576,6", "--sizes: expected a multiple of 4, got '6'" },
  ["bench/compare.lua"] = { "--cpu-launches 1001", "--cpu-launches: expected an integer from 0 to 1000" },
  ["bench/fused.lua"] = { "--sizes 4096,0", "--sizes: expected a positive integer, got '0'" },
  ["bench/graph_update.lua"] = { "--reps 0", "--reps: expected a positive integer, got '0'" },
  ["bench/graph_profile.lua"] = { "--replays 10001", "--replays: expected an integer from 1 to 10000, got '10001'" },
  ["bench/graph_check.lua"] = { "--nodes x", "--nodes: expected a positive integer, got 'x'" },
  ["bench/method_call.lua"] = { "--calls=x", "--calls: expected a positive integer, got 'x'" },
  ["bench/pdl_pipeline.lua"] = { "--sizes 4096,0", "--sizes: expected a positive integer, got '0'" },
  ["bench/pipeline_compare.lua"] = { "--stages 0", "--stages: expected a positive integer, got '0'" },
  ["bench/reduce.lua"] = { "--seconds x", "--seconds: expected a finite number, got 'x'" },
  ["bench/random.lua"] = { "--sizes 4096,0", "--sizes: expected a positive integer, got '0'" },
  ["bench/libraries.lua"] = { "--spmv-rows 10", "--spmv-rows: expected a square of 9 or more" },
  ["bench/sort.lua"] = { "--sizes 4096,x", "--sizes: expected a positive integer, got 'x'" },
  ["bench/startup.lua"] = { "--reps -1", "--reps: expected a positive integer, got '-1'" },
  ["bench/cubin_load.lua"] = { "--seconds -1", "--seconds: expected a positive number" },
  ["bench/managed_memory.lua"] = { "--sizes 4096,0", "--sizes: expected a positive integer, got '0'" },
  ["bench/lto_link.lua"] = { "--sizes 4096,x", "--sizes: expected a positive integer, got 'x'" },
  ["bench/ipc_share.lua"] = { "--buffers 0", "--buffers: expected a positive integer, got '0'" },
  ["bench/system_report.lua"] = { "--reps 0", "--reps: expected a positive integer, got '0'" },
  ["bench/tensor_map_launch.lua"] = { "--seconds 0", "--seconds: expected a positive number" },
  ["bench/while_cancel.lua"] = { "--passes 0", "--passes: expected a positive integer, got '0'" },
}

local function listed(glob)
  local list = {}
  local pipe = assert(io.popen("ls " .. glob))
  for path in pipe:lines() do list[#list + 1] = path end
  pipe:close()
  return list
end

describe("the benches' command lines", function()
  it("has a bad value for every bench", function()
    for _, path in ipairs(listed("bench/*.lua")) do
      assert.truthy(BAD_VALUE[path], path .. " has no row in BAD_VALUE")
    end
  end)

  for path, bad in pairs(BAD_VALUE) do
    describe(path, function()
      it("prints its usage for --help", function()
        local result = process.gpurun(path .. " --help")
        assert.are.equal(0, result.code, result.stderr)
        assert.matches("^Usage: ", result.stdout)
        assert.are.equal("", result.stderr)
      end)

      it("refuses an unknown option and a bad value as usage errors", function()
        local result = process.gpurun(path .. " --no-such-option")
        assert.are.equal(2, result.code)
        assert.matches("^[%w_/.]+%.lua: error: unknown option '%-%-no%-such%-option'\n$", result.stderr)
        result = process.gpurun(path .. " " .. bad[1])
        assert.are.equal(2, result.code)
        assert.matches("^[%w_/.]+%.lua: error: " .. bad[2]:gsub("%p", "%%%0"), result.stderr)
      end)
    end)
  end

  it("hands --startup of compare.lua to startup.lua, options and all", function()
    local result = process.gpurun("bench/compare.lua --startup --reps 0")
    assert.are.equal(2, result.code)
    assert.are.equal("startup.lua: error: --reps: expected a positive integer, got '0'\n", result.stderr)
  end)
end)

describe("the benches' shell scripts", function()
  -- A side that ran would find no gpurun, C side or python here.
  local NOTHING = { GPURUN_BIN = "/nonexistent/gpurun", ALLOC_C = "/nonexistent/alloc_compare_c",
                    BUILD = "/nonexistent", PYTHON = "/nonexistent/python3" }

  it("print their usage for --help and -h, and run no side", function()
    local scripts = listed("bench/*.sh")
    assert.are.equal(6, #scripts)
    for _, path in ipairs(scripts) do
      for _, flag in ipairs({ "--help", "-h" }) do
        local result = process.run("sh " .. path .. " " .. flag, { env = NOTHING })
        assert.are.equal(0, result.code, path .. " " .. flag .. ": " .. result.stderr)
        assert.matches("^" .. path:gsub("%p", "%%%0") .. " — ", result.stdout)
        assert.matches("\n  " .. path:gsub("%p", "%%%0") .. "[^\n]*\n", result.stdout)
        assert.are.equal("", result.stderr)
      end
    end
  end)
end)

describe("bench/jacobi_compare.sh", function()
  it("refuses a REPS that is not a positive integer before running a side", function()
    for _, reps in ipairs({ "0", "x", "-1" }) do
      local result = process.run("sh bench/jacobi_compare.sh", { env = { REPS = reps, GPURUN_BIN = "/nonexistent/gpurun" } })
      assert.are.equal(2, result.code)
      assert.are.equal("jacobi_compare.sh: REPS: expected a positive integer, got '" .. reps .. "'\n", result.stderr)
    end
  end)
end)

describe("the benches' Python peers", function()
  local function python(command)
    return process.run("python3 " .. command)
  end
  local has_python = os.execute("python3 -c '' 2>/dev/null") == true

  it("take --help, and refuse a bad --reps and --sizes through bench/common.py", function()
    if not has_python then pending("no python3") return end
    local peers = 0
    for _, path in ipairs(listed("bench/*.py")) do
      if path ~= "bench/common.py" then
        peers = peers + 1
        local result = python(path .. " --help")
        assert.are.equal(0, result.code, result.stderr)
        assert.matches("^usage: ", result.stdout)
        local help = result.stdout
        local name = path:match("[^/]+$"):gsub("%p", "%%%0")
        result = python(path .. " --reps 0")
        assert.are.equal(2, result.code)
        assert.matches(name .. ": error: argument %-%-reps: expected a positive integer, got '0'", result.stderr)
        -- Every peer but those whose rows are not sizes takes --sizes.
        local takes_sizes = path ~= "bench/cubin_load_compare.py" and path ~= "bench/libraries_compare.py"
        assert.are.equal(takes_sizes, help:find("--sizes SIZES", 1, true) ~= nil, path)
        if takes_sizes then
          result = python(path .. " --sizes 4096,1e3")
          assert.are.equal(2, result.code)
          assert.matches(name .. ": error: argument %-%-sizes: expected a positive integer, got '1e3'", result.stderr)
        end
      end
    end
    assert.are.equal(7, peers)
  end)

  it("measure as bench.measure does: the same iterations and calls", function()
    if not has_python then pending("no python3") return end
    -- The spec of bench.measure in spec/bench_spec.lua, on common.measure:
    -- 2^-10 s a call, about 2^-5 s asked for, 3 repetitions.
    local result = python([[-c '
import sys, time
sys.path.insert(0, "bench")
import common
now = [0.0]
time.perf_counter = lambda: now[0]
calls = [0]
def step():
    calls[0] += 1
    now[0] += 2 ** -10
figures = common.measure(step, lambda: None, 2 ** -5, 3)
print(figures["iters"], figures["reps"], calls[0], figures["us_per_iter"] == 2 ** -10 * 1e6)
']])
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("32 3 111 True\n", result.stdout)
  end)
end)

describe("bench/libraries.lua, bench/libraries_c.c and bench/libraries_compare.py", function()
  local q = process.quote
  local has_python = os.execute("python3 -c '' 2>/dev/null") == true

  it("refuses what its cases cannot take, before any GPU work", function()
    for _, case in ipairs({
      { "--cases gemm,fftw", "--cases: expected a comma-separated list of gemm, small_gemm, fft, spmv, got 'fftw'" },
      { "--spmv-rows 4", "--spmv-rows: expected a square of 9 or more" },
      { "--fft-sizes 4096,0", "--fft-sizes: expected a positive integer, got '0'" },
      { "--small-gemm 0", "--small-gemm: expected a positive integer, got '0'" },
    }) do
      local result = process.gpurun("bench/libraries.lua " .. case[1])
      assert.are.equal(2, result.code, case[1])
      assert.are.equal("bench/libraries.lua: error: ", result.stderr:sub(1, 28))
      assert.truthy(result.stderr:find(case[2], 1, true), result.stderr)
    end
  end)

  it("ends with one line where no device can run it", function()
    local result = process.gpurun("bench/libraries.lua --cases fft --device 63")
    assert.are_not.equal(0, result.code)
    assert.matches("^bench/libraries%.lua: [^\n]+\n$", result.stderr)
    assert.are.equal("", result.stdout)
  end)

  it("times every case at small sizes, checked, and reports them in JSON #gpu", function()
    local result = process.gpurun(q("bench/libraries.lua") .. " --gemm 128 --small-gemm 16 --fft-sizes 256"
      .. " --spmv-rows 1024 --reps 1 --seconds 0.001 --json")
    assert.are.equal(0, result.code, result.stderr)
    local report = require("cjson").decode(result.stdout)
    assert.are.same({ "gemm_float32_128", "gemm_bfloat16_128", "gemm_float16_128", "gemm_float32_16",
                      "fft_c2c_256", "fft_r2c_256", "spmv_1024" }, report.order)
    for _, key in ipairs(report.order) do
      assert.is_true(report.cases[key].us_per_iter > 0, key)
    end
    assert.is_true(report.cases.gemm_float32_128.tflops > 0)
  end)

  it("prints one table of the sides' figures and their ratios, a missing side's cells as '-'", function()
    if not has_python then pending("no python3") return end
    local gpurun_file, c_file = os.tmpname(), os.tmpname()
    local function write(path, text)
      local file = assert(io.open(path, "w"))
      file:write(text)
      file:close()
    end
    write(gpurun_file, '{"device":"stand-in","cases":{"fft_c2c_4096":{"us_per_iter":3},"spmv_16":{"us_per_iter":8}}}')
    write(c_file, '{"device":"stand-in","cases":{"fft_c2c_4096":{"us_per_iter":2},"spmv_16":{"us_per_iter":8}}}')
    -- cupy and torch are hidden, so that only the two files' sides show
    local result = process.run("python3 -S -c " .. q("import sys; sys.modules['cupy'] = None; "
      .. "sys.modules['torch'] = None; sys.path.insert(0, 'bench'); sys.argv[0] = 'libraries_compare.py'; "
      .. "import runpy; runpy.run_path('bench/libraries_compare.py', run_name='__main__')")
      .. " --cases fft,spmv --fft-sizes 4096 --spmv-rows 16 --reps 1 --gpurun " .. q(gpurun_file)
      .. " --c " .. q(c_file))
    os.remove(gpurun_file)
    os.remove(c_file)
    assert.are.equal(0, result.code, result.stderr)
    assert.truthy(result.stdout:find("stand-in: us per graph launch", 1, true), result.stdout)
    assert.matches("FFT c2c 4096%s+3%.00%s+2%.00%s+%-%s+%-%s+1%.500%s+%-%s+%-\n", result.stdout)
    assert.matches("FFT r2c 4096%s+%-%s+%-%s+%-%s+%-%s+%-%s+%-%s+%-\n", result.stdout)
    assert.matches("SpMV Laplacian 16 rows%s+8%.00%s+8%.00%s+%-%s+%-%s+1%.000", result.stdout)
    assert.truthy(result.stderr:find("cupy is missing", 1, true), result.stderr)
  end)
end)
