-- distributed.lua: the cudagraphs sample's pipeline, r3 = (a + b) * c - a,
-- split across MPI ranks, one GPU each, with a checksum all-reduced by
-- NCCL inside the same graph. Outside mpirun it is a world of one.
--
--   mpirun -np N gpurun scripts/distributed.lua [--elements N] [--iterations K] [--json]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local bench = require("gpurun.bench")
local check = require("gpurun.check")
local report = require("gpurun.report")
local dist = require("gpurun.dist")
local kernels = require("gpurun.samples.kernels")

local SOURCE = kernels.source("cudagraphs")
local BLOCK = 256
local CHECKSUM = { accumulate = "float64" } -- float32 elements summed in float64
local HOST_CHUNK = 1 << 16
local SEED = 20240611

local cli = args.new("distributed.lua",
  "Runs add -> mul -> sub and an all-reduced checksum as one graph on every MPI rank.")
cli:integer_option("--elements", "Elements per vector, split across the ranks.", 1 << 22)
cli:integer_option("--iterations", "Graph replays to time.", 200)
cli:flag("--json", "Write the figures as one JSON object to stdout (rank 0) instead of the text report.")
local options = cli:parse(arg)

-- Rank r's slice: first element (0-based) and count.
local function slice_of(r, size, n)
  local count = n // size + (r < n % size and 1 or 0)
  local first = r * (n // size) + math.min(r, n % size)
  return first, count
end

-- Three generators per slice, one per vector, so that the host can draw a,
-- b and c of a slice side by side in chunks.
local function generators(r)
  return gpurun.default_rng(SEED + 3 * r), gpurun.default_rng(SEED + 3 * r + 1),
         gpurun.default_rng(SEED + 3 * r + 2)
end

-- The slice's buffers and one graph: the pipeline, its checksum and, when
-- `collective` is set, the checksum's all-reduce.
local function build(kernel, stream, r, count, collective)
  local ga, gb, gc = generators(r)
  local s = { a = ga:random(count), b = gb:random(count), c = gc:random(count) }
  -- r3 zeroed: the sum below, which compiles the checksum, reads it first.
  s.r1, s.r2, s.r3 = gpurun.empty(count), gpurun.empty(count), gpurun.zeros(count)
  s.checksum = gpurun.zeros(1, "float64")
  local config = gpurun.LaunchConfig{ grid = math.min((count + BLOCK - 1) // BLOCK, 65535), block = BLOCK }
  local n = gpurun.u64(count)
  gpurun.sum(stream, s.r3, s.checksum, CHECKSUM) -- compiles it, which a capture cannot
  s.graph = bench.capture(stream, function(builder)
    gpurun.launch(builder, config, kernel.vec_add, s.a, s.b, s.r1, n)
    gpurun.launch(builder, config, kernel.vec_mul, s.r1, s.c, s.r2, n)
    gpurun.launch(builder, config, kernel.vec_sub, s.r2, s.a, s.r3, n)
    gpurun.sum(builder, s.r3, s.checksum, CHECKSUM)
    if collective then dist.all_reduce(s.checksum, "sum", builder) end
  end)
  return s
end

-- The checksum in double precision on the host, from the same generators.
local function host_checksum(size, n)
  local sum = 0.0
  for r = 0, size - 1 do
    local _, count = slice_of(r, size, n)
    local ga, gb, gc = generators(r)
    for done = 0, count - 1, HOST_CHUNK do
      local m = math.min(HOST_CHUNK, count - done)
      local a, b, c = ga:random_table(m, "float32"), gb:random_table(m, "float32"), gc:random_table(m, "float32")
      for i = 1, m do sum = sum + ((a[i] + b[i]) * c[i] - a[i]) end
    end
  end
  return sum
end

-- Each rank makes its slice of the vectors from seeded generators, captures
-- one graph holding the pipeline, a reduction of r3 to one float64 sum
-- (gpurun.sum accumulating in float64: deterministic, the same bits every
-- replay) and dist.all_reduce of that sum, and replays it. Rank 0 then
-- checks the all-reduced checksum against the host's arithmetic on the same
-- seeded inputs and against one process doing every slice on its own GPU,
-- and reports time per iteration (its own, the slowest rank's, the
-- one-process run's) and the scaling.
local function main()
  dist.init()
  local rank, size = dist.rank(), dist.size()
  local device = dist.device()
  if not device then
    io.stderr:write("distributed.lua: rank ", rank, ": no CUDA device (",
      gpurun.driver_error() or "none visible", ")\n")
    return 1
  end
  local n = options.elements
  if n < size then
    io.stderr:write("distributed.lua: --elements must be at least the number of ranks\n")
    return 2
  end
  local out = report.new{ json = options.json, write = rank == 0 and io.write or function() end }
  local checks = check.new(cli.name)
  local stream = device:create_stream()
  local code = gpurun.Program(SOURCE, "c++",
    gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch }):compile("cubin")
  local kernel = {}
  for _, name in ipairs({ "vec_add", "vec_mul", "vec_sub" }) do
    kernel[name] = code:get_kernel(name)
  end

  -- The first collective makes the communicator; it cannot be captured.
  local figure = gpurun.zeros(1, "float64")
  dist.all_reduce(figure, "sum", stream)
  stream:sync()

  local _, count = slice_of(rank, size, n)
  local mine = build(kernel, stream, rank, count, true)
  local timed = bench.run(stream, function(s) mine.graph:launch(s) end, { iters = options.iterations })
  local checksum = mine.checksum:get(1)

  figure:fill(timed.us_per_iter)
  dist.all_reduce(figure, "max", stream)
  stream:sync()
  local slowest = figure:get(1)

  -- One process doing every slice on rank 0's GPU, while the others wait.
  local alone
  local one_checksum = 0.0
  if rank == 0 then
    local slices = {}
    for r = 0, size - 1 do
      local _, m = slice_of(r, size, n)
      slices[#slices + 1] = build(kernel, stream, r, m, false)
    end
    alone = bench.run(stream, function(s)
      for _, slice in ipairs(slices) do slice.graph:launch(s) end
    end, { iters = options.iterations })
    for _, slice in ipairs(slices) do one_checksum = one_checksum + slice.checksum:get(1) end
  end
  dist.barrier()
  if rank ~= 0 then return 0 end

  local info = dist.info()
  local major, minor, patch = dist.nccl_version()
  out:field("ranks", size)
  out:field("elements", n)
  out:say(("ranks: %d (%s; NCCL %d.%d.%d), elements: %d (%d on rank 0)"):format(size,
    info.uses_mpi and info.mpi_library or "no MPI: a world of one", major, minor, patch, n, count))
  out:timing("rank0", ("rank 0 on device %d (%s): "):format(device.id, device.name), timed)
  out:field("slowest_rank_us_per_iter", slowest)
  out:say(("slowest rank: %.2f us/iter"):format(slowest))
  out:timing("one_process", "one process, every slice on rank 0's GPU: ", alone)
  local scaling = alone.us_per_iter / slowest
  out:field("scaling", scaling)
  out:say(("scaling: %.2fx with %d rank%s (ideal %d)"):format(scaling, size, size == 1 and "" or "s", size))

  local expected = host_checksum(size, n)
  out:field("checksum", checksum)
  out:field("host_checksum", expected)
  -- The host adds the same float32 inputs in double without the GPU's
  -- float32 rounding of each step: the two differ by rounding errors that
  -- grow as the square root of the element count (the sum itself can be
  -- near zero: its terms average 0). A lost or doubled slice moves it by
  -- hundreds.
  checks:tables("all-reduced checksum against the host", { checksum }, { expected }, 1e-6,
    1e-6 * math.sqrt(n))
  checks:tables("all-reduced checksum against one process", { checksum }, { one_checksum }, 1e-12, 1e-9)
  if checks:passed() then
    out:say(("checksum: %.6f (host %.6f, one process %.6f): OK"):format(checksum, expected, one_checksum))
  end
  return out:finish(checks)
end

os.exit(main(), true)
