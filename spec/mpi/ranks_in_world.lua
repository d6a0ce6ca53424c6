-- Run in every rank by spec/dist_spec.lua under `mpirun -np N gpurun
-- spec/run.lua -p _in_world spec/mpi` (not part of the plain suite: its
-- name has no _spec). Each rank prints its own closing line; the driver
-- reads them all. GPURUN_RANKS_DIR is a folder every rank can write.
local gpurun = require("gpurun")
local dist = require("gpurun.dist")

local expected_size = tonumber(os.getenv("OMPI_COMM_WORLD_SIZE") or os.getenv("PMI_SIZE"))
local shared = assert(os.getenv("GPURUN_RANKS_DIR"), "GPURUN_RANKS_DIR is not set")

local function exists(path)
  local file = io.open(path, "rb")
  if file then file:close() end
  return file ~= nil
end

describe("gpurun.dist under an MPI launcher", function()
  lazy_setup(function() dist.init() end)

  it("sees the launcher and starts MPI", function()
    assert.is_not_nil(dist.launcher())
    assert.is_true(dist.is_initialized())
    local info = dist.info()
    assert.is_true(info.uses_mpi)
    assert.is_truthy(info.mpi == "Open MPI" or info.mpi == "MPICH")
    assert.is_truthy(#info.mpi_library > 0)
  end)

  it("has the launcher's rank, size and node-local rank", function()
    assert.are.equal(expected_size, dist.size())
    assert.is_true(dist.rank() >= 0 and dist.rank() < dist.size())
    local rank = os.getenv("OMPI_COMM_WORLD_RANK") or os.getenv("PMI_RANK")
    assert.are.equal(tonumber(rank), dist.rank())
    local local_rank = os.getenv("OMPI_COMM_WORLD_LOCAL_RANK") or os.getenv("MPI_LOCALRANKID")
    if local_rank then assert.are.equal(tonumber(local_rank), dist.local_rank()) end
    -- One node here: local ranks are the world's ranks.
    assert.are.equal(dist.rank(), dist.local_rank())
  end)

  it("gives the same world when init is called again", function()
    local rank = dist.rank()
    assert.are.equal(dist, dist.init())
    assert.are.equal(rank, dist.rank())
  end)

  it("holds every rank at a barrier until all have reached it", function()
    -- Each rank leaves a mark, waits at the barrier, and must then see every
    -- other rank's mark; a second barrier keeps the marks until all looked.
    local mark = ("%s/reached.%d"):format(shared, dist.rank())
    if dist.rank() == 0 then
      -- Rank 0 arrives late: a barrier that does not wait lets the others
      -- look before its mark exists.
      local until_time = gpurun.perf_counter() + 0.3
      while gpurun.perf_counter() < until_time do end
    end
    local file = assert(io.open(mark, "w"))
    file:write(dist.rank() == 0 and "late" or "on time")
    file:close()
    dist.barrier()
    for rank = 0, dist.size() - 1 do
      assert.is_true(exists(("%s/reached.%d"):format(shared, rank)), "no mark of rank " .. rank)
    end
    local late = assert(io.open(shared .. "/reached.0", "rb"))
    assert.are.equal("late", late:read("a"))
    late:close()
    dist.barrier()
  end)

  it("chooses the device from the local rank", function()
    local count = gpurun.device_count()
    local device = dist.device()
    if count == 0 then
      assert.is_nil(device)
    else
      assert.are.equal(dist.local_rank() % count, device.id)
    end
  end)

  it("all-reduces, broadcasts and gathers across the ranks, one GPU each #multigpu", function()
    if gpurun.device_count() < dist.size() then
      pending("fewer GPUs than ranks")
      return
    end
    local n, size, rank = 1024, dist.size(), dist.rank()
    local stream = dist.device():create_stream()
    local x = gpurun.full(n, rank + 1, "float32")
    dist.all_reduce(x, "sum", stream)
    stream:sync()
    assert.is_true(gpurun.allclose(x, size * (size + 1) / 2, 0, 0))
    local y = gpurun.full(n, rank == 0 and 7 or 0, "int32")
    dist.broadcast(y, 0, stream)
    stream:sync()
    assert.is_true(gpurun.allclose(y, 7, 0, 0))
    local gathered = gpurun.zeros(n * size, "float64")
    dist.all_gather(gathered, gpurun.full(n, rank, "float64"), stream)
    stream:sync()
    local values = gathered:to_table()
    for r = 0, size - 1 do
      assert.are.equal(r, values[r * n + 1])
      assert.are.equal(r, values[(r + 1) * n])
    end
    local scattered = gpurun.zeros(n, "float32")
    dist.reduce_scatter(scattered, gpurun.full(n * size, 1, "float32"), "max", stream)
    stream:sync()
    assert.is_true(gpurun.allclose(scattered, 1, 0, 0))
  end)
end)
