-- The on-disk kernel cache. Its settings are read from the environment once
-- per process, so every case runs gpurun in a child process pointed at a
-- fresh directory and reads what it reports through gpurun.cache_info().
local process = require("spec.support.process")
local q = process.quote

-- Compiles SOURCE (or the file named by $SOURCE_FILE) with the options in
-- $OPTIONS (a Lua table constructor) for $TARGET and prints one line of
-- key=value pairs about the result and the cache.
local COMPILE = [[
local g = require("gpurun")
local source = 'extern "C" __global__ void vec_add(const float *a, float *b) { b[threadIdx.x] = a[threadIdx.x] + 1.0f; }\n'
if os.getenv("SOURCE_FILE") then
  local file = assert(io.open(os.getenv("SOURCE_FILE")))
  source = file:read("a")
  file:close()
end
local options = load("return " .. (os.getenv("OPTIONS") or "{ arch = '90' }"))()
-- CPU seconds (NVRTC's and reading the entry's), which another process
-- on the machine does not stretch, as it does the wall clock's.
local started = os.clock()
local code = g.Program(source, "c++", options):compile(os.getenv("TARGET") or "cubin")
local seconds = os.clock() - started
local status = io.open("/proc/self/status")
local peak_kb = status and tonumber(status:read("a"):match("VmHWM:%s*(%d+)")) or 0
if status then status:close() end
local sum = 0
for i = 1, #code.code do sum = (sum * 31 + code.code:byte(i)) % 4294967296 end
local info = g.cache_info()
print(("from_cache=%s size=%d sum=%d elf=%s enabled=%s hits=%d misses=%d stores=%d corrupt=%d errors=%d dir=%s seconds=%.3f peak_kb=%d")
  :format(code.from_cache, code.size, sum, code.code:sub(1, 4) == "\127ELF", info.enabled, info.hits,
          info.misses, info.stores, info.corrupt, info.errors, info.dir or "-", seconds, peak_kb))
]]

-- Compiles one program, then runs $BETWEEN (a shell command), then compiles
-- another and the first again, all in one process; prints the cache's
-- counts after each compile.
local THREE_COMPILES = [[
local g = require("gpurun")
local function compile(name)
  local source = 'extern "C" __global__ void ' .. name .. '(int *x) { *x = 1; }\n'
  local code = g.Program(source, "c++", { arch = "90" }):compile("ptx")
  local info = g.cache_info()
  print(("%s from_cache=%s enabled=%s hits=%d misses=%d stores=%d errors=%d"):format(name,
    code.from_cache, info.enabled, info.hits, info.misses, info.stores, info.errors))
end
compile("first")
if os.getenv("BETWEEN") then assert(os.execute(os.getenv("BETWEEN"))) end
compile("second")
compile("first")
]]

local script_path, three_path

local function fields(line)
  local result = {}
  for key, value in (line or ""):gmatch("([%w_]+)=(%S+)") do
    if value == "true" or value == "false" then
      result[key] = value == "true"
    else
      result[key] = tonumber(value) or value
    end
  end
  return result
end

-- compile(env) -> the reported fields, stderr, exit code
local function compile(env)
  env = env or {}
  if env.GPURUN_NO_CACHE == nil then env.GPURUN_NO_CACHE = "" end
  local result = process.gpurun(q(script_path), { env = env })
  return fields(result.stdout:match("[^\n]*")), result.stderr, result.code
end

local function shell(command)
  local pipe = assert(io.popen(command))
  local output = pipe:read("a")
  pipe:close()
  return output
end

local function entries(dir)
  local list = {}
  for name in shell("ls -A " .. q(dir) .. " 2>/dev/null"):gmatch("[^\n]+") do
    list[#list + 1] = name
  end
  return list
end

local function write(path, text)
  local file = assert(io.open(path, "wb"))
  file:write(text)
  file:close()
end

local function read(path)
  local file = assert(io.open(path, "rb"))
  local text = file:read("a")
  file:close()
  return text
end

local scratch, dir

lazy_setup(function()
  scratch = os.tmpname()
  os.remove(scratch)
  assert(os.execute("mkdir -p " .. q(scratch)))
  script_path = scratch .. "/compile.lua"
  write(script_path, COMPILE)
  three_path = scratch .. "/three.lua"
  write(three_path, THREE_COMPILES)
end)

lazy_teardown(function()
  os.execute("rm -rf " .. q(scratch))
end)

local case = 0
before_each(function()
  case = case + 1
  dir = scratch .. "/cache" .. case
end)

describe("the kernel cache", function()
  it("serves the second compile of the same program from disk", function()
    local first, stderr, code = compile({ GPURUN_CACHE_DIR = dir })
    assert.are.equal(0, code, stderr)
    assert.are.equal("", stderr)
    assert.is_false(first.from_cache)
    assert.are.same({ 0, 1, 1 }, { first.hits, first.misses, first.stores })
    assert.is_true(first.elf)

    local second = compile({ GPURUN_CACHE_DIR = dir })
    assert.is_true(second.from_cache)
    assert.are.same({ 1, 0, 0 }, { second.hits, second.misses, second.stores })
    assert.are.equal(first.size, second.size)
    assert.are.equal(first.sum, second.sum)
    assert.are.equal(dir, second.dir)
  end)

  it("keeps one entry file per key, starting with its magic, in a 0700 directory", function()
    compile({ GPURUN_CACHE_DIR = dir })
    local names = entries(dir)
    assert.are.equal(1, #names)
    assert.matches("^%x+%.entry$", names[1])
    assert.are.equal(32, #names[1]:match("^%x+"))
    assert.are.equal("GPURUNKC", read(dir .. "/" .. names[1]):sub(1, 8))
    assert.are.equal("700\n", shell("stat -c %a " .. q(dir)))
  end)

  it("misses when an option, the target or the source changes", function()
    compile({ GPURUN_CACHE_DIR = dir })
    local changed_option = compile({ GPURUN_CACHE_DIR = dir, OPTIONS = "{ arch = '90', defines = { 'X' } }" })
    assert.is_false(changed_option.from_cache)
    assert.are.equal(1, changed_option.misses)
    local reordered = compile({ GPURUN_CACHE_DIR = dir, OPTIONS = "{ arch = '90', line_info = true }" })
    assert.is_false(reordered.from_cache)
    local ptx = compile({ GPURUN_CACHE_DIR = dir, TARGET = "ptx" })
    assert.is_false(ptx.from_cache)
    local source = scratch .. "/other.cu"
    write(source, 'extern "C" __global__ void other(int *x) { *x = 1; }\n')
    assert.is_false(compile({ GPURUN_CACHE_DIR = dir, SOURCE_FILE = source }).from_cache)
    assert.are.equal(5, #entries(dir))
    assert.is_true(compile({ GPURUN_CACHE_DIR = dir, OPTIONS = "{ arch = '90', line_info = true }" }).from_cache)
  end)

  it("misses when an included header changes", function()
    local include = scratch .. "/include" .. case
    assert(os.execute("mkdir -p " .. q(include)))
    write(include .. "/outer.h", '#include "inner.h"\n')
    local source = scratch .. "/includes.cu"
    write(source, '#include <outer.h>\nextern "C" __global__ void k(int *x) { *x = VALUE; }\n')
    local env = { GPURUN_CACHE_DIR = dir, SOURCE_FILE = source, TARGET = "ptx",
                  OPTIONS = "{ arch = '90', include_paths = { " .. ("%q"):format(include) .. " } }" }
    write(include .. "/inner.h", "#define VALUE 1\n")
    local one = compile(env)
    assert.is_false(one.from_cache)
    assert.is_true(compile(env).from_cache)
    write(include .. "/inner.h", "#define VALUE 2\n")
    local two = compile(env)
    assert.is_false(two.from_cache)
    assert.are_not.equal(one.sum, two.sum)
    -- One entry per program: going back is compiled again, then served.
    write(include .. "/inner.h", "#define VALUE 1\n")
    local again = compile(env)
    assert.is_false(again.from_cache)
    assert.are.equal(one.sum, again.sum)
    assert.is_true(compile(env).from_cache)
  end)

  -- CRC-32C, the entry's payload checksum, bit by bit: a reference written
  -- apart from base/crc32c.c's.
  local function crc32c(data)
    local crc = 0xFFFFFFFF
    for i = 1, #data do
      crc = crc ~ data:byte(i)
      for _ = 1, 8 do
        crc = (crc & 1) == 1 and (crc >> 1) ~ 0x82F63B78 or crc >> 1
      end
    end
    return crc ~ 0xFFFFFFFF
  end

  it("checks entries with CRC-32C, as written apart from gpurun's", function()
    assert.are.equal(0xE3069283, crc32c("123456789"))
    local _, stderr, code = compile({ GPURUN_CACHE_DIR = dir })
    assert.are.equal(0, code, stderr)
    local checked = 0
    for _, name in ipairs(entries(dir)) do
      if name:match("%.entry$") then
        local entry = read(dir .. "/" .. name)
        assert.are.equal(crc32c(entry:sub(49)), string.unpack("<I8", entry, 25))
        checked = checked + 1
      end
    end
    assert.are.equal(1, checked)
  end)

  -- Changes the first record of what NVRTC read (the payload's last field)
  -- and fixes the checksum, so that only the record is wrong.
  local function bad_record(data)
    local payload = data:sub(49)
    local at, fields_passed = 1, 0
    local count
    while at <= #payload do
      if fields_passed == 2 then -- the name expressions: a count, then pairs
        count, at = string.unpack("<I8", payload, at)
        for _ = 1, 2 * count do at = at + 8 + string.unpack("<I8", payload, at) end
        fields_passed = fields_passed + 1
      else
        local n = string.unpack("<I8", payload, at)
        if at + 8 + n > #payload then
          payload = payload:sub(1, at + 7) .. "\238" .. payload:sub(at + 9)
          break
        end
        at, fields_passed = at + 8 + n, fields_passed + 1
      end
    end
    return data:sub(1, 24) .. string.pack("<I8", crc32c(payload)) .. data:sub(33, 48) .. payload
  end

  -- The entry with its record of what NVRTC read (the payload's last
  -- field) replaced by `records`, its length and checksum fixed to match.
  local function with_records(data, records)
    local payload = data:sub(49)
    local at = 1
    for field = 1, 5 do
      if field == 3 then -- the name expressions: a count, then pairs
        local count
        count, at = string.unpack("<I8", payload, at)
        for _ = 1, 2 * count do at = at + 8 + string.unpack("<I8", payload, at) end
      else
        at = at + 8 + string.unpack("<I8", payload, at)
      end
    end
    payload = payload:sub(1, at - 1) .. string.pack("<s8", records)
    return data:sub(1, 16) .. string.pack("<I8I8", #payload, crc32c(payload)) .. data:sub(33, 48) .. payload
  end

  it("asks a recorded dlopen again without blocking on a FIFO at its path", function()
    local first = compile({ GPURUN_CACHE_DIR = dir })
    local path = dir .. "/" .. entries(dir)[1]
    local fifo = scratch .. "/library" .. case .. ".so"
    assert(os.execute("mkfifo " .. q(fifo)))
    local dlopen_lazy = string.pack("<BI4s4s4", 9, 1, fifo, "N")
    write(path, with_records(read(path), dlopen_lazy))
    local result = process.run(process.gpurun_command("timeout 20") .. " " .. q(script_path),
      { env = { GPURUN_CACHE_DIR = dir, GPURUN_NO_CACHE = "" } })
    assert.are.equal(0, result.code, result.stderr)
    local again = fields(result.stdout:match("[^\n]*"))
    assert.are.same({ false, first.sum, 1 }, { again.from_cache, again.sum, again.stores })
    assert.is_true(compile({ GPURUN_CACHE_DIR = dir }).from_cache)
  end)

  local damages = {
    { "a malformed record of what NVRTC read", bad_record, "a record of what NVRTC read is malformed" },
    { "a flipped payload byte", function(data) return data:sub(1, 99) .. string.char(data:byte(100) ~ 0xff) .. data:sub(101) end, "bad checksum" },
    { "a truncated payload", function(data) return data:sub(1, #data // 2) end, "wrong length: payload is %d+ bytes, header says %d+" },
    { "a truncated header", function(data) return data:sub(1, 10) end, "truncated: 10 bytes, shorter than the 48%-byte header" },
    { "a bad magic", function(data) return "XXXXXXXX" .. data:sub(9) end, "bad magic" },
    { "an empty file", function() return "" end, "truncated: 0 bytes, shorter than the 48%-byte header" },
  }
  for _, damage in ipairs(damages) do
    it("recompiles over a corrupt entry: " .. damage[1], function()
      local first = compile({ GPURUN_CACHE_DIR = dir })
      local path = dir .. "/" .. entries(dir)[1]
      write(path, damage[2](read(path)))

      local again, stderr, code = compile({ GPURUN_CACHE_DIR = dir })
      assert.are.equal(0, code, stderr)
      assert.matches("gpurun: warning: kernel cache entry " .. path:gsub("%p", "%%%0")
        .. " is corrupt %(" .. damage[3] .. "%); recompiling\n", stderr)
      assert.is_false(again.from_cache)
      assert.are.same({ 1, 1, 1, 0 }, { again.corrupt, again.misses, again.stores, again.hits })
      assert.are.equal(first.sum, again.sum)

      local repaired, quiet = compile({ GPURUN_CACHE_DIR = dir })
      assert.are.equal("", quiet)
      assert.is_true(repaired.from_cache)
      assert.are.equal(first.sum, repaired.sum)
    end)
  end

  -- A sparse file: 3 GiB long, nothing on disk.
  local function grow(path, header_payload)
    local file = assert(io.open(path, "r+b"))
    if header_payload then
      file:seek("set", 16)
      file:write(string.pack("<I8", header_payload))
    end
    file:close()
    assert(os.execute("truncate -s 3G " .. q(path)))
  end

  it("refuses an oversized entry by its size and header, without reading it", function()
    local first = compile({ GPURUN_CACHE_DIR = dir })
    local path = dir .. "/" .. entries(dir)[1]
    local three_gib = 3 * 1024 * 1024 * 1024
    for _, variant in ipairs({
      { nil, "wrong length: payload is " .. (three_gib - 48) .. " bytes, header says %d+" },
      { three_gib - 48, "too large: " .. (three_gib - 48) .. " bytes of payload, more than the 256 MiB any compile makes" },
    }) do
      grow(path, variant[1])
      local again, stderr, code = compile({ GPURUN_CACHE_DIR = dir })
      assert.are.equal(0, code, stderr)
      assert.matches("gpurun: warning: kernel cache entry " .. path:gsub("%p", "%%%0") .. " is corrupt %("
        .. variant[2] .. "%); recompiling\n", stderr)
      assert.are.equal(first.sum, again.sum)
      assert.is_true(again.seconds < 1, again.seconds .. " s")
      assert.is_true(again.peak_kb < 1024 * 1024, again.peak_kb .. " KiB at the peak") -- reading it took 3 GiB
    end
  end)

  it("refuses a relative folder and the root folder, naming the variable", function()
    local cases = {
      { { HOME = "rel", GPURUN_CACHE_DIR = "", XDG_CACHE_HOME = "" }, "rel/.cache/gpurun, from HOME, is not an absolute path" },
      { { GPURUN_CACHE_DIR = "rel" }, "rel, from GPURUN_CACHE_DIR, is not an absolute path" },
      { { GPURUN_CACHE_DIR = "/" }, "/, from GPURUN_CACHE_DIR, is the root folder: the cache needs a folder of its own" },
      { { GPURUN_CACHE_DIR = "//" }, "//, from GPURUN_CACHE_DIR, is the root folder" },
      { { GPURUN_CACHE_DIR = "/tmp/.." }, "/tmp/.., from GPURUN_CACHE_DIR, is the root folder" },
    }
    local folder = scratch .. "/cwd" .. case
    assert(os.execute("mkdir -p " .. q(folder)))
    for _, refused in ipairs(cases) do
      local assignments = { "GPURUN_NO_CACHE=" }
      for name, value in pairs(refused[1]) do assignments[#assignments + 1] = name .. "=" .. q(value) end
      local result = process.run("cd " .. q(folder) .. " && " .. table.concat(assignments, " ") .. " "
        .. process.gpurun_command() .. " " .. q(script_path))
      assert.are.equal(0, result.code, result.stderr)
      assert.matches("^gpurun: warning: kernel cache directory " .. refused[2]:gsub("%p", "%%%0")
        .. ".*; continuing without the cache\n$", result.stderr)
      local fields_of = fields(result.stdout)
      assert.is_true(fields_of.elf)
      assert.is_false(fields_of.enabled)
    end
    assert.are.same({}, entries(folder)) -- nothing made under the working directory
    assert.are.same({}, shell("ls /*.entry 2>/dev/null"):match("%S") and { "entries in /" } or {})
  end)

  it("compiles without a cache, warning once, when the folder is too deep for an entry's path", function()
    -- 4070 bytes: the folder itself fits a path (4096 with its NUL), an
    -- entry's name after it does not.
    local deep = scratch .. "/deep" .. case
    while #deep < 4070 do deep = deep .. "/" .. ("d"):rep(math.min(200, 4070 - #deep - 1)) end
    local result, stderr, code = compile({ GPURUN_CACHE_DIR = deep })
    assert.are.equal(0, code, stderr)
    assert.are.equal("gpurun: warning: kernel cache directory " .. deep
      .. " is too deep for an entry path (File name too long); continuing without the cache\n", stderr)
    assert.are.same({ false, 0, 1 }, { result.enabled, result.stores, result.errors })
  end)

  it("compiles without a cache, warning once, when the directory cannot be created", function()
    local file = scratch .. "/a-file"
    write(file, "not a directory\n")
    local impossible = file .. "/sub"
    local result, stderr, code = compile({ GPURUN_CACHE_DIR = impossible })
    assert.are.equal(0, code, stderr)
    assert.are.equal("gpurun: warning: kernel cache directory " .. impossible
      .. " cannot be created (Not a directory); continuing without the cache\n", stderr)
    assert.is_true(result.elf)
    assert.is_false(result.enabled)
    assert.are.same({ 0, 0, 0, 1 }, { result.hits, result.misses, result.stores, result.errors })
  end)

  it("compiles without a cache, warning once, when the directory takes no files", function()
    -- /proc exists and is a directory, but no file can be made in it, even by
    -- root (for whom chmod 0500 would change nothing).
    local result, stderr, code = compile({ GPURUN_CACHE_DIR = "/proc" })
    assert.are.equal(0, code, stderr)
    assert.matches("^gpurun: warning: kernel cache directory /proc is not writable %([^)]+%); "
      .. "continuing without the cache\n$", stderr)
    assert.is_true(result.elf)
    assert.is_false(result.enabled)
    assert.are.equal(0, result.stores)
    assert.are.equal(1, result.errors)
  end)

  it("is off, silently, when GPURUN_NO_CACHE is set", function()
    local result, stderr = compile({ GPURUN_CACHE_DIR = dir, GPURUN_NO_CACHE = "1" })
    assert.are.equal("", stderr)
    assert.is_false(result.enabled)
    assert.are.equal("-", result.dir)
    assert.is_false(compile({ GPURUN_CACHE_DIR = dir, GPURUN_NO_CACHE = "yes" }).from_cache)
    assert.are.same({}, entries(dir))
    compile({ GPURUN_CACHE_DIR = dir, GPURUN_NO_CACHE = "0" })
    assert.is_true(compile({ GPURUN_CACHE_DIR = dir, GPURUN_NO_CACHE = "0" }).from_cache)
  end)

  it("lives under $XDG_CACHE_HOME/gpurun, else ~/.cache/gpurun", function()
    local xdg = scratch .. "/xdg" .. case
    local in_xdg = compile({ GPURUN_CACHE_DIR = "", XDG_CACHE_HOME = xdg })
    assert.are.equal(xdg .. "/gpurun", in_xdg.dir)
    assert.are.equal(1, #entries(xdg .. "/gpurun"))
    local home = scratch .. "/home" .. case
    local in_home = compile({ GPURUN_CACHE_DIR = "", XDG_CACHE_HOME = "", HOME = home })
    assert.are.equal(home .. "/.cache/gpurun", in_home.dir)
    assert.are.equal(1, #entries(home .. "/.cache/gpurun"))
  end)

  -- three(env) -> the fields of each of THREE_COMPILES' lines, stderr, exit code
  local function three(env)
    if env.GPURUN_NO_CACHE == nil then env.GPURUN_NO_CACHE = "" end
    local result = process.run(process.gpurun_command("timeout 60") .. " " .. q(three_path), { env = env })
    local lines = {}
    for line in result.stdout:gmatch("[^\n]+") do lines[#lines + 1] = fields(line) end
    return lines, result.stderr, result.code
  end

  it("skips an entry that is a FIFO without blocking, and replaces it", function()
    compile({ GPURUN_CACHE_DIR = dir })
    local path = dir .. "/" .. entries(dir)[1]
    os.remove(path)
    assert(os.execute("mkfifo " .. q(path)))
    local result = process.run(process.gpurun_command("timeout 60") .. " " .. q(script_path),
      { env = { GPURUN_CACHE_DIR = dir, GPURUN_NO_CACHE = "" } })
    assert.are.equal(0, result.code, result.stderr) -- 124: it hung on the FIFO
    assert.are.equal("gpurun: warning: kernel cache entry " .. path
      .. " is a FIFO, not an entry file; recompiling\n", result.stderr)
    local again = fields(result.stdout)
    assert.is_true(again.elf)
    assert.are.same({ true, 1, 1 }, { again.enabled, again.stores, again.errors })
    assert.are.equal("GPURUNKC", read(path):sub(1, 8)) -- replaced by a real entry
    local hit, quiet = compile({ GPURUN_CACHE_DIR = dir })
    assert.are.equal("", quiet)
    assert.is_true(hit.from_cache)
  end)

  it("skips an entry that is a directory and keeps the cache on for the rest", function()
    three({ GPURUN_CACHE_DIR = dir })
    for _, name in ipairs(entries(dir)) do
      os.remove(dir .. "/" .. name)
      assert(os.execute("mkdir " .. q(dir .. "/" .. name)))
    end
    local lines, stderr, code = three({ GPURUN_CACHE_DIR = dir })
    assert.are.equal(0, code, stderr)
    assert.matches("is a directory, not an entry file; recompiling\n", stderr)
    assert.is_nil(stderr:find("continuing without the cache", 1, true), stderr)
    for _, line in ipairs(lines) do
      assert.is_true(line.enabled)
      assert.is_false(line.from_cache)
    end
    assert.are.equal(0, lines[3].stores)
    -- A program whose entry is free is stored and served as before.
    local other = scratch .. "/free.cu"
    write(other, 'extern "C" __global__ void free_entry(int *x) { *x = 2; }\n')
    assert.are.equal(1, compile({ GPURUN_CACHE_DIR = dir, SOURCE_FILE = other }).stores)
    assert.is_true(compile({ GPURUN_CACHE_DIR = dir, SOURCE_FILE = other }).from_cache)
  end)

  it("makes the directory again when it is deleted while gpurun runs", function()
    local lines, stderr, code = three({ GPURUN_CACHE_DIR = dir, BETWEEN = "rm -rf " .. q(dir) })
    assert.are.equal(0, code, stderr)
    assert.are.equal("", stderr)
    assert.are.same({ 1, 2, 3 }, { lines[1].stores, lines[2].stores, lines[3].stores })
    assert.is_true(lines[3].enabled)
    assert.are.equal(2, #entries(dir))
    assert.are.equal("700\n", shell("stat -c %a " .. q(dir)))
  end)

  it("refuses a directory that its group or others can write, and compiles on", function()
    assert(os.execute("mkdir -p " .. q(dir) .. " && chmod 0777 " .. q(dir)))
    local result, stderr, code = compile({ GPURUN_CACHE_DIR = dir })
    assert.are.equal(0, code, stderr)
    assert.are.equal("gpurun: warning: kernel cache directory " .. dir .. " is writable by its group and "
      .. "others (mode 0777): its entries are code gpurun runs, so it must be yours alone (chmod go-w, "
      .. "or set GPURUN_CACHE_DIR); continuing without the cache\n", stderr)
    assert.is_true(result.elf)
    assert.is_false(result.enabled)
    assert.are.same({}, entries(dir))
    assert(os.execute("chmod 0720 " .. q(dir)))
    assert.matches("is writable by its group %(mode 0720%)", select(2, compile({ GPURUN_CACHE_DIR = dir })))
    assert(os.execute("chmod 0755 " .. q(dir)))
    local fine, quiet = compile({ GPURUN_CACHE_DIR = dir })
    assert.are.equal("", quiet)
    assert.is_true(fine.enabled)
  end)

  it("refuses a directory another user owns", function()
    assert(os.execute("mkdir -p " .. q(dir)))
    if not os.execute("chown 65534 " .. q(dir) .. " 2>/dev/null") then
      pending("chown needs root here: the owner check was not run")
      return
    end
    local result, stderr = compile({ GPURUN_CACHE_DIR = dir })
    assert.matches("^gpurun: warning: kernel cache directory " .. dir:gsub("%p", "%%%0")
      .. " is owned by uid 65534, not by you %(uid %d+%): its entries are code gpurun runs", stderr)
    assert.is_true(result.elf)
    assert.is_false(result.enabled)
  end)

  it("makes its folders 0700 and its entries 0600", function()
    local nested = dir .. "/a/b"
    compile({ GPURUN_CACHE_DIR = nested })
    for _, folder in ipairs({ dir, dir .. "/a", nested }) do
      assert.are.equal("700\n", shell("stat -c %a " .. q(folder)))
    end
    assert.are.equal("600\n", shell("stat -c %a " .. q(nested .. "/" .. entries(nested)[1])))
  end)

  it("survives processes compiling the same program at once", function()
    local outputs = {}
    local command = {}
    for i = 1, 4 do
      outputs[i] = scratch .. "/parallel" .. i
      command[#command + 1] = ("GPURUN_CACHE_DIR=%s GPURUN_NO_CACHE= %s %s >%s 2>&1 &")
        :format(q(dir), q(process.gpurun_bin()), q(script_path), q(outputs[i]))
    end
    assert(os.execute(table.concat(command, " ") .. " wait"))
    local sums = {}
    for i = 1, 4 do
      local text = read(outputs[i])
      local result = fields(text)
      assert.is_true(result.elf, text)
      assert.are.equal(0, result.corrupt, text)
      sums[#sums + 1] = result.sum
    end
    for i = 2, 4 do assert.are.equal(sums[1], sums[i]) end
    local names = entries(dir)
    assert.are.equal(1, #names, table.concat(names, " "))
    assert.matches("^%x+%.entry$", names[1])
    assert.is_true(compile({ GPURUN_CACHE_DIR = dir }).from_cache)
  end)
end)
