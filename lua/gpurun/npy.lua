-- NumPy's .npy format: the header that says an array's dtype and shape,
-- read and written in Lua (gpurun.load and Buffer:save move the data,
-- lua/gpurun/builtin/npy_files.lua). Format versions 1.0, 2.0 and 3.0 are
-- read; 1.0 is written (2.0 when the header needs more than 65535 bytes).
-- Only C-ordered, little-endian arrays of gpurun's dtypes are accepted.
--
--   local npy = require("gpurun.npy")
--   npy.header("float32", { 3, 4 })            --> the bytes before the data
--   local info = assert(npy.parse(bytes))       --> { dtype = "float32", descr = "<f4",
--                                               --    shape = { 3, 4 }, count = 12,
--                                               --    version = "1.0", header_size = 128 }
--   local info, why = npy.read_header(file)     -- from an open file, left at the data
--
-- Every function returns nil and a message instead of raising, so that the
-- caller says whose error it is.
local npy = {}

local MAGIC = "\x93NUMPY"
local ALIGN = 64 -- NumPy aligns the data to 64 bytes

-- gpurun's dtypes by NumPy's little-endian descr, and back, from the one
-- table of dtypes (gpurun.dtypes); a dtype NumPy lacks (bfloat16) has none.
local DESCRS, SIZES, DTYPES, NO_DESCR = {}, {}, {}, {}
local supported = {}
for _, info in ipairs(require("gpurun").dtypes) do
  SIZES[info.name] = info.size
  if info.numpy then
    DESCRS[info.name], DTYPES[info.numpy] = info.numpy, info.name
    supported[#supported + 1] = info.numpy .. " " .. info.name
  else
    NO_DESCR[#NO_DESCR + 1] = info.name
  end
end
-- One byte has no order: NumPy writes "|", but "<" and ">" mean the same.
for _, kind in ipairs({ "i1", "u1" }) do
  DTYPES["<" .. kind], DTYPES[">" .. kind], DTYPES["=" .. kind] = DTYPES["|" .. kind],
    DTYPES["|" .. kind], DTYPES["|" .. kind]
end

local SUPPORTED = table.concat(supported, ", ")
-- What a message says of the dtypes NumPy has no code for.
local NO_NUMPY = ("%s %s no NumPy dtype, so no .npy file holds %s"):format(
  table.concat(NO_DESCR, " and "), #NO_DESCR == 1 and "has" or "have", #NO_DESCR == 1 and "it" or "them")

-- descr(dtype) -> NumPy's descr ("<f4"), or nil and why.
function npy.descr(dtype)
  local descr = DESCRS[dtype]
  if not descr then
    if SIZES[dtype] then
      return nil, ("%s has no NumPy dtype, so no .npy file holds it (convert it to float32 first)")
        :format(dtype)
    end
    return nil, ("no .npy descr for dtype %s"):format(tostring(dtype))
  end
  return descr
end

-- dtype(descr) -> gpurun's dtype name ("float32"), or nil and why.
function npy.dtype(descr)
  local dtype = DTYPES[descr]
  if dtype then return dtype end
  if type(descr) ~= "string" then return nil, "the header's descr is not a string" end
  local order, kind = descr:match("^([<>=|])(.*)$")
  if order == ">" and DTYPES["<" .. kind] then
    return nil, ("big-endian data ('%s') is not supported: save it little-endian "
      .. "(a.astype('<%s'))"):format(descr, kind)
  end
  if order == "=" and DTYPES["<" .. kind] then
    return nil, ("native-order data ('%s') is not supported: save it little-endian "
      .. "(a.astype('<%s'))"):format(descr, kind)
  end
  return nil, ("dtype '%s' is not supported (gpurun reads %s; %s)"):format(descr, SUPPORTED, NO_NUMPY)
end

-- itemsize(dtype) -> bytes per element.
function npy.itemsize(dtype)
  return SIZES[dtype]
end

local function shape_text(shape)
  if #shape == 1 then return ("(%d,)"):format(shape[1]) end
  local parts = {}
  for i, n in ipairs(shape) do parts[i] = tostring(n) end
  return "(" .. table.concat(parts, ", ") .. ")"
end

-- count(shape) -> the number of elements, or nil and why (a dimension that
-- is not a non-negative integer, or a product past the integers).
function npy.count(shape)
  local count = 1
  for i, n in ipairs(shape) do
    if math.type(n) ~= "integer" or n < 0 then
      return nil, ("dimension %d of the shape is not a non-negative integer"):format(i)
    end
    if n > 0 and count > math.maxinteger // n then return nil, "the shape holds too many elements" end
    count = count * n
  end
  return count
end

-- header(dtype, shape) -> the bytes of a .npy file before its data, or nil
-- and why. shape is a sequence of dimensions, C order.
function npy.header(dtype, shape)
  local descr, why = npy.descr(dtype)
  if not descr then return nil, why end
  local _, bad = npy.count(shape)
  if bad then return nil, bad end
  local dict = ("{'descr': '%s', 'fortran_order': False, 'shape': %s, }"):format(descr, shape_text(shape))
  for version, length_format in ipairs({ "<I2", "<I4" }) do
    local prefix_size = #MAGIC + 2 + string.packsize(length_format)
    local length = #dict + 1
    local padding = ALIGN - (prefix_size + length) % ALIGN
    if length + padding < 1 << (8 * string.packsize(length_format)) then
      return MAGIC .. string.char(version, 0) .. string.pack(length_format, length + padding)
        .. dict .. string.rep(" ", padding) .. "\n"
    end
  end
  return nil, "the shape is too long for a .npy header"
end

-- The value of `key` in the header's dict literal, as text; nil if absent.
local function field(text, key, value_pattern)
  return text:match("['\"]" .. key .. "['\"]%s*:%s*" .. value_pattern)
end

local function parse_shape(text)
  local inside = field(text, "shape", "(%b())")
  if not inside then return nil, "the header has no shape tuple" end
  local shape = {}
  for item in inside:sub(2, -2):gmatch("[^,]+") do
    local digits = item:match("^%s*(%d+)L?%s*$")
    if not digits then
      if item:match("%S") then return nil, ("the header's shape %s is not a tuple of integers"):format(inside) end
    else
      local n = math.tointeger(tonumber(digits))
      if not n then return nil, ("the header's shape %s is too large"):format(inside) end
      shape[#shape + 1] = n
    end
  end
  return shape
end

-- The parts of the header's dict once its text is known.
local function parse_dict(text)
  if not text:match("^%s*{") then return nil, "the header is not a dict" end
  local descr = field(text, "descr", "'([^']*)'") or field(text, "descr", '"([^"]*)"')
  if not descr then
    if field(text, "descr", "%[") then return nil, "structured dtypes are not supported" end
    return nil, "the header has no descr"
  end
  local dtype, why = npy.dtype(descr)
  if not dtype then return nil, why end
  local fortran = field(text, "fortran_order", "(%a+)")
  if fortran == "True" then
    return nil, "Fortran-ordered arrays are not supported: save a C-ordered copy "
      .. "(np.ascontiguousarray(a))"
  elseif fortran ~= "False" then
    return nil, "the header has no fortran_order False or True"
  end
  local shape, bad = parse_shape(text)
  if not shape then return nil, bad end
  local count, too_many = npy.count(shape)
  if not count then return nil, too_many end
  return { descr = descr, dtype = dtype, shape = shape, count = count }
end

-- The size of the header whose first bytes are `prefix` (at least 12 of
-- them, or the whole file), and its version, or nil and why.
local function header_size(prefix)
  if #prefix < 10 or prefix:sub(1, 6) ~= MAGIC then
    return nil, "not a .npy file (it does not start with \\x93NUMPY)"
  end
  local major, minor = prefix:byte(7, 8)
  local version = ("%d.%d"):format(major, minor)
  if major == 1 then
    return 10 + string.unpack("<I2", prefix, 9), version
  elseif major == 2 or major == 3 then
    if #prefix < 12 then return nil, "the header is truncated" end
    return 12 + string.unpack("<I4", prefix, 9), version
  end
  return nil, ("unsupported .npy format version %s (1.0, 2.0 and 3.0 are read)"):format(version)
end

-- parse(bytes) -> info (see above) for the header at the start of bytes,
-- or nil and why. Only the header is read: bytes may hold more, or less
-- than the data.
function npy.parse(bytes)
  local size, version = header_size(bytes)
  if not size then return nil, version end
  if #bytes < size then return nil, "the header is truncated" end
  local start = bytes:byte(7) == 1 and 11 or 13
  local info, why = parse_dict(bytes:sub(start, size))
  if not info then return nil, why end
  info.version = version
  info.header_size = size
  return info
end

-- read_header(file) -> info, with the file positioned at the data; or nil
-- and why.
function npy.read_header(file)
  local start = file:seek()
  local prefix = file:read(12) or ""
  local size, version = header_size(prefix)
  if not size then return nil, version end
  local rest = size > #prefix and file:read(size - #prefix) or ""
  local info, why = npy.parse(prefix .. rest)
  if info then file:seek("set", start + info.header_size) end
  return info, why
end

npy.SUPPORTED = SUPPORTED
return npy
