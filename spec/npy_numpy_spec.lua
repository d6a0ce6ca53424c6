-- gpurun.npy against NumPy itself: thousands of generated .npy files, valid
-- and subtly not (keys quoted, escaped, repeated, missing or extra; strings
-- concatenated; integers in every base; comments, line breaks, indentation;
-- versions, header lengths, the header size cap; data short or long), each
-- read by gpurun (npy.read_header, npy.data_problem: what gpurun.load checks
-- before it allocates) and by np.load (spec/support/npy_numpy.py verdicts).
-- They must agree on every file: both refuse it, or both read the same dtype
-- and shape. gpurun refuses on purpose, where NumPy reads, only what it
-- cannot hold, each by name: dtypes it lacks, big-endian data, Fortran
-- order and negative dimensions (np.fromfile reads a -1 as "all there is").
local npy = require("gpurun.npy")
local shell = require("gpurun.shell")
local cjson = require("cjson")

-- $GPURUN_NPY_SEED and $GPURUN_NPY_FILES draw other files (to look further).
local FILES = math.tointeger(tonumber(os.getenv("GPURUN_NPY_FILES"))) or 3000
local SEED = math.tointeger(tonumber(os.getenv("GPURUN_NPY_SEED"))) or 20260305

-- Deterministic draws (the spec's own generator, not math.random's state).
local function generator(seed)
  local state = seed
  local rng = {}
  function rng.int(n) -- 1..n
    state = (state * 6364136223846793005 + 1442695040888963407)
    return ((state >> 33) % n) + 1
  end
  function rng.pick(list) return list[rng.int(#list)] end
  function rng.chance(p) return rng.int(1000) <= p * 1000 end
  return rng
end

local GOOD_DESCRS = { "<f4", "<f8", "|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8" }
local OTHER_DESCRS = { "=f4", "|f4", "f4", "f", "<f", "d", "<d", "float32", "float64", "single",
  "double", "int8", "uint64", "b", "B", "h", "H", "i", "I", "l", "L", "q", "Q", "p", "P", "<b", ">b",
  ">i1", ">u1", "=u1", "i1", "f04", "f004", "<i08", "int", "uint", "long", "float", "intc", "ubyte",
  ">f4", ">i8", ">d", "<f2", "e", "|b1", "?", "<c8", "<f16", "g", "|S5", "<U3", "|V4", "O", "f0",
  "F4", "<F", " <f4", "<f4 ", "<<f4", "", "float_x", "<i3", "u16", "<m8", "<M8[ns]" }

-- The text of a string literal holding `value`, in one of Python's ways.
local function quoted(rng, value)
  local ways = {
    function() return "'" .. value .. "'" end,
    function() return '"' .. value .. '"' end,
    function() return "u'" .. value .. "'" end,
    function() return "r'" .. value .. "'" end,
    function() return "'''" .. value .. "'''" end,
    function() return '"""' .. value .. '"""' end,
    function() -- implicit concatenation
      local cut = rng.int(#value + 1) - 1
      return "'" .. value:sub(1, cut) .. "' \"" .. value:sub(cut + 1) .. '"'
    end,
    function() -- one character as an escape
      if value == "" then return "''" end
      local at = rng.int(#value)
      local c = value:byte(at)
      local escape = rng.pick({ ("\\x%02x"):format(c), ("\\%03o"):format(c), ("\\u%04x"):format(c) })
      return "'" .. value:sub(1, at - 1) .. escape .. value:sub(at + 1) .. "'"
    end,
    function() -- a line continuation inside the string
      local cut = rng.int(#value + 1) - 1
      return "'" .. value:sub(1, cut) .. "\\\n" .. value:sub(cut + 1) .. "'"
    end,
  }
  local odd = { -- ways Python refuses, or that are not a str
    function() return "b'" .. value .. "'" end,
    function() return "f'" .. value .. "'" end,
    function() return "'" .. value end,
    function() return "'" .. value .. '"' end,
    function() return "ur'" .. value .. "'" end,
    function() return "'" .. value .. "\\'" end,
    function() return "'" .. value .. "' b''" end,
    function() return "('" .. value .. "')" end,
    function() return "'" .. value .. "\\q'" end,
    function() return "r'" .. value .. "\\'" end,
  }
  if rng.chance(0.03) then return rng.pick(odd)() end
  if rng.chance(0.6) then return "'" .. value .. "'" end
  return rng.pick(ways)()
end

local DIMS = { 0, 1, 1, 2, 3, 3, 4, 5, 7, 10, 16, 100, 255 }

-- An integer literal for n, in one of Python's ways (and some it refuses).
local function integer(rng, n, plain)
  if plain or rng.chance(0.8) then return tostring(n) end
  local binary = function()
    local bits, m = {}, n
    repeat table.insert(bits, 1, tostring(m % 2)); m = m // 2 until m == 0
    return "0b" .. table.concat(bits)
  end
  local ways = {
    function() return ("0x%x"):format(n) end,
    function() return ("0X%X"):format(n) end,
    function() return ("0o%o"):format(n) end,
    binary,
    function() return tostring(n) .. "L" end, -- Python 2's longs: 1.0 and 2.0 only
    function() return tostring(n) .. " L" end,
    function() return "+" .. n end,
    function() return "(" .. n .. ")" end,
    function() return (tostring(n):gsub("^(%d)(%d)", "%1_%2")) end,
    function() return "0x_" .. ("%x"):format(n) end,
    function() return n == 0 and "00" or tostring(n) end,
    function() return n == 0 and "0_0" or tostring(n) end,
  }
  local odd = {
    function() return tostring(n) .. "l" end,
    function() return "-(" .. n .. ")" end,
    function() return "0" .. n end,
    function() return (tostring(n):gsub("^(%d)", "%1__")) end,
    function() return tostring(n) .. "_" end,
    function() return tostring(n) .. ".0" end,
    function() return tostring(n) .. "j" end,
    function() return "True" end,
    function() return "'" .. n .. "'" end,
    function() return "--" .. n end,
    function() return n .. "LL" end,
  }
  return rng.pick(rng.chance(0.75) and ways or odd)()
end

local BIG = { "4611686018427387905", "9223372036854775807", "9223372036854775808",
  "18446744073709551616", "4294967296", "2147483648", "-1", "-2", "-0", "123456789012345678901234567890" }

-- A shape literal and the dimensions it means (nil when it is not one).
local function shape_literal(rng)
  local count = rng.pick({ 0, 1, 1, 1, 2, 2, 3, 4, 32, 33, 64, 65 })
  local dims, texts = {}, {}
  local budget = 64 -- elements, so that the data stays small
  for i = 1, count do
    local n = count > 4 and 1 or rng.pick(DIMS)
    if n > budget then n = 1 end
    budget = n > 0 and budget // n or budget
    dims[i] = n
    texts[i] = integer(rng, n, count > 4 and not rng.chance(0.05))
  end
  if count > 0 and rng.chance(0.05) then texts[rng.int(count)] = rng.pick(BIG) end
  local body = table.concat(texts, rng.pick({ ", ", ",", " ,", ",\n ", ", # c\n" }))
  local forms = {
    function() return count == 1 and "(" .. body .. ",)" or "(" .. body .. ")" end,
    function() return "(" .. body .. (count > 0 and "," or "") .. ")" end,
    function() return "((" .. body .. (count == 1 and ",))" or "))") end,
  }
  local odd = {
    function() return "[" .. body .. "]" end,
    function() return body end,
    function() return "(" .. body .. ",,)" end,
    function() return "{" .. body .. "}" end,
    function() return "(" .. body .. ")[0]" end,
    function() return "((" .. body .. ",),)" end,
    function() return "(" .. body .. ") + ()" end,
    function() return "None" end,
  }
  if rng.chance(0.06) then return rng.pick(odd)(), dims end
  return rng.pick(forms)(), dims
end

local function dict_text(rng)
  local descr = rng.chance(0.6) and rng.pick(GOOD_DESCRS) or rng.pick(OTHER_DESCRS)
  local entries = {
    { key = "descr", value = rng.chance(0.04) and rng.pick({ "[('x', '<f4')]", "('<f4', (2,))", "4",
      "None", "'<f4'.upper()", "b'<f4'" }) or quoted(rng, descr) },
    { key = "fortran_order", value = rng.chance(0.9) and rng.pick({ "False", "False", "False", "False", "False", "False", "True" })
      or rng.pick({ "0", "1", "None", "'False'", "(False)", "FALSE", "false", "not True" }) },
  }
  local shape_text, dims = shape_literal(rng)
  entries[3] = { key = "shape", value = shape_text }
  -- Keys in any order, sometimes one missing, repeated or extra.
  for i = #entries, 2, -1 do
    local j = rng.int(i)
    entries[i], entries[j] = entries[j], entries[i]
  end
  if rng.chance(0.04) then table.remove(entries, rng.int(#entries)) end
  if rng.chance(0.06) then
    local copy = entries[rng.int(#entries)]
    local value = copy.key == "shape" and (shape_literal(rng)) or copy.value
    table.insert(entries, rng.int(#entries + 1), { key = copy.key, value = value })
  end
  if rng.chance(0.04) then
    table.insert(entries, rng.int(#entries + 1), { key = rng.pick({ "x", "Shape", "shape ", "descr\\x00",
      "version" }), value = "1" })
  end
  local parts = {}
  for i, entry in ipairs(entries) do
    local key = quoted(rng, entry.key)
    if rng.chance(0.02) then key = rng.pick({ "1", "('descr',)", "None", "descr" }) end
    parts[i] = key .. rng.pick({ ": ", ":", " : ", ":\n" }) .. entry.value
  end
  local separator = rng.pick({ ", ", ", ", ",", ",\n", " ,", ", # comment\n", ",\\\n" })
  if rng.chance(0.02) then separator = rng.pick({ " ", ";", ",,", ", 'shape' " }) end
  local close = rng.pick({ ", }", ", }", "}", ",}", "\n}" })
  if rng.chance(0.03) then close = rng.pick({ ",,}", "" }) end
  local text = "{" .. table.concat(parts, separator) .. close
  if rng.chance(0.03) then text = "(" .. text .. ")" end
  if rng.chance(0.02) then text = text .. rng.pick({ ",", " {}", ";", " # trailing" }) end
  local lead = rng.chance(0.9) and "" or rng.pick({ " ", "\t", "\n", "\n ", "# c\n", "\f", "\f ", "\\\n",
    "\r\n", "\v" })
  return lead .. text, descr, dims
end

-- The bytes of a file, with a header length that is right or not.
local function file_bytes(rng, index)
  local major, minor = 1, 0
  if rng.chance(0.25) then major = rng.pick({ 2, 3 }) end
  if rng.chance(0.03) then major, minor = table.unpack(rng.pick({ { 1, 1 }, { 2, 7 }, { 4, 0 }, { 0, 0 }, { 3, 1 } })) end
  local text, descr, dims = dict_text(rng)
  if major == 3 and rng.chance(0.1) then text = text:gsub("}%s*$", "} # \xc3\xa9t\xc3\xa9") end
  if major ~= 3 and rng.chance(0.02) then text = text:gsub("}%s*$", "} # \xe9") end
  if rng.chance(0.02) then -- one character changed
    local at = rng.int(#text)
    text = text:sub(1, at - 1) .. rng.pick({ "'", '"', ",", ":", "(", ")", "{", "}", "\\", "#", "\n",
      "L", "x", "0", "\0", "\xe9", " ", "\t" }) .. text:sub(at + 1)
  end
  local length_format = major == 1 and "<I2" or "<I4"
  local prefix = 8 + string.packsize(length_format)
  local ending = rng.pick({ "\n", "\n", "\n", "", "\n\n", " \n  ", "\n  \n", "\t\n", "\r\n", "\f\n" })
  local padding = (64 - (prefix + #text + #ending) % 64) % 64
  -- Around NumPy's cap of 10000 characters, sometimes.
  if rng.chance(0.02) then padding = rng.pick({ 9990, 10000, 10100 }) - #text - #ending end
  local header = text .. string.rep(" ", math.max(padding, 0)) .. ending
  local length = #header
  if rng.chance(0.03) then
    length = rng.pick({ length - 1, length + 1, length + 7, 0, 1, 0xFFFF, 0xFFFFFFFF, 10001, 40001 })
    if major == 1 then length = length & 0xFFFF end
  end
  local elements = 1
  for _, n in ipairs(dims) do elements = elements * n end
  local size = ({ ["<f4"] = 4, ["<f8"] = 8, ["<i2"] = 2, ["<u2"] = 2, ["<i4"] = 4, ["<u4"] = 4,
    ["<i8"] = 8, ["<u8"] = 8 })[descr] or 1
  local data = elements * size
  if rng.chance(0.08) then data = math.max(0, data + rng.pick({ -1, -size, 1, 3, 64, -data })) end
  local bytes = "\x93NUMPY" .. string.char(major, minor) .. string.pack(length_format, length) .. header
    .. string.rep("\xAB", data)
  if rng.chance(0.01) then bytes = bytes:sub(1, rng.int(12)) end
  return ("%05d.npy"):format(index), bytes
end

-- Files chosen by hand, beside the drawn ones: the rules' edges.
local function fixed_files()
  local function file(major, text, data, length)
    local length_format = major == 1 and "<I2" or "<I4"
    return "\x93NUMPY" .. string.char(major, 0) .. string.pack(length_format, length or #text) .. text
      .. (data or string.rep("\0", 12))
  end
  local good = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"
  local files = {}
  for _, major in ipairs({ 1, 2, 3 }) do
    for i, text in ipairs({ good .. "\n", "\f " .. good, " \f" .. good, good .. "\n  ", good .. "\n  \n",
        good .. "\\\n", good .. "\\\n ", "\\\n" .. good, good .. "\r", "\r" .. good, "\r " .. good,
        good .. "\0", good:gsub("%(3,%)", "(3L,)"), good:gsub("%(3,%)", "(True,)"),
        good:gsub("'<f4'", "'\\N{LESS-THAN SIGN}f4'"), good:gsub("'<f4'", "'<f4' '' \"\""),
        good:gsub(", }", ", 'shape': (1,)}"), good:gsub("'shape'", "'sh' 'ape'"),
        good:gsub("'<f4'", "'x shape: (9,)'"):gsub("'descr': ", "'descr': '<f4', 'junk': "),
        good:gsub(", 'fortran", " 'fortran"), good .. " # \xc3\xa9", "{'descr': '\xc3\xa9'}",
        good .. string.rep(" ", 10000 - #good - 1) .. "\n", good .. string.rep(" ", 10001 - #good - 1) .. "\n",
        good .. " #" .. string.rep("\xc3\xa9", 4000) .. "\n",
        -- Python's 200 levels of brackets, the dict's included, and past them.
        (good:gsub("%(3,%)", ("("):rep(199) .. "3," .. (")"):rep(199))),
        (good:gsub("%(3,%)", ("("):rep(200) .. "3," .. (")"):rep(200))),
        (good:gsub("%(3,%)", ("["):rep(300))) }) do
      files[("fixed_%d_%02d.npy"):format(major, i)] = file(major, text)
    end
  end
  files["fixed_length_ffffffff.npy"] = "\x93NUMPY\2\0\xff\xff\xff\xff" -- 12 bytes
  files["fixed_huge_shape.npy"] = file(1, good:gsub("%(3,%)", "(4611686018427387905,)"), "\0\0\0\0")
  files["fixed_version_1_1.npy"] = file(1, good):gsub("^(\x93NUMPY)\1\0", "%1\1\1")
  files["fixed_version_2_7.npy"] = file(2, good):gsub("^(\x93NUMPY)\2\0", "%1\2\7")
  files["fixed_magic.npy"] = "\x93NUMPZ\1\0"
  files["fixed_short.npy"] = "\x93NUM"
  files["fixed_long_data.npy"] = file(1, good, string.rep("\0", 100))
  return files
end

-- The ways gpurun refuses on purpose what NumPy reads, and how to tell
-- NumPy's verdict that it is one of them.
local DELIBERATE = {
  { message = "not supported", numpy = function(v)
      return not ({ ["<f4"] = 1, ["<f8"] = 1, ["|i1"] = 1, ["|u1"] = 1, ["<i2"] = 1, ["<u2"] = 1,
        ["<i4"] = 1, ["<u4"] = 1, ["<i8"] = 1, ["<u8"] = 1 })[v.descr] or v.fortran
        or not v.plain -- a structured or subarray dtype
    end },
  { message = "is negative", numpy = function(v)
      for _, n in ipairs(v.header_shape) do if n < 0 then return true end end
    end },
  -- \N{...} needs Unicode's names; a .npy header has no use for them.
  { message = "named characters are not read", numpy = function() return true end },
}

-- Where NumPy's verdict depends on its version or Python's, gpurun takes
-- one (docs/library.md, npy.parse): each such difference, and how to tell
-- it from NumPy's verdict, gpurun's and the file's bytes.
local VERSIONED = {
  -- 33 to 64 dimensions: NumPy 2 reads them, NumPy 1 refuses.
  function(numpy, ours)
    return not numpy.ok and ours.ok and numpy.numpy_major < 2 and #ours.shape > 32
  end,
  -- A header that starts with a carriage return: Python 3.12 reads it as
  -- a blank first line; under 3.11 NumPy's _filter_header fails on it,
  -- and gpurun refuses it as 3.11 does.
  function(numpy, ours)
    local python_minor = math.tointeger(tonumber(numpy.python:match("^3%.(%d+)$")))
    return numpy.ok and not ours.ok and python_minor and python_minor >= 12
      and ours.error:find("starts with a carriage return", 1, true) ~= nil
  end,
  -- A version 1.0 or 2.0 header whose padding goes on past its last
  -- newline: Python reads the blanks there as an indent, and NumPy's
  -- _filter_header fallback drops them under Python 3.11 but not 3.12,
  -- whose tokenize keeps them.
  function(numpy, ours, bytes)
    local python_minor = math.tointeger(tonumber(numpy.python:match("^3%.(%d+)$")))
    if numpy.ok or not ours.ok or not numpy.error:find("Cannot parse header", 1, true)
       or not python_minor or python_minor < 12 then
      return false
    end
    local major = bytes:byte(7)
    if major > 2 then return false end
    local length = major == 1 and string.unpack("<I2", bytes, 9) or string.unpack("<I4", bytes, 9)
    local start = major == 1 and 11 or 13
    local header = bytes:sub(start, start + length - 1)
    return header:match("\n[ \t]+$") ~= nil
  end,
}

-- gpurun's verdict on a file: { ok, descr, shape } or { ok = false, error }.
local function gpurun_verdict(path)
  local file = assert(io.open(path, "rb"))
  local info, why = npy.read_header(file)
  if info then
    local here = file:seek()
    why = npy.data_problem(info, file:seek("end") - here)
  end
  file:close()
  if why then return { ok = false, error = why } end
  return { ok = true, descr = npy.descr(info.dtype), shape = info.shape }
end

local function printable(bytes)
  return (bytes:gsub("[^%g ]", function(c) return ("\\x%02x"):format(c:byte()) end))
end

describe("gpurun.npy against NumPy", function()
  it("reads exactly the generated files np.load reads, with the same dtype and shape", function()
    local python, missing = require("spec.support.numpy_python")()
    if not python then
      pending(missing .. ": gpurun.npy was not compared with NumPy")
      return
    end
    local directory = os.tmpname()
    os.remove(directory)
    assert(os.execute("mkdir " .. shell.quote(directory)))
    local rng = generator(SEED)
    local contents = fixed_files()
    for index = 1, FILES do
      local name, bytes = file_bytes(rng, index)
      contents[name] = bytes
    end
    local total = 0
    for name, bytes in pairs(contents) do
      local file = assert(io.open(directory .. "/" .. name, "wb"))
      file:write(bytes)
      file:close()
      total = total + 1
    end
    local pipe = assert(io.popen(("%s spec/support/npy_numpy.py verdicts %s 2>&1")
      :format(shell.quote(python), shell.quote(directory))))
    local lines = pipe:read("a")
    pipe:close()
    local disagreements, agreed, read, deliberate, versioned = {}, 0, 0, 0, 0
    for line in lines:gmatch("[^\n]+") do
      local ok, numpy = pcall(cjson.decode, line)
      assert(ok, "npy_numpy.py verdicts printed: " .. line)
      for _, list in ipairs({ numpy.shape or {}, numpy.header_shape or {} }) do
        for i, n in ipairs(list) do list[i] = math.tointeger(tonumber(n)) end
      end
      local ours = gpurun_verdict(directory .. "/" .. numpy.name)
      local same = ours.ok == numpy.ok
      if same and ours.ok then
        same = ours.descr == numpy.descr and table.concat(ours.shape, ",") == table.concat(numpy.shape, ",")
      end
      if not same and numpy.ok and not ours.ok then
        for _, reason in ipairs(DELIBERATE) do
          if ours.error:find(reason.message, 1, true) and reason.numpy(numpy) then
            same = true
            deliberate = deliberate + 1
          end
        end
      end
      if not same then
        for _, known in ipairs(VERSIONED) do
          if known(numpy, ours, contents[numpy.name]) then
            same = true
            versioned = versioned + 1
            break
          end
        end
      end
      if same then
        agreed = agreed + 1
        if ours.ok then read = read + 1 end
      else
        disagreements[#disagreements + 1] = ("%s: NumPy %s, gpurun %s: %s"):format(numpy.name,
          numpy.ok and ("reads %s %s"):format(numpy.descr, cjson.encode(numpy.shape)) or ("refuses (" .. numpy.error .. ")"),
          ours.ok and ("reads %s {%s}"):format(ours.descr, table.concat(ours.shape, ",")) or ("refuses (" .. ours.error .. ")"),
          printable(contents[numpy.name]:sub(1, 300)))
      end
    end
    os.execute("rm -rf " .. shell.quote(directory))
    assert.are.equal(total, agreed + #disagreements, "np.load gave no verdict on some files: " .. lines:sub(1, 2000))
    assert(#disagreements == 0, ("%d of %d files read differently:\n%s"):format(#disagreements, total,
      table.concat(disagreements, "\n", 1, math.min(#disagreements, 25))))
    -- The mix must hold both kinds in quantity, or the comparison says little.
    assert.is_true(read > FILES // 6, ("only %d files read"):format(read))
    assert.is_true(FILES - read - deliberate > FILES // 4, "too few files refused")
    -- The versioned differences are few, or they would hide real ones.
    assert.is_true(versioned < FILES // 10, ("%d files read differently by NumPy's version"):format(versioned))
  end)
end)
