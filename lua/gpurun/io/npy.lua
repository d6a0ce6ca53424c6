-- NumPy's .npy format: the header that says an array's dtype and shape,
-- read and written in Lua (gpurun.load and Buffer:save move the data,
-- lua/gpurun/builtin/npy_files.lua). Format versions 1.0, 2.0 and 3.0 are
-- read; 1.0 is written (2.0 when the header needs more than 65535 bytes).
-- Every function returns nil and a message instead of raising, so that the
-- caller says whose error it is.
local npy = {}

local literal = require("gpurun.io.python_literal")
local quoted = require("gpurun.common").quoted

local MAGIC = "\x93NUMPY"
local ALIGN = 64 -- NumPy aligns the data to 64 bytes
-- NumPy's _MAX_HEADER_SIZE: np.load refuses a longer header (in characters,
-- after decoding) unless told to trust the file.
local MAX_HEADER_CHARS = 10000
-- The dimensions of an array: NumPy 2 reads 64 (its NPY_MAXDIMS), NumPy 1
-- only 32, so gpurun reads what NumPy 2 does and writes what both read.
local MAX_READ_DIMS, MAX_WRITE_DIMS = 64, 32
-- The versions NumPy reads: the header length's format, and the header's
-- encoding (Latin-1 in 1.0 and 2.0, UTF-8 in 3.0).
local VERSIONS = {
  ["1.0"] = { length_format = "<I2", latin1 = true },
  ["2.0"] = { length_format = "<I4", latin1 = true },
  ["3.0"] = { length_format = "<I4", latin1 = false },
}

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

-- NumPy's other spellings of its dtypes, as the descr np.dtype() makes of
-- each (then read as any descr is): its names, one-letter codes and kind +
-- size strings. Names that NumPy 2 no longer has (float_, int0, uint0) are
-- left out. ('=' and '|' mean native order: little-endian on every host
-- gpurun runs on.)
local NAMES = {
  half = "<f2", single = "<f4", double = "<f8", float = "<f8", byte = "|i1", ubyte = "|u1",
  short = "<i2", ushort = "<u2", intc = "<i4", uintc = "<u4", int = "<i8", int_ = "<i8",
  intp = "<i8", long = "<i8", longlong = "<i8", uint = "<u8", uintp = "<u8", ulong = "<u8",
  ulonglong = "<u8", csingle = "<c8", cdouble = "<c16", complex = "<c16",
}
for dtype, descr in pairs(DESCRS) do NAMES[dtype] = descr end
local CODES = { e = "<f2", f = "<f4", d = "<f8", b = "|i1", B = "|u1", h = "<i2", H = "<u2",
  i = "<i4", I = "<u4", l = "<i8", q = "<i8", p = "<i8", L = "<u8", Q = "<u8", P = "<u8",
  F = "<c8", D = "<c16" }
local KIND_SIZES = {}
for _, descr in pairs(DESCRS) do KIND_SIZES[descr:sub(2)] = descr end

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

-- dtype(descr) -> gpurun's dtype name ("float32"), or nil and why: every
-- spelling np.dtype reads as one of gpurun's dtypes, little-endian.
function npy.dtype(descr)
  local dtype = DTYPES[descr] or DTYPES[NAMES[descr]]
  if dtype then return dtype end
  if type(descr) ~= "string" then return nil, "the header's descr is not a string" end
  local order, body = descr:match("^([<>=|]?)(.+)$")
  local kind, digits = (body or ""):match("^([fiuc])(%d+)$")
  dtype = DTYPES[CODES[body]] or (kind and DTYPES[KIND_SIZES[kind .. digits:match("^0*(%d+)$")]])
  if dtype and (order ~= ">" or SIZES[dtype] == 1) then return dtype end
  if dtype then
    return nil, ("big-endian data ('%s') is not supported: save it little-endian "
      .. "(a.astype('%s'))"):format(descr, DESCRS[dtype])
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
  if #shape > MAX_WRITE_DIMS then
    return nil, ("the shape has %d dimensions: NumPy 1 reads %d at most"):format(#shape, MAX_WRITE_DIMS)
  end
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

local KEYS = { descr = true, fortran_order = true, shape = true }

-- The shape from the header's value, as a sequence of dimensions.
local function read_shape(value)
  if value.kind ~= "tuple" then return nil, "the header's shape is not a tuple of integers" end
  if #value.items > MAX_READ_DIMS then
    return nil, ("the header's shape has %d dimensions: NumPy reads %d at most"):format(#value.items,
                                                                                      MAX_READ_DIMS)
  end
  local shape = {}
  for i, item in ipairs(value.items) do
    if item.kind ~= "int" then return nil, "the header's shape is not a tuple of integers" end
    if item.too_large then return nil, ("dimension %d of the header's shape is too large"):format(i) end
    if item.value < 0 then
      return nil, ("dimension %d of the header's shape is negative (%d)"):format(i, item.value)
    end
    shape[i] = item.value
  end
  return shape
end

-- The parts of the header's dict once its text is known.
local function parse_dict(text, version)
  local value, why = literal.parse(text, { text_is_latin1 = VERSIONS[version].latin1,
    numpy_filter = version ~= "3.0" })
  if not value then return nil, "the header is not a Python literal: " .. why end
  if value.kind ~= "dict" then return nil, "the header is not a dict" end
  local fields = {}
  for i, key in ipairs(value.keys) do
    if key.kind ~= "str" then return nil, "the header's dict has a key that is not a string" end
    if not KEYS[key.value] then
      return nil, ("the header has the key %s: NumPy's keys are 'descr', 'fortran_order' and 'shape'")
        :format(quoted(key.value))
    end
    fields[key.value] = value.values[i] -- a repeated key: the last wins, as in Python
  end
  for _, key in ipairs({ "descr", "fortran_order", "shape" }) do
    if not fields[key] then return nil, ("the header has no '%s'"):format(key) end
  end
  local descr = fields.descr
  if descr.kind == "list" then return nil, "structured dtypes are not supported" end
  if descr.kind == "tuple" then return nil, "subarray dtypes are not supported" end
  if descr.kind ~= "str" then
    return nil, ("the header's descr is not a dtype string (a %s descr is not supported)"):format(descr.kind)
  end
  local dtype, bad_dtype = npy.dtype(descr.value)
  if not dtype then return nil, bad_dtype end
  local fortran = fields.fortran_order
  if fortran.kind ~= "bool" then return nil, "the header's fortran_order is not True or False" end
  if fortran.value then
    return nil, "Fortran-ordered arrays are not supported: save a C-ordered copy "
      .. "(np.ascontiguousarray(a))"
  end
  local shape, bad_shape = read_shape(fields.shape)
  if not shape then return nil, bad_shape end
  -- NumPy's own limit: the bytes of the dimensions that are not 0 must fit
  -- in its index type (a 0 makes the array empty, not any smaller a claim).
  local bytes, count = SIZES[dtype], 1
  for _, n in ipairs(shape) do
    if n > 0 and bytes > math.maxinteger // n then
      return nil, ("the header's shape %s is too large: it needs more than 2^63 - 1 bytes of %s")
        :format(shape_text(shape), dtype)
    end
    bytes, count = n > 0 and bytes * n or bytes, count * n
  end
  return { descr = descr.value, dtype = dtype, shape = shape, count = count,
    data_bytes = count * SIZES[dtype] }
end

-- The header from read(n), which returns up to n more bytes (nil at the
-- end, or nil and why): nothing is read past the header, and its length
-- is checked against NumPy's cap before it is read. A file is read exactly
-- when NumPy's np.load would read it (the header a Python dict literal,
-- parsed as Python parses it: gpurun.python_literal; NumPy's keys,
-- versions, header size cap and dimension count), within what gpurun
-- holds: C-ordered, little-endian arrays of gpurun's dtypes, with no
-- negative dimension.
local function read_from(read)
  local function bytes(n, what)
    local got, why = read(n)
    if why then return nil, "cannot read it: " .. why end
    got = got or ""
    if #got < n then return nil, ("the header is truncated (the file ends in its %s)"):format(what) end
    return got
  end
  local prefix, why = read(8)
  if why then return nil, "cannot read it: " .. why end
  prefix = prefix or ""
  if prefix:sub(1, 6) ~= MAGIC:sub(1, #prefix) or #prefix == 0 then
    return nil, "not a .npy file (it does not start with \\x93NUMPY)"
  end
  if #prefix < 8 then return nil, "the header is truncated (the file ends in its format version)" end
  local version = ("%d.%d"):format(prefix:byte(7, 8))
  local format = VERSIONS[version]
  if not format then
    return nil, ("unsupported .npy format version %s (1.0, 2.0 and 3.0 are read)"):format(version)
  end
  local length_bytes, short = bytes(string.packsize(format.length_format), "header length")
  if not length_bytes then return nil, short end
  local length = string.unpack(format.length_format, length_bytes)
  local max_bytes = MAX_HEADER_CHARS * (format.latin1 and 1 or 4)
  local function too_long(size)
    return ("the header is %d %s long: NumPy reads headers of %d characters at most (its "
      .. "max_header_size)"):format(size, format.latin1 and "bytes" or "characters", MAX_HEADER_CHARS)
  end
  if length > max_bytes then return nil, too_long(length) end
  local text, truncated = bytes(length, "header")
  if not text then return nil, truncated end
  if not format.latin1 then
    local characters = utf8.len(text)
    if not characters then return nil, "the header is not UTF-8 (format 3.0 says it is)" end
    if characters > MAX_HEADER_CHARS then return nil, too_long(characters) end
  end
  local info, bad = parse_dict(text, version)
  if not info then return nil, bad end
  info.version = version
  info.header_size = #prefix + #length_bytes + length
  return info
end

-- parse(bytes) -> info for the header at the start of bytes, or nil and
-- why. Only the header is read: bytes may hold more, or less than the data.
--
--   local info = assert(npy.parse(bytes))       --> { dtype = "float32", descr = "<f4",
--                                               --    shape = { 3, 4 }, count = 12,
--                                               --    version = "1.0", header_size = 128,
--                                               --    data_bytes = 48 }
function npy.parse(bytes)
  if type(bytes) ~= "string" then
    return nil, ("the .npy bytes must be a string, got %s"):format(type(bytes))
  end
  local at = 1
  return read_from(function(n)
    local part = bytes:sub(at, at + n - 1)
    at = at + #part
    return part
  end)
end

-- read_header(file) -> info (as parse's), with the file positioned at the
-- data; or nil and why. Only the header's bytes are read, so a pipe works
-- too.
function npy.read_header(file)
  if io.type(file) ~= "file" then
    return nil, ("read_header needs an open file, got %s"):format(io.type(file) or type(file))
  end
  return read_from(function(n)
    local part, why = file:read(n)
    if part == nil and why then return nil, why end
    return part
  end)
end

-- data_problem(info, data_bytes) -> nil when data_bytes (what follows the
-- header) hold the array, else why. Bytes past the array are ignored, as
-- NumPy ignores them.
function npy.data_problem(info, data_bytes)
  if data_bytes >= info.data_bytes then return nil end
  return ("truncated: its header says %d %s elements (%d bytes of data), the file has %d")
    :format(info.count, info.dtype, info.data_bytes, data_bytes)
end

npy.SUPPORTED = SUPPORTED
return npy
