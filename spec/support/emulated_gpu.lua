-- Runs gpurun's generated kernels on the CPU (spec/support/cuda_emu.h), so
-- that specs check what reductions and scans compute on a machine with no
-- GPU. A session replaces what needs a GPU in the gpurun module table
-- (Device, Program's loading, buffers, launch) with stand-ins that record
-- every fill and launch, with the very arguments gpurun's Lua code passes;
-- session:run() compiles the programs used with g++ (once per set of
-- programs, cached in a temporary folder), replays the record and reads
-- every buffer back.
local gpurun = require("gpurun")
local common = require("gpurun.common")

local emulated = {}

local HERE = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "spec/support"
if HERE:sub(1, 1) ~= "/" then
  HERE = (os.getenv("PWD") or ".") .. "/" .. HERE:gsub("^%./", "")
end
local PACK = { float32 = "<f", float64 = "<d", int8 = "<i1", uint8 = "<I1", int32 = "<i4",
               uint32 = "<I4", int64 = "<i8", uint64 = "<I8", int16 = "<i2", uint16 = "<I2" }

-- float16 and bfloat16 elements: their bits from gpurun's own rounding
-- (the typed scalar's bytes), and their values decoded exactly.
local function half_value(bits)
  local sign = bits >= 0x8000 and -1 or 1
  local exponent, fraction = (bits >> 10) & 31, bits & 1023
  if exponent == 31 then
    return fraction == 0 and sign * math.huge or 0 / 0
  elseif exponent == 0 then
    return sign * fraction * 2.0 ^ -24
  end
  return sign * (1024 + fraction) * 2.0 ^ (exponent - 25)
end
local HALF = {
  float16 = function(bits) return half_value(bits) end,
  bfloat16 = function(bits) return (string.unpack("<f", string.pack("<I4", bits << 16))) end,
}

local function encode(dtype, value)
  if HALF[dtype] then
    return gpurun[common.DTYPES[dtype].scalar](value).bytes
  end
  return string.pack(PACK[dtype], value)
end

local function decode(dtype, data, at)
  if HALF[dtype] then
    return HALF[dtype]((string.unpack("<I2", data, at)))
  end
  return (string.unpack(PACK[dtype], data, at))
end

local function quote(text)
  return "'" .. text:gsub("'", "'\\''") .. "'"
end

local function hex(bytes)
  return (bytes:gsub(".", function(c) return ("%02x"):format(c:byte()) end))
end

-- Whether g++ is here to compile the emulated kernels.
function emulated.available()
  return os.execute("command -v g++ >/dev/null 2>&1") == true
end

-- ---- buffers -----------------------------------------------------------------------

local Buffer = { __name = "gpurun.Buffer" }
Buffer.__index = Buffer
Buffer.__len = function(self) return self.count end

function Buffer:view(first, count)
  local base = self.base or self
  local offset = self.offset + (first - 1) * self.element_size
  local view = setmetatable({ session = self.session, id = base.id, base = base, offset = offset,
                              ptr = base.ptr + offset, count = count or (self.count - first + 1),
                              dtype = self.dtype, element_size = self.element_size, device = 0 }, Buffer)
  return view
end

function Buffer:fill(value, target)
  local bytes = encode(self.dtype, value)
  self.session.ops[#self.session.ops + 1] = ("fill %d %d %d %d %s"):format(self.id, self.offset,
    self.count, #bytes, hex(bytes))
  local _ = target
end

local function element_bytes(self)
  local base = self.base or self
  return base.session.data[base.id], self.offset
end

function Buffer:get(i)
  local data, offset = element_bytes(self)
  if not data then return 0 end
  return decode(self.dtype, data, offset + (i - 1) * self.element_size + 1)
end

function Buffer:to_table()
  local data, offset = element_bytes(self)
  local list = {}
  for i = 1, self.count do
    list[i] = decode(self.dtype, data, offset + (i - 1) * self.element_size + 1)
  end
  return list
end

function Buffer:to_bytes()
  local data, offset = element_bytes(self)
  return data:sub(offset + 1, offset + self.count * self.element_size)
end

function Buffer.close() end

-- ---- the session -----------------------------------------------------------------

local Session = {}
Session.__index = Session

function Session:new_buffer(count, dtype, initial)
  dtype = dtype or "float32"
  local size = common.DTYPES[dtype].size
  local id = #self.buffers + 1
  local buffer = setmetatable({ session = self, id = id, offset = 0, count = count, dtype = dtype,
                                element_size = size, device = 0, ptr = 0x10000000 * id }, Buffer)
  self.buffers[id] = buffer
  self.initial[id] = initial or "garbage"
  return buffer
end

function Session:zeros(count, dtype)
  return self:new_buffer(count, dtype, "-")
end

function Session:array(values, dtype)
  dtype = dtype or "float32"
  local parts = {}
  for i, v in ipairs(values) do parts[i] = encode(dtype, v) end
  local path = os.tmpname()
  local file = assert(io.open(path, "wb"))
  file:write(table.concat(parts))
  file:close()
  self.files[#self.files + 1] = path
  return self:new_buffer(#values, dtype, path)
end

function Session:full(count, value, dtype)
  local values = {}
  for i = 1, count do values[i] = value end
  return self:array(values, dtype)
end

-- "(unsigned long long n, const float *__restrict__ _in_x, ...)" of kernel
-- `name` -> { { pointer = bool, c = "const float *__restrict__" } ... }
local function signature(text, name)
  local list = text:match('__global__ void __launch_bounds__%(%d+%) ' .. name .. '%(([^)]*)%)')
  assert(list, "no kernel " .. name .. " in the program")
  local params = {}
  for item in (list .. ","):gmatch("%s*([^,]-)%s*,") do
    local c = item:match("^(.-)[%w_]+$")
    params[#params + 1] = { pointer = item:find("*", 1, true) ~= nil, c = c:match("^%s*(.-)%s*$") }
  end
  return params
end

function Session:program(text)
  local index = self.program_index[text]
  if not index then
    index = #self.programs + 1
    self.programs[index] = { text = text, kernels = {} }
    self.program_index[text] = index
  end
  return index
end

-- The parameter types a plain Lua number is passed to, by their C spelling.
local NUMBER_PACK = { ["unsigned long long"] = "<I8", ["long long"] = "<i8", double = "<d",
                      float = "<f", int = "<i4", ["unsigned int"] = "<I4" }

function Session:record_launch(kernel, config, ...)
  local count = select("#", ...)
  assert(count == #kernel.params, ("%s: %d arguments for %d parameters"):format(kernel.name, count,
         #kernel.params))
  local lines = { ("launch p%d:%s %d %d %d"):format(kernel.program, kernel.name, config.grid[1],
                                                     config.block[1], count) }
  for index = 1, count do
    local arg = select(index, ...)
    if getmetatable(arg) == Buffer then
      lines[#lines + 1] = ("b %d %d"):format(arg.id, arg.offset)
    else
      -- a typed scalar's bytes, as a kernel parameter holds them; a plain
      -- number as gpurun.launch converts it to the parameter's type
      local bytes = type(arg) == "number" and string.pack(NUMBER_PACK[kernel.params[index].c], arg)
        or arg.bytes
      lines[#lines + 1] = ("s %d %s"):format(#bytes, hex(bytes))
    end
  end
  self.ops[#self.ops + 1] = table.concat(lines, "\n")
  self.programs[kernel.program].kernels[kernel.name] = kernel.params
  self.launches = self.launches + 1
end

local REPLACED = { "Device", "Program", "zeros", "empty", "full", "array", "launch" }

function Session:install()
  local session = self
  self.saved = {}
  for _, name in ipairs(REPLACED) do self.saved[name] = gpurun[name] end
  gpurun.Device = function(id)
    return { id = id, arch = "90", multiprocessor_count = session.multiprocessors,
             get_attribute = function() return 2048 end }
  end
  gpurun.Program = function(text)
    local program = session:program(text)
    return { compile = function()
      return { get_kernel = function(_, name)
        return { name = name, program = program, params = signature(text, name),
                 -- as many blocks as the threads allow: no registers limit a stand-in
                 occupancy = function(_, options)
                   return { max_active_blocks_per_multiprocessor = 2048 // options.block }
                 end,
                 bind = function(kernel, config, ...)
                   local args = table.pack(...)
                   return { launch = function() session:record_launch(kernel, config,
                                                table.unpack(args, 1, args.n)) end,
                            close = function() end }
                 end }
      end }
    end }
  end
  gpurun.zeros = function(count, dtype) return session:zeros(count, dtype) end
  gpurun.empty = function(count, dtype) return session:new_buffer(count, dtype) end
  gpurun.full = function(count, value, dtype) return session:full(count, value, dtype) end
  gpurun.array = function(values, dtype) return session:array(values, dtype) end
  gpurun.launch = function(_, config, kernel, ...) session:record_launch(kernel, config, ...) end
end

function Session:close()
  if not self.saved then return end
  for _, name in ipairs(REPLACED) do gpurun[name] = self.saved[name] end
  for name in pairs(package.loaded) do
    if name:match("^gpurun%.compute%.") then package.loaded[name] = nil end
  end
  for name, module in pairs(self.saved_modules) do package.loaded[name] = module end
  for _, path in ipairs(self.files) do os.remove(path) end
  self.saved = nil
end
Session.__close = Session.close

-- The translation unit: the emulator, then each program in a namespace of
-- its own (two programs may name their kernels alike), then the table of
-- kernels by "p<program>:<name>".
function Session:unit()
  local parts = { ('#include "%s/cuda_emu.h"'):format(HERE),
                  require("gpurun.compute.reduction_source").COMMON }
  local table_lines = {}
  for index, program in ipairs(self.programs) do
    -- the emulator defines __half and __nv_bfloat16 itself
    local text = program.text:gsub('extern "C" __global__', "__global__"):gsub("#include <cuda_%w+%.h>\n", "")
    parts[#parts + 1] = ("namespace emu_p%d {\n%s"):format(index, text)
    for name, params in pairs(program.kernels) do
      local casts = {}
      for position, param in ipairs(params) do
        if param.pointer then
          casts[position] = ("(%s)(*(void **)a[%d])"):format(param.c, position - 1)
        else
          casts[position] = ("*(%s *)a[%d]"):format(param.c, position - 1)
        end
      end
      parts[#parts + 1] = ("static void emu_call_%s(void **a) { %s(%s); }"):format(name, name,
                                                                                   table.concat(casts, ", "))
      table_lines[#table_lines + 1] = ('        {"p%d:%s", &emu_p%d::emu_call_%s},'):format(index, name, index, name)
    end
    parts[#parts + 1] = ("} // namespace emu_p%d"):format(index)
  end
  table.sort(table_lines)
  parts[#parts + 1] = "std::map<std::string, emu::Call> &emu::kernels()\n{\n"
    .. "    static std::map<std::string, emu::Call> all = {\n" .. table.concat(table_lines, "\n")
    .. "\n    };\n    return all;\n}"
  parts[#parts + 1] = ("int main() { return emu::main(%d); }"):format(self.concurrency)
  return table.concat(parts, "\n")
end

local function read_all(path)
  local file = io.open(path, "rb")
  if not file then return nil end
  local text = file:read("a")
  file:close()
  return text
end

local function cache_dir()
  local dir = (os.getenv("TMPDIR") or "/tmp") .. "/gpurun-cuda-emu"
  os.execute("mkdir -p " .. quote(dir))
  return dir
end

-- A short hash of text, for the compiled emulator's file name.
local function digest(text)
  local h1, h2 = 5381, 52711
  for i = 1, #text do
    local c = text:byte(i)
    h1 = (h1 * 33 + c) % 4294967296
    h2 = (h2 * 31 + c * 7) % 4294967296
  end
  return ("%08x%08x%06x"):format(h1, h2, #text % 0x1000000)
end

-- Compiles what was recorded (once per set of programs), replays it, and
-- reads every buffer back. Raises with the compiler's or the emulator's
-- output when either fails.
function Session:run()
  local unit = self:unit()
  local dir = cache_dir()
  local binary = dir .. "/" .. digest(unit)
  if not read_all(binary) then
    local path = binary .. ".cpp"
    local file = assert(io.open(path, "w"))
    file:write(unit)
    file:close()
    local log = binary .. ".log"
    local built = os.execute(("g++ -std=c++17 -O0 -w -fno-strict-aliasing -pthread -o %s %s >%s 2>&1"):format(
      quote(binary .. ".tmp"), quote(path), quote(log)))
    if not built then
      error("the emulated kernels did not compile:\n" .. (read_all(log) or ""):sub(1, 4000), 2)
    end
    os.rename(binary .. ".tmp", binary)
  end
  local script = {}
  for id in ipairs(self.buffers) do
    script[#script + 1] = ("buffer %d %d %s"):format(id, self.buffers[id].count * self.buffers[id].element_size,
                                                    self.initial[id])
  end
  for _, op in ipairs(self.ops) do script[#script + 1] = op end
  local dumps = {}
  for id in ipairs(self.buffers) do
    dumps[id] = os.tmpname()
    script[#script + 1] = ("dump %d %s"):format(id, dumps[id])
  end
  local input = os.tmpname()
  local file = assert(io.open(input, "w"))
  file:write(table.concat(script, "\n"), "\n")
  file:close()
  local errors = os.tmpname()
  local ok = os.execute(("timeout 300 %s%s <%s 2>%s"):format(os.getenv("GPURUN_EMU_WRAP") or "",
    quote(binary), quote(input), quote(errors)))
  local message = read_all(errors) or ""
  if os.getenv("GPURUN_EMU_KEEP") then
    io.stderr:write("emulated_gpu: ", binary, " < ", input, "\n")
  else
    os.remove(input)
  end
  os.remove(errors)
  if not ok then
    for _, path in ipairs(dumps) do os.remove(path) end
    error("the emulator failed: " .. message, 2)
  end
  for id, path in ipairs(dumps) do
    self.data[id] = read_all(path)
    os.remove(path)
    -- what comes next starts from what this left
    local keep = os.tmpname()
    local out = assert(io.open(keep, "wb"))
    out:write(self.data[id])
    out:close()
    self.files[#self.files + 1] = keep
    self.initial[id] = keep
  end
  self.ops = {}
end

-- session{ multiprocessors = 2, concurrency = 4 } -> a session, installed:
-- session.modules holds fresh copies of the compute modules (prebuilt,
-- scan, reduction, elementwise, sort), so that the kernels made on its stand-in
-- device stay out of the caches behind gpurun.sum and the others;
-- session.stream and session.builder are stand-ins. Close it (<close>).
--
--   local emulated = require("spec.support.emulated_gpu")
--   local session <close> = emulated.session{ multiprocessors = 2 }
--   local x = session:array({ 1, 2, 3 }, "float32")
--   local out = session:zeros(1, "float32")
--   session.modules.prebuilt.sum(session.stream, x, out)
--   session:run()
--   out:get(1) --> 6
function emulated.session(options)
  options = options or {}
  local self = setmetatable({
    multiprocessors = options.multiprocessors or 2, concurrency = options.concurrency or 4,
    buffers = {}, initial = {}, data = {}, ops = {}, files = {}, programs = {}, program_index = {},
    launches = 0, saved_modules = {}, modules = {},
    stream = setmetatable({ device = 0 }, { __name = "gpurun.Stream" }),
    builder = setmetatable({}, { __name = "gpurun.GraphBuilder" }),
  }, Session)
  for name, module in pairs(package.loaded) do
    if name:match("^gpurun%.compute%.") then
      self.saved_modules[name] = module
      package.loaded[name] = nil
    end
  end
  self:install()
  self.modules.prebuilt = require("gpurun.compute.prebuilt")
  self.modules.scan = require("gpurun.compute.scan")
  self.modules.reduction = require("gpurun.compute.reduction")
  self.modules.elementwise = require("gpurun.compute.elementwise")
  self.modules.sort = require("gpurun.compute.sort")
  return self
end

return emulated
