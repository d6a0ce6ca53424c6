-- What the module's parts written in Lua share (compute/, pipeline/): the
-- dtypes as gpurun's one table gives them, what messages call a value's
-- type and how they show a value, C identifiers, and raising at the
-- caller's line.
local gpurun = require("gpurun")

local common = {}

-- dtype -> what the generated code and the checks need of it, from
-- gpurun.dtypes: c (the C type it is stored as), compute (the type the
-- operation sees), header (the one declaring c, or nil), size,
-- compute_size (the bytes of compute: what a reduction's accumulator or a
-- scan's value takes), scalar (the typed-scalar constructor), float, kind,
-- min, max, digits (a float's significant bits).
common.DTYPES = {}
local names, real_names = {}, {}
for index, dtype in ipairs(gpurun.dtypes) do
  if dtype.kind ~= "complex" then real_names[#real_names + 1] = dtype.name end
  common.DTYPES[dtype.name] = {
    c = dtype.c_type, compute = dtype.compute_type, header = dtype.header, size = dtype.size,
    scalar = dtype.scalar, float = dtype.float, kind = dtype.kind, min = dtype.min, max = dtype.max,
    digits = dtype.digits,
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
-- Those of them generated kernels take: all but the complex ones.
common.REAL_DTYPE_NAMES = table.concat(real_names, ", ")

function common.is_identifier(text)
  return type(text) == "string" and text:match("^[%a_][%w_]*$") ~= nil
end

-- What the Lua parts read of a gpurun object, by type: pairs of a field
-- ("#": the length) and what it must be ("integer", "string", or "dtype":
-- a name in DTYPES), in the order they are checked.
local READ_FIELDS = {
  ["gpurun.Buffer"] = { "ptr", "integer", "#", "integer", "device", "integer", "dtype", "dtype" },
  ["gpurun.PinnedBuffer"] = { "ptr", "integer", "#", "integer", "dtype", "dtype" },
  ["gpurun.Scalar"] = { "dtype", "dtype" },
  ["gpurun.Stream"] = { "device", "integer" },
  ["gpurun.Kernel"] = { "name", "string", "num_params", "integer" },
  ["gpurun.CsrMatrix"] = { "rows", "integer", "cols", "integer", "nnz", "integer", "device",
                           "integer", "dtype", "dtype" },
}
local NO_FIELDS = {}

-- The position of the field fields_fit read last: what failed, when the
-- read raised.
local reading = 0

local function field_of(value, key)
  if key == "#" then return #value end
  return value[key]
end

-- The position in `fields` of the first field of `value` that is not what
-- it must be, or nil. (No closure: the specs' stand-ins pass here on every
-- launch they count allocations of.)
local function fields_fit(value, fields)
  for i = 1, #fields, 2 do
    reading = i
    local key, kind = fields[i], fields[i + 1]
    local field = field_of(value, key)
    local fits
    if kind == "integer" then
      fits = math.type(field) == "integer"
    elseif kind == "dtype" then
      fits = type(field) == "string" and common.DTYPES[field] ~= nil
    else
      fits = type(field) == kind
    end
    if not fits then return i end
  end
  return nil
end

-- The gpurun type a table claims by its metatable's __name, or nil.
local function claimed_name(value)
  local meta = getmetatable(value)
  local name = type(meta) == "table" and rawget(meta, "__name")
  return type(name) == "string" and name or nil
end

-- Why a table that claims a gpurun type's name does not read as one ("its
-- ptr is nil"), or nil when it does: a stand-in (the specs' GPUs made of
-- Lua) does; a fake (a lying __name, an __index or __len that raises) does
-- not, and is refused as what it is instead of failing inside. The fake's
-- own values and errors are never shown.
function common.fake_problem(value)
  local name = claimed_name(value)
  if type(value) ~= "table" or not name then return nil end
  local fields = READ_FIELDS[name] or NO_FIELDS
  local ok, bad = pcall(fields_fit, value, fields)
  if ok and not bad then return nil end
  local key = fields[ok and bad or reading]
  local read, field = pcall(field_of, value, key)
  key = key == "#" and "length" or key
  if not (ok and read) then return ("its %s cannot be read"):format(key) end
  return ("its %s is %s"):format(key, common.quoted(field))
end

-- Whether `value` is a table with no metatable: what the Lua parts take
-- for an option table or a list, reading it with no metamethod run (a
-- proxy's or a fake's __index, __len or __pairs never runs inside a
-- check). Other tables are refused as "a table with a metatable".
function common.is_plain_table(value)
  return type(value) == "table" and getmetatable(value) == nil
end

-- What messages call a value's type: a gpurun type's name ("gpurun.Buffer")
-- or Lua's; "table named gpurun.Buffer" for a table that claims the name
-- but does not read as one (common.fake_problem says why).
function common.type_name(value)
  local name = claimed_name(value)
  if not name then return type(value) end
  if type(value) == "table" then
    local ok, bad = pcall(fields_fit, value, READ_FIELDS[name] or NO_FIELDS)
    if not ok or bad then return "table named " .. name end
  end
  return name
end

-- Bytes that are not printable ASCII, as \xNN: one line, and no cut
-- through a UTF-8 sequence at the cap.
local function escaped(text)
  return (text:gsub("[^\32-\126]", function(c) return ("\\x%02X"):format(c:byte()) end))
end
local MAX_BYTES, HEAD_BYTES, TAIL_BYTES = 60, 40, 12

-- How a message shows a value the caller gave, the one home for it (public
-- as gpurun.quoted): a string in quotes, escaped, and past 60 bytes only
-- its head and tail with its length; a number as its digits; anything else
-- by its type name ("a table", "a gpurun.Buffer"), never through its
-- metamethods. So no message repeats a huge input, breaks its line, or runs
-- a __tostring that raises or returns a table.
function common.quoted(value)
  local kind = type(value)
  if kind == "string" then
    if #value <= MAX_BYTES then return "'" .. escaped(value) .. "'" end
    return ("'%s...%s' (%d bytes)"):format(escaped(value:sub(1, HEAD_BYTES)),
                                          escaped(value:sub(-TAIL_BYTES)), #value)
  elseif kind == "number" then
    if math.type(value) == "integer" then return ("%d"):format(value) end
    return ("%.14g"):format(value)
  elseif kind == "nil" or kind == "boolean" then
    return kind == "nil" and "nil" or (value and "true" or "false")
  end
  return "a " .. common.type_name(value)
end

-- to_integer(text [, minimum = 1]) -> the integer the text spells in
-- plain decimal digits (blanks around it allowed), or nil and why not:
-- the one rule for a count typed on a command line (gpurun.args's
-- to_integer, gpurun.bench's --sizes).
function common.to_integer(text, minimum)
  minimum = minimum or 1
  local kind = minimum == 1 and "a positive integer"
    or minimum == 0 and "a non-negative integer"
    or ("an integer >= " .. minimum)
  local digits = type(text) == "string" and text:match("^%s*(%+?%d+)%s*$")
  local value = digits and math.tointeger(tonumber(digits))
  if not value then
    return nil, ("expected %s, got %s%s"):format(kind, common.quoted(text), digits and " (too large)" or "")
  end
  if value < minimum then
    return nil, ("expected %s, got %s"):format(kind, common.quoted(text))
  end
  return value
end

-- A caught error as a message repeats it: a string without the position
-- Lua put before it; anything else as common.quoted shows it.
function common.error_text(err)
  if type(err) == "string" then return (err:gsub("^[^\n]-:%d+: ", "")) end
  return common.quoted(err)
end

-- typed_scalar(value, dtype) -> the typed scalar of dtype for `value`, or
-- nil and why not: gpurun's one rule for storing a number as an element
-- (base/dtype.c's, through the typed scalar's constructor), which
-- Buffer:fill and a launch's checks of numbers follow too.
function common.typed_scalar(value, dtype)
  local make = common.DTYPES[dtype].scalar
  if make == nil then
    return nil, ("%s has no typed scalar: its elements are pairs {re, im}"):format(dtype)
  end
  local ok, scalar = pcall(gpurun[make], value)
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
