-- What the module's parts written in Lua share (compute/, pipeline/): the
-- dtypes as gpurun's one table gives them, what messages call a value's
-- type, C identifiers, and raising at the caller's line.
local gpurun = require("gpurun")

local common = {}

-- dtype -> what the generated code and the checks need of it, from
-- gpurun.dtypes: c (the C type it is stored as), compute (the type the
-- operation sees), header (the one declaring c, or nil), size,
-- compute_size (the bytes of compute: what a reduction's accumulator or a
-- scan's value takes), scalar (the typed-scalar constructor), float, kind,
-- min, max.
common.DTYPES = {}
local names = {}
for index, dtype in ipairs(gpurun.dtypes) do
  common.DTYPES[dtype.name] = {
    c = dtype.c_type, compute = dtype.compute_type, header = dtype.header, size = dtype.size,
    scalar = dtype.scalar, float = dtype.float, kind = dtype.kind, min = dtype.min, max = dtype.max,
  }
  names[index] = dtype.name
end
for _, info in pairs(common.DTYPES) do
  for _, other in pairs(common.DTYPES) do
    if other.c == info.compute then
      info.compute_size = other.size
    end
  end
end
-- The dtypes as one line of text, in gpurun.dtypes' order.
common.DTYPE_NAMES = table.concat(names, ", ")

function common.is_identifier(text)
  return type(text) == "string" and text:match("^[%a_][%w_]*$") ~= nil
end

-- What messages call a value's type: a gpurun type's name ("gpurun.Buffer")
-- or Lua's.
function common.type_name(value)
  local meta = getmetatable(value)
  return type(meta) == "table" and type(meta.__name) == "string" and meta.__name or type(value)
end

-- A value as a message shows it: a number, string or boolean as it is,
-- anything else by its type name, never through its __tostring (which may
-- raise, or return what is not a string).
function common.value_text(value)
  local kind = type(value)
  if kind == "number" or kind == "string" or kind == "boolean" or kind == "nil" then
    return tostring(value)
  end
  return common.type_name(value)
end

-- typed_scalar(value, dtype) -> the typed scalar of dtype for `value`, or
-- nil and why not: gpurun's one rule for storing a number as an element
-- (base/dtype.c's, through the typed scalar's constructor), which
-- Buffer:fill and a launch's checks of numbers follow too.
function common.typed_scalar(value, dtype)
  local ok, scalar = pcall(gpurun[common.DTYPES[dtype].scalar], value)
  if ok then
    return scalar
  end
  local why = tostring(scalar)
  return nil, why:match("^bad argument #1 to '[^']*' %((.*)%)$") or why
end

-- gpurun's own Lua code: the chunks of this library's folder (this file's,
-- wherever it was installed), and the parts compiled into the module, whose
-- chunk names src/module/lua_parts.c gives.
local LIBRARY = debug.getinfo(1, "S").source:match("^(@.*[/\\])common%.lua$") or "@lua/gpurun/"
local BUILTIN = "@lua/gpurun/builtin/"

local function is_gpurun_code(source)
  return source:sub(1, #LIBRARY) == LIBRARY or source:sub(1, #BUILTIN) == BUILTIN
end

-- Raises at the first caller outside gpurun's own Lua code (and the C
-- functions between), so that a message points at the user's line however
-- deep it was found. Every entry point of the module's Lua parts is guarded
-- (gpurun.guard): the error ends any capture in progress on its way out, as
-- every gpurun error does.
function common.raise(message)
  local level = 2
  while true do
    local info = debug.getinfo(level, "S")
    if not info then
      error(message, 0)
    end
    if info.what ~= "C" and not is_gpurun_code(info.source) then
      error(message, level)
    end
    level = level + 1
  end
end

-- Raises "bad argument #n to 'fname' (why)", as gpurun's C functions do.
function common.bad_argument(fname, n, fmt, ...)
  common.raise(("bad argument #%d to '%s' (%s)"):format(n, fname, fmt:format(...)))
end

return common
