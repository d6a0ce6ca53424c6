-- What keeps tools/fuzz.lua's random calls from doing real harm on a GPU
-- host: allocation sizes are capped, and a launch that would pass gpurun's
-- checks runs only when it stays inside its buffers and finishes quickly.
local catalog = require("spec.support.api_catalog")

local guard = {}

-- Element counts from here up to NEVER_FITS are replaced by NEVER_FITS:
-- small allocations succeed, absurd ones must fail cleanly, and nothing in
-- between really takes GPU memory or time.
guard.ALLOCATION_CAP = 1 << 20
guard.NEVER_FITS = 1 << 40          -- elements: at least 1 TiB, more than any GPU has
-- Pinned host memory that large could first take the host's memory: past
-- any address space (2^48 elements of one byte and more), it fails at once.
guard.HOST_NEVER_FITS = 1 << 48
guard.HOST_TABLE_CAP = 1 << 16      -- random_table() builds a Lua table of this many
guard.TOO_MANY_FOR_A_TABLE = 1 << 31 -- past INT_MAX: random_table() must refuse it
guard.MAX_BLOCKS = 1 << 16          -- blocks per launch, so each finishes in microseconds

local FLT_MAX = 3.4028234663852886e38

-- ---- allocation sizes -------------------------------------------------------

local function as_integer(value)
  if type(value) ~= "number" then return nil end
  return math.tointeger(value)
end

-- Where a call that writes a file may write: one scratch file for the run
-- (tools/fuzz.lua removes it at the end).
guard.SCRATCH_PATH = os.tmpname()

-- Rewrites args (a table with n) in place where a count would allocate
-- more than the caps allow.
function guard.cap_sizes(spec, args, self_offset)
  if spec.allocates then
    local at = spec.allocates + self_offset
    local n = as_integer(args[at])
    local never_fits = spec.host_memory and guard.HOST_NEVER_FITS or guard.NEVER_FITS
    if n and n > guard.ALLOCATION_CAP and n < never_fits then args[at] = never_fits end
  end
  if spec.host_table then
    local at = spec.host_table + self_offset
    local n = as_integer(args[at])
    if n and n > guard.HOST_TABLE_CAP and n < guard.TOO_MANY_FOR_A_TABLE then
      args[at] = guard.TOO_MANY_FOR_A_TABLE
    end
  end
end

-- Rewrites what a call could do beyond the process: files it writes go to
-- SCRATCH_PATH, whatever path was drawn (an empty one, or one in a folder
-- that does not exist, stays, to be refused), and a condition's default is never positive (a while loop
-- whose body never clears it would replay forever).
function guard.tame(spec, args, self_offset)
  if spec.writes then
    local at = spec.writes + self_offset
    local path = args[at]
    if type(path) == "number" or (type(path) == "string" and path ~= ""
        and not path:find("^/nonexistent")) then
      args[at] = guard.SCRATCH_PATH
    end
  end
  if spec.ipc then
    -- A socket only in the scratch folder, and every wait short: a
    -- receive with the default timeout would listen for half a minute.
    local path = args[1 + self_offset]
    if type(path) == "string" and path ~= "" and not path:find("\0", 1, true) then
      args[1 + self_offset] = guard.SCRATCH_PATH .. ".sock"
    end
    local at = spec.ipc + self_offset
    local drawn = args[at]
    if drawn == nil or type(drawn) == "table" then
      local options = {}
      for key, value in next, drawn or {} do options[key] = value end
      local timeout = rawget(options, "timeout")
      if timeout == nil or (type(timeout) == "number" and timeout > 0.02) then
        options.timeout = 0.02
      end
      args[at] = options
      if args.n and args.n < at then args.n = at end
    end
  end
  if spec.condition_default then
    local at = spec.condition_default + self_offset
    local value = tonumber(args[at])
    if value and value > 0 then args[at] = 0 end
  end
end

-- ---- launches -----------------------------------------------------------------

-- How each shared test kernel uses its parameters: "ptr" (a device pointer
-- it reads or writes), "u64", "u32", "i64", "i32" (a count that bounds the
-- elements touched), "any" (a value that changes no address). The limit
-- says whether the counts fit the buffers and the configuration.
-- out_of_bounds and traps are absent: they fault whatever they are given.
-- align: the bytes every pointer argument must be a multiple of (4 unless
-- given: the kernels read and write 4-byte elements).
local KERNELS = {
  vec_add = { "ptr", "ptr", "ptr", "u64", limit = function(a)
    local fits = math.min(a[1].nbytes, a[2].nbytes, a[3].nbytes) // 4
    return not math.ult(fits, a[4])
  end },
  scale_shift = { "ptr", "any", "any", "u32", limit = function(a)
    return a[4] <= a[1].nbytes // 4
  end },
  fill_double = { "ptr", "any", "i64", align = 8, limit = function(a)
    return a[3] <= a[1].nbytes // 8
  end },
  byte_flag = { "ptr", "any", "any", align = 1, limit = function(a)
    return a[1].nbytes >= 1
  end },
  write_index_2d = { "ptr", "i32", "i32", limit = function(a)
    if a[2] <= 0 or a[3] <= 0 then return true end
    return a[2] * a[3] <= a[1].nbytes // 4
  end },
  uses_shared = { "ptr", limit = function(a, config)
    local threads = config.block[1]
    return threads * 4 <= a[1].nbytes and threads * 4 <= config.shmem_size
  end },
}
KERNELS.vec_mul = KERNELS.vec_add
-- The fuzzer's own small programs (spec/support/fuzz_pool.lua's SOURCES).
KERNELS.k = { "ptr", "u64", limit = function(a, config)
  local threads = config.block[1]
  local touched = math.ult(threads, a[2]) and threads or a[2] -- x[threadIdx.x] for threadIdx.x < n
  return touched * 4 <= a[1].nbytes
end }
KERNELS["scale<float>"] = { "ptr", "any", limit = function(a)
  return a[1].nbytes >= 4
end }

local function field(object, key)
  local ok, value = pcall(function() return object[key] end)
  if ok then return value end
  return nil
end

-- The bits gpurun would pack for `value` into a parameter of `size` bytes,
-- as an integer, or { buffer = ... }; nil when gpurun refuses the value.
local function packed(value, size)
  local kind = type(value)
  if kind == "number" then
    if math.type(value) == "integer" then
      if size == 8 then return value end
      local bits = size * 8
      if value < -(1 << (bits - 1)) or value > (1 << bits) - 1 then return nil end
      return value & ((1 << bits) - 1)
    end
    if size == 8 then return (string.unpack("<i8", string.pack("<d", value))) end
    if size == 4 and not (value == value and value ~= math.huge and value ~= -math.huge
        and math.abs(value) > FLT_MAX) then
      return (string.unpack("<I4", string.pack("<f", value)))
    end
    return nil
  elseif kind == "boolean" then
    return size == 1 and (value and 1 or 0) or nil
  end
  local type_name = catalog.type_of(value)
  if type_name == "Buffer" then
    local nbytes = field(value, "nbytes")
    if nbytes == nil or size ~= 8 then return nil end  -- closed, or not a pointer slot
    return { buffer = { nbytes = nbytes, ptr = field(value, "ptr") or 0 } }
  elseif type_name == "PinnedBuffer" then
    -- A mapped one passes its device address as a Buffer passes its
    -- pointer, and a kernel writing past it writes the process's memory.
    local nbytes, ptr = field(value, "nbytes"), field(value, "device_ptr")
    if nbytes == nil or ptr == nil or size ~= 8 then return nil end -- closed or unmapped: refused
    return { buffer = { nbytes = nbytes, ptr = ptr } }
  elseif type_name == "Scalar" then
    if value.size ~= size then return nil end
    local number = value.value
    if value.type == "f32" then return (string.unpack("<I4", string.pack("<f", number))) end
    if value.type == "f64" then return (string.unpack("<i8", string.pack("<d", number))) end
    return packed(number, size) or number
  end
  -- A Graph for device launch passes its handle, an address, to an 8-byte
  -- integer (in a launch on a builder): as a count, out of every buffer.
  if type_name == "Graph" and size == 8 and field(value, "device_launch") then return -1 end
  -- Anything else is refused: a Struct passes only to a struct parameter,
  -- which none of these kernels has.
  return nil
end

-- The packed bits read back as the parameter's C type.
local function as_count(bits, kind)
  if kind == "u32" then return bits & 0xffffffff end
  if kind == "i32" then
    bits = bits & 0xffffffff
    return bits >= 0x80000000 and bits - 0x100000000 or bits
  end
  return bits -- u64 compares with math.ult, i64 as is
end

local function config_of(value)
  if catalog.type_of(value) ~= "LaunchConfig" then return nil end
  return { grid = value.grid, block = value.block, shmem_size = value.shmem_size }
end

-- gpurun checks a launch against the kernel's parameter sizes, not their
-- meaning: an 8-byte integer passes where a pointer is expected, and a
-- count larger than the buffers passes too. Such a launch faults on the GPU
-- and poisons the CUDA context for the rest of the process, which is the
-- documented behaviour, not a bug to find. So the guard models the packing
-- rules and the shared test kernels (spec/support/kernels.lua), and skips
-- exactly the launches that would run with unsafe arguments; launches that
-- gpurun refuses still go ahead, since refusing them is what is tested.
--
-- Whether a launch of `kernel` with `config` and the arguments
-- args[first..n] may go ahead: true when gpurun would refuse it, or when it
-- would run safely; false when it would run outside its buffers, or with a
-- kernel the guard does not know, or with too many blocks. config_is_shape:
-- config_value is already { grid, block, shmem_size } (a graph node's).
function guard.launch_allowed(kernel, config_value, args, first, n, config_is_shape)
  if catalog.type_of(kernel) ~= "Kernel" then return true end
  local name = field(kernel, "name")
  if name == nil then return true end -- closed: refused
  local model = KERNELS[name]
  if model == nil then return false end
  local config = config_is_shape and config_value or config_of(config_value)
  if config == nil then return true end
  local params = kernel:params()
  if n - first + 1 ~= #params then return true end
  local threads = config.block[1] * config.block[2] * config.block[3]
  if threads > kernel.max_threads_per_block or config.shmem_size > kernel.max_dynamic_shared_size then
    return true
  end
  local values = {}
  for i, param in ipairs(params) do
    local bits = packed(args[first + i - 1], param.size)
    if bits == nil then return true end -- refused
    local use = model[i]
    if use == "ptr" then
      if type(bits) ~= "table" then return false end -- an integer as a pointer
      -- A view of a narrow dtype can start where the kernel's elements
      -- cannot: a misaligned access faults as surely as one out of bounds.
      if bits.buffer.ptr % (model.align or 4) ~= 0 then return false end
      values[i] = bits.buffer
    elseif type(bits) == "table" then
      if use ~= "any" then return false end -- a pointer as a count
      values[i] = 0
    else
      values[i] = use == "any" and bits or as_count(bits, use)
    end
  end
  if config.grid[1] * config.grid[2] * config.grid[3] > guard.MAX_BLOCKS then return false end
  return model.limit(values, config)
end

-- The node graph:nodes() lists at `index`, or nil (gpurun refuses the call).
local function graph_node(graph, index)
  if catalog.type_of(graph) ~= "Graph" or math.type(index) ~= "integer" then return nil end
  local ok, nodes = pcall(graph.nodes, graph)
  return ok and nodes[index] or nil
end

-- Graph:set_args changes what a kernel node's replays touch, under the
-- node's own configuration; Graph:set_config changes how many threads run
-- with the node's arguments unchanged, so only a shape no larger (and
-- shared memory no smaller) may go ahead.
local function node_change_allowed(entry, args, n)
  local node = graph_node(args[1], args[2])
  if node == nil or node.kernel == nil then return true end
  if entry.name == "set_args" then
    return guard.launch_allowed(node.kernel, node, args, 3, n, true)
  end
  local config = config_of(args[3])
  if config == nil then return true end
  for axis = 1, 3 do
    if config.grid[axis] > node.grid[axis] or config.block[axis] > node.block[axis] then
      return false
    end
  end
  return config.shmem_size >= node.shmem_size
end

-- Graph:set_arg changes one argument and keeps the node's others, which the
-- guard cannot see: only a change that no replay can take out of bounds
-- may go ahead (a position the model marks "any"), or one gpurun refuses
-- (no such node or position, a value that does not pack).
local function node_argument_allowed(args)
  local node = graph_node(args[1], args[2])
  if node == nil or node.kernel == nil then return true end
  local model = KERNELS[field(node.kernel, "name")]
  if model == nil then return false end
  local position = args[3]
  local ok, params = pcall(node.kernel.params, node.kernel)
  if not ok or math.type(position) ~= "integer" or position < 1 or position > #params then
    return true
  end
  if packed(args[4], params[position].size) == nil then return true end
  return model[position] == "any"
end

-- Calls that write what they are given: a file handle in the pool (io.stderr)
-- would get raw elements.
local WRITES_FILES = { ["Buffer:copy_to"] = true }

-- Whether the call `entry` with args (n of them) may go ahead on a GPU.
-- Calls that generate and compile a kernel for their arguments' dtypes
-- (reductions, scans, select: entry.spec.reduces) compile at most this many
-- different kernels in one fuzz child: each is NVRTC's time (about a
-- second, cold), and what the fuzzer tests is the calls' checks, not the
-- compiler. A call with a signature seen before still goes ahead.
guard.MAX_COMPILED_SIGNATURES = 6
local compiled_signatures, compiled_count = {}, 0

local function signature_allowed(entry, args, n)
  local parts = { entry.label }
  for i = 1, n do
    local kind = catalog.type_of(args[i])
    parts[#parts + 1] = kind == "Buffer" and (field(args[i], "dtype") or "closed") or type(args[i])
  end
  local key = table.concat(parts, " ")
  if compiled_signatures[key] then return true end
  if compiled_count >= guard.MAX_COMPILED_SIGNATURES then return false end
  compiled_signatures[key], compiled_count = true, compiled_count + 1
  return true
end

function guard.allowed(entry, args, n)
  if entry.spec.reduces and not signature_allowed(entry, args, n) then return false end
  if WRITES_FILES[entry.label] then
    for i = 1, n do
      if io.type(args[i]) then return false end
    end
  end
  if entry.label == "gpurun.launch" then
    return guard.launch_allowed(args[3], args[2], args, 4, n)
  elseif entry.label == "Kernel:bind" then
    return guard.launch_allowed(args[1], args[2], args, 3, n)
  elseif entry.label == "Graph:set_args" or entry.label == "Graph:set_config" then
    return node_change_allowed(entry, args, n)
  elseif entry.label == "Graph:set_arg" then
    return node_argument_allowed(args)
  end
  return true
end

guard.KERNELS = KERNELS
return guard
