-- NumPy .npy files: the header (gpurun.npy, no GPU needed), gpurun.load and
-- Buffer:save, and a round trip with NumPy itself (spec/support/npy_numpy.py,
-- run with $GPURUN_PYTHON or python3, when it has numpy).
local gpurun = require("gpurun")
local npy = require("gpurun.npy")
local shell = require("gpurun.shell")

local DTYPES = { "float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
  "float16" }
local DESCRS = { float32 = "<f4", float64 = "<f8", int8 = "|i1", uint8 = "|u1", int16 = "<i2", uint16 = "<u2",
  int32 = "<i4", uint32 = "<u4", int64 = "<i8", uint64 = "<u8", float16 = "<f2" }

local expect = require("spec.support.expect")
local error_of = expect.error_of
local assert_contains = expect.contains

-- A header laid out as NumPy's format description says: magic, version,
-- little-endian length, the dict, spaces and a newline to a multiple of 64.
local function numpy_header(dict, major)
  major = major or 1
  local length_format = major == 1 and "<I2" or "<I4"
  local prefix = 6 + 2 + string.packsize(length_format)
  local padding = 64 - (prefix + #dict + 1) % 64
  return "\x93NUMPY" .. string.char(major, 0) .. string.pack(length_format, #dict + 1 + padding)
    .. dict .. string.rep(" ", padding) .. "\n"
end

local function write_file(path, bytes)
  local file = assert(io.open(path, "wb"))
  file:write(bytes)
  file:close()
end

describe("gpurun.npy", function()
  it("writes headers byte for byte as NumPy does", function()
    assert.are.equal(numpy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"),
      npy.header("float32", { 3 }))
    assert.are.equal(numpy_header("{'descr': '<f8', 'fortran_order': False, 'shape': (), }"),
      npy.header("float64", {}))
    assert.are.equal(numpy_header("{'descr': '<i2', 'fortran_order': False, 'shape': (2, 3, 4), }"),
      npy.header("int16", { 2, 3, 4 }))
    for _, dtype in ipairs(DTYPES) do
      local header = npy.header(dtype, { 5, 7 })
      assert.are.equal(0, #header % 64)
      assert.are.equal("\n", header:sub(-1))
      local info = assert(npy.parse(header))
      assert.are.same({ dtype = dtype, descr = DESCRS[dtype], shape = { 5, 7 }, count = 35,
        version = "1.0", header_size = #header, data_bytes = 35 * npy.itemsize(dtype) }, info)
      assert.are.equal(DESCRS[dtype], npy.descr(dtype))
      assert.are.equal(dtype, npy.dtype(DESCRS[dtype]))
    end
    local dims = {}
    for i = 1, 32 do dims[i] = 1 end
    assert.are.equal(32, #assert(npy.parse(npy.header("uint8", dims))).shape)
    dims[33] = 1 -- NumPy 1 reads 32 dimensions at most: gpurun writes no file it would refuse
    assert.are.same({ nil, "the shape has 33 dimensions: NumPy 1 reads 32 at most" }, { npy.header("uint8", dims) })
  end)

  it("reads format 2.0 and 3.0 headers, NumPy's spare spaces, double quotes and Python 2 longs", function()
    local dict = "{'descr': '<u4', 'fortran_order': False, 'shape': (10,), }"
    for _, major in ipairs({ 2, 3 }) do
      local info = assert(npy.parse(numpy_header(dict, major)))
      assert.are.equal(("%d.0"):format(major), info.version)
      assert.are.equal("uint32", info.dtype)
      assert.are.same({ 10 }, info.shape)
    end
    local spaced = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }" .. string.rep(" ", 20)
    assert.are.same({ 3, 4 }, assert(npy.parse(numpy_header(spaced))).shape)
    local reordered = '{"shape": (2L, 3L), "fortran_order": False, "descr": "<i8"}'
    local info = assert(npy.parse(numpy_header(reordered)))
    assert.are.same({ 2, 3 }, info.shape)
    assert.are.equal("int64", info.dtype)
    assert.are.equal("int8", assert(npy.parse(numpy_header("{'descr': '<i1', 'fortran_order': False, 'shape': (1,), }"))).dtype)
  end)

  it("says what is wrong with a header it cannot read", function()
    local function why(bytes)
      local info, message = npy.parse(bytes)
      assert.is_nil(info)
      return message
    end
    local function dict(descr, fortran, shape)
      return numpy_header(("{'descr': %s, 'fortran_order': %s, 'shape': %s, }"):format(descr, fortran, shape))
    end
    assert_contains("not a .npy file (it does not start with \\x93NUMPY)", why("PK\3\4 a zip file"))
    assert_contains("not a .npy file", why(""))
    assert_contains("unsupported .npy format version 4.0 (1.0, 2.0 and 3.0 are read)",
      why("\x93NUMPY\4\0\0\0\0\0"))
    assert_contains("the header is truncated", why(dict("'<f4'", "False", "(3,)"):sub(1, 60)))
    assert_contains("big-endian data ('>f4') is not supported: save it little-endian (a.astype('<f4'))",
      why(dict("'>f4'", "False", "(3,)")))
    assert_contains("big-endian data ('>i8') is not supported", why(dict("'>i8'", "False", "(3,)")))
    assert_contains("Fortran-ordered arrays are not supported: save a C-ordered copy (np.ascontiguousarray(a))",
      why(dict("'<f4'", "True", "(3, 4)")))
    for _, descr in ipairs({ "|b1", "<c32", "|O", "<U10", "|S5", "<M8[ns]", "|V2" }) do
      assert_contains(("dtype '%s' is not supported (gpurun reads <f4 float32, <f8 float64"):format(descr),
        why(dict("'" .. descr .. "'", "False", "(3,)")))
      assert_contains("bfloat16 has no NumPy dtype, so no .npy file holds it",
        why(dict("'" .. descr .. "'", "False", "(3,)")))
    end
    assert_contains("big-endian data ('>f2') is not supported", why(dict("'>f2'", "False", "(3,)")))
    for _, call in ipairs({ { npy.descr, "bfloat16" }, { npy.header, "bfloat16", { 3 } } }) do
      local result, message = call[1](table.unpack(call, 2))
      assert.is_nil(result)
      assert_contains("bfloat16 has no NumPy dtype, so no .npy file holds it (convert it to float32 first)", message)
    end
    assert_contains("structured dtypes are not supported", why(dict("[('x', '<f4')]", "False", "(3,)")))
    assert_contains("the header has no 'shape'", why(numpy_header("{'descr': '<f4', 'fortran_order': False, }")))
    assert_contains("the header is not a Python literal: the name x at character 55 is not a literal",
      why(dict("'<f4'", "False", "(3, x)")))
    assert_contains("the header's shape is not a tuple of integers", why(dict("'<f4'", "False", "(3, 4.0)")))
    assert_contains("dimension 1 of the header's shape is negative (-3)", why(dict("'<f4'", "False", "(-3,)")))
    assert_contains("the header's fortran_order is not True or False", why(dict("'<f4'", "0", "(3,)")))
    assert_contains("the header's shape (4294967296, 4294967296) is too large: it needs more than 2^63 - 1 bytes of float32",
      why(dict("'<f4'", "False", "(4294967296, 4294967296)")))
    assert_contains("the header is not a dict", why(numpy_header("['descr', '<f4']")))
    assert.are.same({ nil, "no .npy descr for dtype float8" }, { npy.header("float8", { 3 }) })
  end)

  it("reads the header as NumPy does: Python's dict literal, its keys, versions and size cap", function()
    local function read(dict, major)
      local info, why = npy.parse(numpy_header(dict, major))
      return info or why
    end
    local good = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"
    -- A repeated key: the last wins, as in a Python dict literal.
    assert.are.same({ 5 }, read("{'descr': '<f4', 'shape': (2,), 'fortran_order': False, 'shape': (5,)}").shape)
    assert.are.equal("float64", read("{'descr': '<f4', 'descr': '<f8', 'fortran_order': False, 'shape': (1,)}").dtype)
    -- 'shape' inside a string or a comment is text, not the shape.
    assert_contains([[the header has the key 'x 'shape': (9,)': NumPy's keys are]],
      read([[{'descr': '<f4', 'x \'shape\': (9,)': 1, 'fortran_order': False, 'shape': (3,)}]]))
    assert.are.same({ 3 }, read([[{'descr': "<f4", 'fortran_order': False, "shape": (3,)} # 'shape': (9,)]]).shape)
    -- Quotes, escapes, concatenation and Python's integers.
    local info = read([[{u'de' "scr": '\x3cf\064', r'fortran_order': (False), '''shape''': (0x2, 0o3, 0b1, 1_0)}]])
    assert.are.same({ "float32", { 2, 3, 1, 10 } }, { info.dtype, info.shape })
    assert.are.same({ 2, 3 }, read("{'descr': '<i8', 'fortran_order': False, 'shape': (2L, 3L)}").shape)
    assert_contains("invalid number", read("{'descr': '<i8', 'fortran_order': False, 'shape': (2L, 3L)}", 3))
    -- Garbage between keys, a doubled comma, a missing one, an unknown key.
    assert_contains("the header is not a Python literal", read("{'descr': '<f4' junk, 'fortran_order': False, 'shape': (3,)}"))
    assert_contains("the header is not a Python literal", read("{'descr': '<f4',, 'fortran_order': False, 'shape': (3,)}"))
    assert_contains("the header is not a Python literal", read("{'descr': '<f4' 'fortran_order': False, 'shape': (3,)}"))
    assert_contains("the header is not a Python literal", read(good .. "; x"))
    assert_contains("the header has the key 'order': NumPy's keys are 'descr', 'fortran_order' and 'shape'",
      read("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'order': 'C'}"))
    assert_contains("the header has no 'fortran_order'", read("{'descr': '<f4', 'shape': (3,)}"))
    assert.are.equal("float32", read((good:gsub(", }", ",}"))).dtype) -- one trailing comma is Python's
    -- NumPy's spellings of a dtype; True is not a dimension.
    for _, descr in ipairs({ "f4", "=f4", "|f4", "<f", "f", "float32", "single" }) do
      assert.are.equal("float32", read(("{'descr': '%s', 'fortran_order': False, 'shape': (3,)}"):format(descr)).dtype)
    end
    assert_contains("the header's shape is not a tuple of integers",
      read("{'descr': '<f4', 'fortran_order': False, 'shape': (True,)}"))
    -- Versions: 1.0, 2.0 and 3.0 only.
    for _, version in ipairs({ "\1\1", "\2\7", "\3\1", "\0\0" }) do
      local bytes = numpy_header(good, 2):gsub("^(\x93NUMPY)..", "%1" .. version)
      assert_contains("unsupported .npy format version", select(2, npy.parse(bytes)))
    end
    -- NumPy's header size cap, checked before the header is read: a
    -- 12-byte file that claims a 4 GiB header.
    assert.are.same({ nil, "the header is 4294967295 bytes long: NumPy reads headers of 10000 characters at "
      .. "most (its max_header_size)" }, { npy.parse("\x93NUMPY\2\0\xff\xff\xff\xff") })
    assert_contains("the header is 10102 bytes long", select(2, npy.parse(numpy_header(good .. string.rep(" ", 9990)))))
    -- Sizes past 64 bits, and a product past them.
    assert_contains("the header's shape (4611686018427387905,) is too large: it needs more than 2^63 - 1 bytes of "
      .. "float32", read((good:gsub("%(3,%)", "(4611686018427387905,)"))))
    assert_contains("dimension 1 of the header's shape is too large",
      read((good:gsub("%(3,%)", "(18446744073709551616,)"))))
    -- Not a string: nil and why, never an error.
    assert.are.same({ nil, "the .npy bytes must be a string, got nil" }, { npy.parse(nil) })
    assert.are.same({ nil, "the .npy bytes must be a string, got table" }, { npy.parse({}) })
    assert.are.same({ nil, "read_header needs an open file, got nil" }, { npy.read_header(nil) })
  end)

  it("refuses a header nested deeper than Python's 200 levels, as np.load does", function()
    -- The dict is the first level: a shape in 199 parentheses is 200 deep.
    local function nested(depth)
      return ("{'descr': '<f4', 'fortran_order': False, 'shape': %s3,%s, }")
        :format(("("):rep(depth - 1), (")"):rep(depth - 1))
    end
    assert.are.same({ 3 }, assert(npy.parse(numpy_header(nested(200)))).shape)
    for _, major in ipairs({ 1, 2, 3 }) do
      assert.are.same({ nil, "the header is not a Python literal: too many nested parentheses at character "
        .. "250 (Python reads 200 levels at most)" }, { npy.parse(numpy_header(nested(201), major)) })
    end
  end)

  it("reads a header from a file and leaves it at the data", function()
    local path = os.tmpname()
    write_file(path, numpy_header("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }")
      .. string.pack("<i4<i4", 7, -7))
    local file = assert(io.open(path, "rb"))
    local info = assert(npy.read_header(file))
    assert.are.equal(info.header_size, file:seek())
    local first, second = string.unpack("<i4<i4", file:read("a"))
    assert.are.same({ 7, -7 }, { first, second })
    file:close()
    os.remove(path)
  end)
end)

describe("gpurun.load and Buffer:save without a device", function()
  local path
  before_each(function() path = os.tmpname() end)
  after_each(function() os.remove(path) end)

  it("check the file before allocating", function()
    assert_contains("bad argument #1 to 'gpurun.load' (path string expected, got number)", error_of(gpurun.load, 5))
    assert_contains("bad argument #1 to 'gpurun.load' (path string expected, got no value)", error_of(gpurun.load))
    assert_contains("bad argument #1 to 'gpurun.load' (path contains a NUL byte)", error_of(gpurun.load, "a\0b"))
    assert_contains("gpurun.load: cannot open /nonexistent/x.npy: No such file or directory",
      error_of(gpurun.load, "/nonexistent/x.npy"))
    write_file(path, "not numpy at all")
    assert_contains("gpurun.load: " .. path .. ": not a .npy file", error_of(gpurun.load, path))
    local header = numpy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }")
    write_file(path, header .. string.pack("<ff", 1, 2))
    assert_contains(("gpurun.load: %s is truncated: its header says 3 float32 elements (12 bytes of data), "
      .. "the file has 8"):format(path), error_of(gpurun.load, path))
    write_file(path, numpy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }"))
    assert_contains("holds no elements (shape {0, 3}): a gpurun.Buffer holds at least one",
      error_of(gpurun.load, path))
    write_file(path, numpy_header("{'descr': '>f8', 'fortran_order': False, 'shape': (3,), }") .. string.rep("\0", 24))
    assert_contains(("gpurun.load: %s: big-endian data ('>f8') is not supported"):format(path),
      error_of(gpurun.load, path))
    if gpurun.device_count() == 0 then
      write_file(path, header .. string.pack("<fff", 1, 2, 3)) -- a good file: now it needs a device
      assert_contains("the CUDA driver could not be loaded", error_of(gpurun.load, path))
    end
  end)

  it("refuse hostile files with one line naming them, before allocating", function()
    -- 12 bytes whose header length says 4 GiB.
    write_file(path, "\x93NUMPY\2\0\xff\xff\xff\xff")
    assert.are.equal(("gpurun.load: %s: the header is 4294967295 bytes long: NumPy reads headers of 10000 "
      .. "characters at most (its max_header_size)"):format(path), error_of(gpurun.load, path):match("gpurun%.load: .*"))
    -- A count whose bytes wrap a 64-bit integer, with 4 bytes of data.
    write_file(path, numpy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387905,), }")
      .. "\0\0\0\0")
    assert_contains(("gpurun.load: %s: the header's shape (4611686018427387905,) is too large"):format(path),
      error_of(gpurun.load, path))
    write_file(path, numpy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1152921504606846976,), }")
      .. "\0\0\0\0")
    assert_contains(("gpurun.load: %s is truncated: its header says 1152921504606846976 float32 elements "
      .. "(4611686018427387904 bytes of data), the file has 4"):format(path), error_of(gpurun.load, path))
    local directory = os.tmpname()
    os.remove(directory)
    assert(os.execute("mkdir " .. shell.quote(directory)))
    assert_contains(("gpurun.load: %s: cannot read it: Is a directory"):format(directory), error_of(gpurun.load, directory))
    os.remove(directory)
  end)

  it("read pipes, FIFOs and /dev/stdin as streams", function()
    local process = require("spec.support.process")
    local header = numpy_header("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }")
    write_file(path, header .. string.pack("<i4<i4", 7, -7))
    local script = "local g = require('gpurun'); if g.device_count() > 0 then g.Device(0):set_current() end; "
      .. "local b = g.load(%q); print(b[1], b[2])"
    -- Through a pipe into /dev/stdin, and through a FIFO with a writer.
    local piped = process.run(("(cat %s | %s -e %s)"):format(shell.quote(path), process.gpurun_command(),
      shell.quote(script:format("/dev/stdin"))))
    local fifo = path .. ".fifo"
    assert(os.execute("mkfifo " .. shell.quote(fifo)))
    local through_fifo = process.run(("(cat %s > %s &) ; %s -e %s"):format(shell.quote(path), shell.quote(fifo),
      process.gpurun_command(), shell.quote(script:format(fifo))))
    os.remove(fifo)
    for _, result in ipairs({ piped, through_fifo }) do
      if gpurun.device_count() > 0 then
        assert.are.equal("7\t-7\n", result.stdout, result.stderr)
      else -- the header was read: only the device is missing
        assert_contains("the CUDA driver could not be loaded", result.stderr)
        assert.is_nil(result.stderr:find("attempt to", 1, true), result.stderr)
      end
    end
    -- A bad header through a pipe is named as the path given.
    write_file(path, "\x93NUMPY\2\0\xff\xff\xff\xff")
    local bad = process.run(("(cat %s | %s -e %s)"):format(shell.quote(path), process.gpurun_command(),
      shell.quote(script:format("/dev/stdin"))))
    assert_contains("gpurun.load: /dev/stdin: the header is 4294967295 bytes long", bad.stderr)
    assert.are.equal(1, bad.code)
  end)

  it("refuse a self that is not a Buffer", function()
    local save = debug.getregistry()["gpurun.Buffer"].methods.save
    assert_contains("calling 'Buffer:save' on bad self (gpurun.Buffer expected, got number)", error_of(save, 5, path))
    assert_contains("calling 'Buffer:save' on bad self (gpurun.Buffer expected, got no value)", error_of(save))
  end)
end)

describe("gpurun.load's dtypes, as docs/api.md gives them", function()
  it("refuse each dtype the docs name as refused, and read those they name as read", function()
    local file = assert(io.open("docs/api.md"))
    local entry = assert(file:read("a"):match("\n%- `gpurun%.load%(path%)`.-\n%- "), "api.md has no gpurun.load entry")
    file:close()
    local refused = assert(entry:gsub("%s*\n%s*", " "):match("another dtype %((.-)%)"),
      "api.md's gpurun.load entry names no refused dtype")
    local path <close> = setmetatable({ os.tmpname() }, { __close = function(t) os.remove(t[1]) end })
    -- "another dtype (`'<c8'`, `'|b1'`; float16's `'<f2'` is read)"
    local refused_part, read_part = refused:match("^([^;]*);?(.*)$")
    local codes = 0
    for code in refused_part:gmatch("`'([^']+)'`") do
      codes = codes + 1
      assert.is_nil(npy.dtype(code), code)
      write_file(path[1], numpy_header(("{'descr': '%s', 'fortran_order': False, 'shape': (2,), }"):format(code))
        .. string.rep("\0", 32))
      assert_contains(("dtype '%s' is not supported"):format(code), error_of(gpurun.load, path[1]))
    end
    for code in read_part:gmatch("`'([^']+)'`") do
      assert.is_not_nil(npy.dtype(code), code)
    end
    assert.is_true(codes > 0)
    for _, info in ipairs(gpurun.dtypes) do
      if info.numpy then assert.are.equal(info.name, npy.dtype(info.numpy), info.numpy) end
    end
  end)
end)

describe("gpurun.load and Buffer:save", function()
  local directory
  before_each(function()
    gpurun.Device(0):set_current()
    directory = os.tmpname()
    os.remove(directory)
    assert(os.execute("mkdir " .. shell.quote(directory)))
  end)
  after_each(function()
    os.execute("rm -rf " .. shell.quote(directory))
  end)

  -- The values npy_numpy.py's expected() makes, for 1000 elements.
  local function expected(dtype)
    local values = {}
    for i = 0, 999 do
      if dtype:find("^float") then values[i + 1] = i * 0.25 - 3
      elseif dtype:find("^int") then values[i + 1] = i % 100 - 50
      else values[i + 1] = i % 100 end
    end
    return values
  end

  it("round-trip every dtype and shape, writing NumPy's header #gpu", function()
    for _, dtype in ipairs(DTYPES) do
      local buffer <close> = gpurun.array(expected(dtype), dtype)
      local path = directory .. "/" .. dtype .. ".npy"
      assert.are.equal(buffer, buffer:save(path, { 10, 100 }))
      local file = assert(io.open(path, "rb"))
      local bytes = file:read("a")
      file:close()
      local header = npy.header(dtype, { 10, 100 })
      assert.are.equal(header .. buffer:to_bytes(), bytes)
      local loaded <close>, shape = gpurun.load(path)
      assert.are.same({ 10, 100 }, shape)
      assert.are.equal(dtype, loaded.dtype)
      assert.are.same(expected(dtype), loaded:to_table())
    end
    local scalar <close> = gpurun.full(1, 2.5, "float64")
    scalar:save(directory .. "/scalar.npy", {})
    local back <close>, shape = gpurun.load(directory .. "/scalar.npy")
    assert.are.same({}, shape)
    assert.are.equal(2.5, back[1])
    local flat <close> = gpurun.zeros(7, "int8")
    flat:save(directory .. "/flat.npy")
    assert.are.same({ 7 }, select(2, gpurun.load(directory .. "/flat.npy")))
    local brain <close> = gpurun.zeros(4, "bfloat16")
    local no_file = directory .. "/bfloat16.npy"
    assert_contains("Buffer:save: bfloat16 has no NumPy dtype, so no .npy file holds it",
      error_of(brain.save, brain, no_file))
    assert.is_nil(io.open(no_file, "rb"))
  end)

  it("move large arrays through pinned staging in chunks #gpu", function()
    local n = 3 * (1 << 22) + 5 -- about 48 MiB of float32: six 8 MiB chunks and a bit
    local buffer <close> = gpurun.default_rng(3):random(n, "float32")
    local path = directory .. "/large.npy"
    buffer:save(path)
    local back <close> = gpurun.load(path)
    assert.are.equal(n, #back)
    assert.is_true(gpurun.allclose(back, buffer, 0, 0))
  end)

  it("refuse shapes that do not fit and paths they cannot write, leaving no file #gpu", function()
    local buffer <close> = gpurun.zeros(12, "float32")
    local path = directory .. "/bad.npy"
    assert_contains("bad argument #2 to 'Buffer:save' (shape {5, 2} holds 10 elements, the buffer 12)",
      error_of(buffer.save, buffer, path, { 5, 2 }))
    assert_contains("bad argument #2 to 'Buffer:save' (dimension 2 of the shape is not a non-negative integer)",
      error_of(buffer.save, buffer, path, { 3, 4.5 }))
    assert_contains("bad argument #2 to 'Buffer:save' (shape table expected, got number)",
      error_of(buffer.save, buffer, path, 12))
    assert_contains("bad argument #1 to 'Buffer:save' (path string expected, got no value)",
      error_of(buffer.save, buffer))
    assert_contains("Buffer:save: cannot open " .. directory .. "/missing/x.npy: No such file or directory",
      error_of(buffer.save, buffer, directory .. "/missing/x.npy"))
    assert.is_nil(io.open(path, "rb"))
    buffer:close()
    assert_contains("attempt to use a closed gpurun.Buffer", error_of(buffer.save, buffer, path))
  end)

  it("read what NumPy writes, and NumPy reads what they write #gpu", function()
    local python, missing = require("spec.support.numpy_python")()
    local helper = "spec/support/npy_numpy.py"
    if not python then
      pending(missing .. ": the round trip with NumPy was not run")
      return
    end
    local function run(mode)
      local pipe = assert(io.popen(("%s %s %s %s 2>&1"):format(shell.quote(python), helper, mode,
        shell.quote(directory))))
      local output = pipe:read("a")
      local ok = pipe:close()
      assert(ok and output:find("OK", 1, true), ("npy_numpy.py %s failed: %s"):format(mode, output))
    end
    run("write")
    for _, dtype in ipairs(DTYPES) do
      local buffer <close>, shape = gpurun.load(directory .. "/" .. dtype .. ".npy")
      assert.are.same({ 1000 }, shape)
      assert.are.equal(dtype, buffer.dtype)
      assert.are.same(expected(dtype), buffer:to_table())
      buffer:save(directory .. "/from_gpurun_" .. dtype .. ".npy")
    end
    local matrix <close>, shape = gpurun.load(directory .. "/matrix.npy")
    assert.are.same({ 3, 4 }, shape)
    assert.are.same({ 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 }, matrix:to_table())
    matrix:save(directory .. "/from_gpurun_matrix.npy", shape)
    local v2 <close> = gpurun.load(directory .. "/v2.npy")
    assert.are.same({ 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 }, v2:to_table())
    assert_contains("Fortran-ordered arrays are not supported", error_of(gpurun.load, directory .. "/fortran.npy"))
    assert_contains("big-endian data ('>f4') is not supported", error_of(gpurun.load, directory .. "/big.npy"))
    local complex <close> = gpurun.load(directory .. "/complex.npy")
    assert.are.equal("complex64", complex.dtype)
    assert.are.same({ { 0, 0 }, { 1, -0.5 }, { 2, -1 }, { 3, -1.5 } }, complex:to_table())
    assert_contains("dtype '<U2' is not supported", error_of(gpurun.load, directory .. "/text.npy"))
    run("check")
  end)
end)

describe("gpurun.python_literal", function()
  local literal = require("gpurun.python_literal")

  it("reads brackets nested 200 deep and refuses a 201st, as Python's tokenizer does", function()
    for _, brackets in ipairs({ { "(", "1", ")" }, { "[", "", "]" }, { "{", "", "}" } }) do
      local open, inner, close = table.unpack(brackets)
      assert.is_table(literal.parse(open:rep(200) .. inner .. close:rep(200)))
      assert.are.same({ nil, "too many nested parentheses at character 201 (Python reads 200 levels at most)" },
        { literal.parse(open:rep(201) .. inner .. close:rep(201)) })
    end
  end)

  it("answers nil and why for a million open parentheses, without running out of stack", function()
    assert.are.same({ nil, "too many nested parentheses at character 201 (Python reads 200 levels at most)" },
      { literal.parse(("("):rep(1e6)) })
  end)
end)
