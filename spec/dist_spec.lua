-- require("gpurun.dist"): ranks under mpirun (spec/mpi/ranks_in_world.lua in
-- every rank of a real `mpirun -np 2`), what a job does when a rank fails,
-- the world of one outside a launcher, the paths without MPI or NCCL, and
-- NCCL collectives in a world of one on a stream, with no stream and inside
-- a graph capture.
local gpurun = require("gpurun")
local process = require("spec.support.process")

-- mpirun's own options for these runs: more ranks than cores is fine here,
-- and CI runs as root. Under tools/sanitize.sh the ranks keep every ASan
-- check but LeakSanitizer's: Open MPI leaks by design in MPI_Init, from
-- components it unloads before LeakSanitizer looks, whose frames no
-- suppression can name (docs/reliability.md).
local function without_leak_checks()
  local asan = os.getenv("ASAN_OPTIONS")
  if asan and asan ~= "" then return "ASAN_OPTIONS=" .. process.quote(asan .. ":detect_leaks=0") .. " " end
  return ""
end

local function mpirun_command(ranks)
  local words = { without_leak_checks() .. "timeout", "120", "mpirun", "--oversubscribe", "-np",
    tostring(ranks) }
  local id = io.popen("id -u")
  if id:read("l") == "0" then words[#words + 1] = "--allow-run-as-root" end
  id:close()
  return table.concat(words, " ")
end

local function have_mpirun()
  return os.execute("command -v mpirun >/dev/null 2>&1") == true
end

local function gpurun_bin() return process.quote(process.gpurun_bin()) end

-- A child gpurun running `code` (a chunk), with env.
local function child(code, env, prefix)
  return process.run((prefix and (prefix .. " ") or "") .. gpurun_bin() .. " -e "
    .. process.quote(code), { env = env })
end

local function require_mpirun()
  assert(have_mpirun(), "mpirun not found: install Open MPI (tools/dev.sh installs openmpi-bin "
    .. "libopenmpi-dev)")
end

describe("gpurun.dist", function()
  it("runs the rank specs in every rank of `mpirun -np 2`", function()
    require_mpirun()
    local shared = os.tmpname()
    os.remove(shared)
    assert(os.execute("mkdir -p " .. process.quote(shared)))
    local result = process.run(mpirun_command(2) .. " --tag-output " .. gpurun_bin()
      .. " spec/run.lua -o spec/support/summary_output.lua -p _in_world spec/mpi",
      { env = { GPURUN_RANKS_DIR = shared } })
    os.execute("rm -rf " .. process.quote(shared))
    local output = result.stdout .. result.stderr
    assert.are.equal(0, result.code, output)
    for rank = 0, 1 do
      local passed, failed = output:match("%[1," .. rank .. "%]<stdout>:(%d+) passed, (%d+) failed")
      assert.is_not_nil(passed, "rank " .. rank .. " printed no closing line:\n" .. output)
      assert.are.equal("0", failed, output)
      assert.is_true(tonumber(passed) >= 5, output)
    end
  end)

  it("ends the whole job when one rank fails, instead of waiting for it at a barrier", function()
    require_mpirun()
    local started = gpurun.perf_counter()
    local result = process.run(mpirun_command(2) .. " " .. gpurun_bin() .. " -e " .. process.quote([[
local dist = require("gpurun.dist").init()
if dist.rank() == 1 then error("rank 1 gives up") end
dist.barrier()
print("rank 0 passed the barrier alone")
]]))
    assert.are_not.equal(0, result.code)
    assert.are_not.equal(124, result.code, "the job hung: timeout ended it")
    assert.matches("rank 1 gives up", result.stderr, 1, true)
    assert.is_nil(result.stdout:find("passed the barrier alone", 1, true))
    assert.is_true(gpurun.perf_counter() - started < 60)
  end)

  it("finalises MPI when every rank succeeds, so mpirun exits 0", function()
    require_mpirun()
    local result = process.run(mpirun_command(2) .. " " .. gpurun_bin() .. " -e " .. process.quote([[
local dist = require("gpurun.dist").init()
dist.barrier()
print(("rank %d of %d"):format(dist.rank(), dist.size()))
os.exit(0)
]]))
    assert.are.equal(0, result.code, result.stdout .. result.stderr)
    assert.matches("rank 0 of 2", result.stdout, 1, true)
    assert.matches("rank 1 of 2", result.stdout, 1, true)
    assert.is_nil(result.stderr:find("improperly", 1, true), result.stderr)
  end)

  it("is a world of one outside a launcher, without loading MPI", function()
    local result = child([[
local dist = require("gpurun.dist")
assert(dist.launcher() == nil)
assert(not dist.is_initialized())
dist.init()
dist.barrier()
local maps = io.open("/proc/self/maps"):read("a")
print(dist.rank(), dist.size(), dist.local_rank(), dist.info().uses_mpi, maps:find("libmpi") ~= nil)
]], { OMPI_COMM_WORLD_SIZE = "", PMI_SIZE = "", PMI_RANK = "", PMIX_RANK = "" })
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("0\t1\t0\tfalse\tfalse\n", result.stdout)
  end)

  it("raises 'call dist.init() first' from everything that needs the world", function()
    local result = child([[
local dist = require("gpurun.dist")
for _, name in ipairs({ "rank", "size", "local_rank", "barrier", "device" }) do
  local ok, err = pcall(dist[name])
  print(name, ok, err)
end
]])
    assert.are.equal(0, result.code, result.stderr)
    for _, name in ipairs({ "rank", "size", "local_rank", "barrier", "device" }) do
      assert.matches(name .. "\tfalse\t[^\n]*dist%." .. name .. ": call dist%.init%(%) first", result.stdout)
    end
  end)

  it("says what to install when a launcher started it and MPI is missing", function()
    local result = child([[require("gpurun.dist").init()]],
      { OMPI_COMM_WORLD_SIZE = "2", GPURUN_MPI_LIBRARY = "/nonexistent/libmpi.so.40" })
    assert.are.equal(1, result.code)
    assert.matches("dist.init: MPI could not be loaded (/nonexistent/libmpi.so.40: cannot open shared object file",
      result.stderr, 1, true)
    assert.matches("install Open MPI (Debian: apt-get install openmpi-bin libopenmpi3)", result.stderr, 1, true)
    assert.matches("^[^\n]*%(command line%):1: dist%.init: ", result.stderr:gsub("^gpurun: ", ""))
  end)

  it("refuses a library that is not MPI", function()
    local result = child([[require("gpurun.dist").init()]],
      { PMI_SIZE = "2", GPURUN_MPI_LIBRARY = "libc.so.6" })
    assert.are.equal(1, result.code)
    assert.matches("dist.init: MPI could not be loaded: the library has no MPI_Initialized",
      result.stderr, 1, true)
  end)

  it("runs everything else without MPI", function()
    local result = child([[
local dist = require("gpurun.dist").init()
print(dist.size(), require("gpurun").Program('extern "C" __global__ void k() {}', "c++"):compile("ptx").size > 0)
]], { GPURUN_MPI_LIBRARY = "/nonexistent/libmpi.so.40" })
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("1\ttrue\n", result.stdout)
  end)

  it("says what to install when NCCL is missing", function()
    local result = child([[print(pcall(require("gpurun.dist").nccl_version))]],
      { GPURUN_NCCL_LIBRARY = "/nonexistent/libnccl.so.2" })
    assert.are.equal(0, result.code, result.stderr)
    assert.matches("false\tdist.nccl_version: NCCL could not be loaded (/nonexistent/libnccl.so.2: "
      .. "cannot open shared object file: No such file or directory); install NCCL", result.stdout, 1, true)
  end)

  it("reports NCCL's version where NCCL is installed", function()
    local result = child([[print(pcall(require("gpurun.dist").nccl_version))]])
    assert.are.equal(0, result.code, result.stderr)
    local major, minor = result.stdout:match("^true\t(%d+)\t(%d+)\t%d+\n$")
    if major then
      assert.is_true(tonumber(major) * 100 + tonumber(minor) >= 210, result.stdout)
    else
      assert.matches("^false\tdist.nccl_version: NCCL could not be loaded", result.stdout)
    end
  end)
end)

describe("gpurun.dist collectives in a world of one", function()
  local dist, device, kernel, stream
  local n = 4096

  before_each(function()
    if not gpurun.device_count or gpurun.device_count() == 0 then return end
    local _
    device, _, kernel = require("spec.support.kernels").setup()
    dist = require("gpurun.dist").init()
    gpurun.set_current_stream(nil) -- "no stream" must mean none, whatever other specs set
    stream = device:create_stream()
  end)

  it("chooses device 0 and makes it current #gpu", function()
    assert.are.equal(0, dist.device().id)
    assert.are.equal(0, dist.rank())
    assert.are.equal(1, dist.size())
  end)

  it("runs every collective on a stream, for every dtype NCCL moves #gpu", function()
    for _, dtype in ipairs({ "float32", "float64", "int32", "uint32", "int64", "uint64", "int8", "uint8" }) do
      local x = gpurun.full(n, 3, dtype)
      for _, op in ipairs({ "sum", "prod", "max", "min", "avg" }) do
        dist.all_reduce(x, op, stream)
      end
      dist.broadcast(x, 0, stream)
      local gathered = gpurun.zeros(n, dtype)
      dist.all_gather(gathered, x, stream)
      local scattered = gpurun.zeros(n, dtype)
      dist.reduce_scatter(scattered, gathered, "sum", stream)
      stream:sync()
      assert.is_true(gpurun.allclose(x, 3, 0, 0), dtype)
      assert.is_true(gpurun.allclose(gathered, 3, 0, 0), dtype .. ": all_gather copied nothing")
      assert.is_true(gpurun.allclose(scattered, 3, 0, 0), dtype .. ": reduce_scatter copied nothing")
    end
  end)

  it("waits for the device before and after a collective with no stream #gpu", function()
    local a, b, out = gpurun.full(n, 1, "float32"), gpurun.full(n, 2, "float32"), gpurun.zeros(n, "float32")
    gpurun.launch(stream, gpurun.LaunchConfig({ grid = 16, block = 256 }), kernel("vec_add"), a, b, out,
      gpurun.u64(n))
    local gathered = gpurun.zeros(n, "float32")
    dist.all_gather(gathered, out)
    assert.is_true(gpurun.allclose(gathered, 3, 0, 0))
  end)

  it("captures a pipeline and its collectives in one graph, which keeps their buffers #gpu", function()
    local config = gpurun.LaunchConfig({ grid = 16, block = 256 })
    local a, b = gpurun.full(n, 1, "float32"), gpurun.full(n, 2, "float32")
    local sum, gathered = gpurun.zeros(n, "float32"), gpurun.zeros(n, "float32")
    dist.all_reduce(sum, "sum", stream) -- the communicator exists before the capture
    local builder = stream:create_graph_builder()
    builder:begin_building()
    gpurun.launch(builder, config, kernel("vec_add"), a, b, sum, gpurun.u64(n))
    dist.all_reduce(sum, "max", builder)
    dist.all_gather(gathered, sum, builder)
    builder:end_building()
    local graph = builder:complete()
    builder:close()
    -- In a world of one NCCL may record an in-place all_reduce as nothing.
    assert.is_true(graph.node_count >= 2, graph.node_count .. " nodes")
    local ok, err = pcall(gathered.close, gathered)
    assert.is_false(ok)
    assert.matches("used by 1 graph", err, 1, true)
    local kept = gathered
    sum, gathered = nil, nil -- luacheck: ignore 311 (the graph alone must keep them)
    collectgarbage(); collectgarbage()
    a:fill(5, stream)
    graph:launch(stream)
    stream:sync()
    assert.is_true(gpurun.allclose(kept, 7, 0, 0))
    graph:close()
  end)

  it("refuses a collective on a stream a builder captures, and ends the capture #gpu", function()
    local x = gpurun.zeros(n, "float32")
    dist.all_reduce(x, "sum", stream)
    local builder = stream:create_graph_builder()
    builder:begin_building()
    local ok, err = pcall(dist.all_reduce, x, "sum", stream)
    assert.is_false(ok)
    assert.matches("the stream is being captured by a GraphBuilder", err, 1, true)
    assert.are.equal("abandoned", builder.state)
    dist.all_reduce(x, "sum", stream)
    stream:sync()
  end)

  it("turns NVLink multicast off unless the user set it #gpu", function()
    dist.all_reduce(gpurun.zeros(16, "float32"), "sum", stream)
    stream:sync()
    local result = child([[
local dist = require("gpurun.dist").init()
dist.all_reduce(require("gpurun").zeros(16), "sum")
print(os.getenv("NCCL_NVLS_ENABLE"))
]], { NCCL_NVLS_ENABLE = "1" })
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("1\n", result.stdout)
    local unset = child([[
local dist = require("gpurun.dist").init()
dist.all_reduce(require("gpurun").zeros(16), "sum")
print(os.getenv("NCCL_NVLS_ENABLE"))
]], nil, "env -u NCCL_NVLS_ENABLE")
    assert.are.equal(0, unset.code, unset.stderr)
    assert.are.equal("0\n", unset.stdout)
  end)

  it("makes the communicator only outside a capture, saying how #gpu", function()
    local result = child([[
local gpurun = require("gpurun")
local dist = require("gpurun.dist").init()
local stream = dist.device():create_stream()
local x = gpurun.zeros(16)
local builder = stream:create_graph_builder()
builder:begin_building()
print(pcall(dist.all_reduce, x, "sum", builder))
print(builder.state)
dist.all_reduce(x, "sum", stream)
stream:sync()
print("after", gpurun.allclose(x, 0, 0, 0))
]])
    assert.are.equal(0, result.code, result.stderr)
    assert.matches("false\tdist.all_reduce: the world's NCCL communicator is made by the first "
      .. "collective, which cannot be inside a graph capture", result.stdout, 1, true)
    assert.matches("\nabandoned\nafter\ttrue\n", result.stdout, 1, true)
  end)

  it("names NCCL and what to install when it is missing on a GPU #gpu", function()
    local result = child([[
local dist = require("gpurun.dist").init()
print(pcall(dist.all_reduce, require("gpurun").zeros(16)))
]], { GPURUN_NCCL_LIBRARY = "/nonexistent/libnccl.so.2" })
    assert.are.equal(0, result.code, result.stderr)
    assert.matches("false\tdist.all_reduce: NCCL could not be loaded (/nonexistent/libnccl.so.2", result.stdout, 1, true)
  end)

  it("runs collectives under `mpirun -np 1` #gpu", function()
    require_mpirun()
    local result = process.run(mpirun_command(1) .. " " .. gpurun_bin() .. " -e " .. process.quote([[
local gpurun = require("gpurun")
local dist = require("gpurun.dist").init()
local x = gpurun.full(1024, 2, "float32")
dist.all_reduce(x, "sum")
print(dist.info().uses_mpi, dist.size(), gpurun.allclose(x, 2, 0, 0))
]]))
    assert.are.equal(0, result.code, result.stdout .. result.stderr)
    assert.are.equal("true\t1\ttrue\n", result.stdout)
  end)
end)

describe("scripts/distributed.lua", function()
  local SMALL = " --elements 65536 --iterations 20"

  local function expect_report(result, ranks)
    local output = result.stdout .. result.stderr
    assert.are.equal(0, result.code, output)
    assert.matches("^ranks: " .. ranks .. " %(", result.stdout)
    assert.matches("\nrank 0 on device 0 %(.-%): 20 iters in %d+%.%d+s  %(%d+%.%d%d us/iter%)\n", result.stdout)
    assert.matches("\nslowest rank: %d+%.%d%d us/iter\n", result.stdout)
    assert.matches("\none process, every slice on rank 0's GPU: 20 iters in ", result.stdout)
    assert.matches("\nscaling: %d+%.%d%dx with " .. ranks .. " rank", result.stdout)
    assert.matches("\nchecksum: %-?%d+%.%d+ %(host %-?%d+%.%d+, one process %-?%d+%.%d+%): OK\n$", result.stdout)
  end

  it("refuses a bad option with exit status 2", function()
    local result = process.gpurun("scripts/distributed.lua --elements 0")
    assert.are.equal(2, result.code)
    assert.matches("--elements: expected a positive integer", result.stderr, 1, true)
  end)

  it("runs as a world of one without mpirun #gpu", function()
    expect_report(process.gpurun("scripts/distributed.lua" .. SMALL), 1)
  end)

  it("runs under `mpirun -np 1`, with its figures as JSON #gpu", function()
    require_mpirun()
    local result = process.run(mpirun_command(1) .. " " .. gpurun_bin() .. " scripts/distributed.lua" .. SMALL)
    expect_report(result, 1)
    assert.matches("Open MPI", result.stdout, 1, true)
    local json = process.run(mpirun_command(1) .. " " .. gpurun_bin() .. " scripts/distributed.lua" .. SMALL .. " --json")
    assert.are.equal(0, json.code, json.stderr)
    local figures = require("cjson").decode(json.stdout)
    assert.are.equal(1, figures.ranks)
    assert.is_true(figures.checks_passed)
    assert.is_true(figures.scaling > 0)
  end)

  it("runs under `mpirun -np 2`, one GPU per rank #multigpu", function()
    require_mpirun()
    expect_report(process.run(mpirun_command(2) .. " " .. gpurun_bin() .. " scripts/distributed.lua"
      .. " --elements 1048576 --iterations 20"), 2)
  end)
end)

describe("gpurun.dist under MPICH", function()
  it("runs the rank specs in every rank of MPICH's `mpiexec -n 2`, finding MPICH by itself", function()
    if os.execute("command -v mpiexec.mpich >/dev/null 2>&1") ~= true then
      -- CI has it (tools/dev.sh installs mpich); a GPU host may not.
      pending("mpiexec.mpich not found: MPICH is not installed here (tools/dev.sh installs mpich)")
      return
    end
    local shared = os.tmpname()
    os.remove(shared)
    assert(os.execute("mkdir -p " .. process.quote(shared)))
    local result = process.run(without_leak_checks() .. "timeout 120 mpiexec.mpich -n 2 " .. process.quote(process.gpurun_bin())
      .. " spec/run.lua -o spec/support/summary_output.lua -p _in_world spec/mpi",
      { env = { GPURUN_RANKS_DIR = shared, GPURUN_MPI_LIBRARY = "" } })
    os.execute("rm -rf " .. process.quote(shared))
    local output = result.stdout .. result.stderr
    assert.are.equal(0, result.code, output)
    local closing = 0
    for passed, failed in output:gmatch("(%d+) passed, (%d+) failed") do
      closing = closing + 1
      assert.are.equal("0", failed, output)
      assert.is_true(tonumber(passed) >= 5, output)
    end
    assert.are.equal(2, closing, output)
  end)
end)
