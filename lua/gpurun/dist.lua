-- gpurun.dist: ranks started by an MPI launcher (mpirun, mpiexec, srun) and
-- NCCL collectives on gpurun.Buffers, named after torch.distributed. Policy
-- lives here: which launcher started the process, which device a rank
-- takes, defaults. The mechanisms (MPI, NCCL, captures) are C
-- (src/types/dist.c). MPI is loaded only under a launcher, NCCL only by the
-- first collective: a script that never calls them needs neither installed.
--
--   local dist = require("gpurun.dist")
--   dist.init()                       -- under `mpirun -np N gpurun script.lua`
local gpurun = require("gpurun")
local core = require("gpurun.dist_core")
local unknown_option = require("gpurun.options").unknown

local dist = {}

-- Variables a launcher sets in every rank: Open MPI's mpirun, MPICH's and
-- Intel MPI's Hydra (PMI), PMIx (Open MPI 5, srun --mpi=pmix).
dist.LAUNCHER_VARIABLES = { "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK" }

-- launcher() -> the launcher variable this process has, or nil outside one.
function dist.launcher()
  for _, name in ipairs(dist.LAUNCHER_VARIABLES) do
    local value = os.getenv(name)
    if value and value ~= "" then return name end
  end
  return nil
end

-- An error of core's raised again at the script's call (core names the
-- position inside this file).
local function call(f, ...)
  local results = table.pack(pcall(f, ...))
  if not results[1] then
    core.raise((tostring(results[2]):gsub("^[^\n]-dist%.lua:%d+: ", "")))
  end
  return table.unpack(results, 2, results.n)
end

-- The device a rank takes: options.device (an ordinal, or false for none),
-- else the node-local rank modulo the devices visible, else none (no GPU:
-- ranks, size and barriers still work).
local function choose_device(options, local_rank)
  if options.device == false then return nil end
  if options.device ~= nil then return options.device end
  local count = gpurun.device_count()
  if count == 0 then return nil end
  return local_rank % count
end

local function check_options(options)
  if options == nil then return {} end
  if type(options) ~= "table" then
    core.raise("bad argument #1 to 'dist.init' (table of options or nil expected, got "
      .. type(options) .. ")")
  end
  local unknown = unknown_option(options, { "device" })
  if unknown then core.raise("dist.init: " .. unknown) end
  local device = options.device
  if device ~= nil and device ~= false and math.type(device) ~= "integer" then
    core.raise("dist.init: 'device' must be a device ordinal or false, got "
      .. (type(device) == "number" and tostring(device) or type(device)))
  end
  return options
end

-- init([{ device = ordinal | false }]) -> dist. Under a launcher: MPI is
-- started and the world is every rank; outside one: a world of one, MPI
-- not loaded. The chosen device is made current. Again: the same world.
function dist.init(options)
  options = check_options(options)
  local info = core.info()
  if info.started then
    if options.device ~= nil and (options.device or nil) ~= info.device then
      core.raise(("dist.init: already started with device %s"):format(tostring(info.device)))
    end
    return dist
  end
  local _, _, local_rank = call(core.start, dist.launcher() ~= nil)
  local device = choose_device(options, local_rank)
  if device then
    call(function()
      local ok, err = pcall(function() gpurun.Device(device):set_current() end)
      if not ok then error("dist.init: device " .. device .. ": " .. tostring(err), 0) end
    end)
    core.set_device(device)
  end
  return dist
end

-- The functions that need no policy, exported as they are:
--
--   dist.rank(), dist.size(), dist.local_rank(), dist.barrier()
--   dist.all_reduce(buffer, "sum", stream)       -- or a GraphBuilder: captured
--   dist.broadcast(buffer, root, stream)
--   dist.all_gather(output, input, stream)        -- output: size x input
--   dist.reduce_scatter(output, input, "sum", stream)  -- input: size x output
dist.rank = core.rank
dist.size = core.size
dist.local_rank = core.local_rank
dist.barrier = core.barrier
dist.all_reduce = core.all_reduce
dist.broadcast = core.broadcast
dist.all_gather = core.all_gather
dist.reduce_scatter = core.reduce_scatter
dist.nccl_version = core.nccl_version

-- info() -> { started, uses_mpi, rank, size, local_rank, device, mpi,
-- mpi_library }: what init found, for reports.
dist.info = core.info

-- is_initialized() -> whether init has run in this process.
function dist.is_initialized()
  return core.info().started
end

-- device() -> the gpurun.Device init chose, or nil.
function dist.device()
  local ordinal = core.info().device
  if not core.info().started then core.raise("dist.device: call dist.init() first") end
  return ordinal and gpurun.Device(ordinal) or nil
end

-- Scripts call these while a builder captures (a collective is captured):
-- their errors end the capture as gpurun's own do.
return gpurun.guard(dist)
