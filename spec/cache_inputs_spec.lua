-- The kernel cache against what NVRTC reads: every spelling of an include,
-- both ways. A header that changed is compiled again and gives the new value;
-- one that did not is served from the cache. Each compile runs gpurun in a
-- child process, in a folder of its own, and reads the value the PTX stores.
local process = require("spec.support.process")
local q = process.quote

-- Compiles $SOURCE_FILE with extra = $EXTRA (a Lua table constructor) to PTX
-- and prints from_cache and the value the kernel stores, or the error.
local COMPILE = [==[
local g = require("gpurun")
local file = assert(io.open(os.getenv("SOURCE_FILE"), "rb"))
local source = file:read("a")
file:close()
local extra = load("return " .. (os.getenv("EXTRA") or "{}"))()
local ok, code = pcall(function()
  return g.Program(source, "c++", { arch = "sm_90", extra = extra }):compile("ptx")
end)
if not ok then
  print("error=" .. tostring(code):gsub("\n", " "))
  return
end
print(("from_cache=%s value=%s"):format(code.from_cache,
  code.code:match("mov%.u32%s+%%r%d+,%s*(%d+);") or code.code:match("st%.global%.u32%s+%[[^%]]+%],%s*(%d+);") or "?"))
]==]

local scratch, script_path, cache_dir

local function write(path, text)
  local file = assert(io.open(path, "wb"))
  file:write(text)
  file:close()
end

local function run(command)
  assert(os.execute(command), command)
end

-- compile(folder, source, extra[, env]) -> { from_cache = bool, value = n } or { error = text }
local function compile(folder, source, extra, env)
  write(folder .. "/program.cu", source)
  local vars = { GPURUN_CACHE_DIR = cache_dir, GPURUN_NO_CACHE = "",
                 SOURCE_FILE = folder .. "/program.cu", EXTRA = extra or "{}" }
  for name, value in pairs(env or {}) do vars[name] = value end
  local assignments = {}
  for name, value in pairs(vars) do assignments[#assignments + 1] = name .. "=" .. q(value) end
  local result = process.run("cd " .. q(folder) .. " && " .. table.concat(assignments, " ") .. " "
    .. process.gpurun_command("timeout 60") .. " " .. q(script_path))
  assert(result.code == 0, result.stderr)
  local line = result.stdout:match("[^\n]*")
  local error_text = line:match("^error=(.*)")
  if error_text then return { error = error_text, stderr = result.stderr } end
  return { from_cache = line:match("from_cache=(%a+)") == "true", value = tonumber(line:match("value=(%d+)")),
           stderr = result.stderr }
end

lazy_setup(function()
  scratch = os.tmpname()
  os.remove(scratch)
  run("mkdir -p " .. q(scratch))
  script_path = scratch .. "/compile.lua"
  write(script_path, COMPILE)
end)

lazy_teardown(function()
  os.execute("rm -rf " .. q(scratch))
end)

local case = 0
local folder
before_each(function()
  case = case + 1
  folder = scratch .. "/case" .. case
  cache_dir = folder .. "/cache"
  run("mkdir -p " .. q(folder .. "/inc") .. " " .. q(folder .. "/lib") .. " " .. q(folder .. "/first")
    .. " " .. q(folder .. "/second"))
end)

local KERNEL = 'extern "C" __global__ void k(int *o) { *o = VAL; }\n'

-- Each spelling: the source, the options, and the header the value lives in
-- (relative to the case's folder).
local spellings = {
  { "-I dir as two words", '#include "val.h"\n' .. KERNEL, '{ "-I", "inc" }', "inc/val.h" },
  { "--include-path dir as two words", '#include "val.h"\n' .. KERNEL, '{ "--include-path", "inc" }', "inc/val.h" },
  { "-Idir", '#include "val.h"\n' .. KERNEL, '{ "-Iinc" }', "inc/val.h" },
  { "--include-path=dir", '#include "val.h"\n' .. KERNEL, '{ "--include-path=inc" }', "inc/val.h" },
  { "-include file as two words", KERNEL, '{ "-include", "inc/val.h" }', "inc/val.h" },
  { "--pre-include=file", KERNEL, '{ "--pre-include=inc/val.h" }', "inc/val.h" },
  { "a line continuation inside the word include", '#inc\\\nlude "val.h"\n' .. KERNEL, '{ "-I", "inc" }', "inc/val.h" },
  { "a line continuation after #", '#\\\ninclude "val.h"\n' .. KERNEL, '{ "-I", "inc" }', "inc/val.h" },
  { "a comment between # and include", '# /* here */ include "val.h"\n' .. KERNEL, '{ "-I", "inc" }', "inc/val.h" },
  { "a directive on a line that starts inside a block comment",
    '/* a comment\n   that ends here */ #include "val.h"\n' .. KERNEL, '{ "-I", "inc" }', "inc/val.h" },
  { "#include_next", '#include_next "val.h"\n' .. KERNEL, '{ "-I", "inc" }', "inc/val.h" },
  { "a form feed before #", '\f#include "val.h"\n' .. KERNEL, '{ "-I", "inc" }', "inc/val.h" },
  { "a vertical tab before #", '\v#include "val.h"\n' .. KERNEL, '{ "-I", "inc" }', "inc/val.h" },
  { "the digraph %:include", '%:include "val.h"\n' .. KERNEL, '{ "-I", "inc" }', "inc/val.h" },
  { "#include MACRO", '#define HEADER "val.h"\n#include HEADER\n' .. KERNEL, '{ "-I", "inc" }', "inc/val.h" },
  { "<angle brackets>", '#include <val.h>\n' .. KERNEL, '{ "-I", "inc" }', "inc/val.h" },
  { "a header included from a header in another folder", '#include "outer.h"\n' .. KERNEL,
    '{ "-I", "inc", "-I", "lib" }', "lib/val.h", { ["inc/outer.h"] = '#include "val.h"\n' } },
  { "a path relative to the including header", '#include "inc/outer.h"\n' .. KERNEL, '{}', "lib/val.h",
    { ["inc/outer.h"] = '#include "../lib/val.h"\n' } },
}

describe("the kernel cache follows what NVRTC reads:", function()
  for _, spelling in ipairs(spellings) do
    local name, source, extra, header, others = spelling[1], spelling[2], spelling[3], spelling[4], spelling[5]
    it(name .. ": a changed header is compiled again, an unchanged one is served", function()
      for path, text in pairs(others or {}) do write(folder .. "/" .. path, text) end
      write(folder .. "/" .. header, "#define VAL 111\n")
      local first = compile(folder, source, extra)
      assert.are.same({ false, 111 }, { first.from_cache, first.value }, first.error)
      local again = compile(folder, source, extra)
      assert.are.same({ true, 111 }, { again.from_cache, again.value }, again.error)
      write(folder .. "/" .. header, "#define VAL 222\n")
      local changed = compile(folder, source, extra)
      assert.are.same({ false, 222 }, { changed.from_cache, changed.value }, changed.error)
      local served = compile(folder, source, extra)
      assert.are.same({ true, 222 }, { served.from_cache, served.value }, served.error)
    end)
  end

  it("__has_include: a header that appears is compiled in", function()
    local source = '#if __has_include("val.h")\n#include "val.h"\n#else\n#define VAL 333\n#endif\n' .. KERNEL
    local absent = compile(folder, source, '{ "-I", "inc" }')
    assert.are.same({ false, 333 }, { absent.from_cache, absent.value }, absent.error)
    local still = compile(folder, source, '{ "-I", "inc" }')
    assert.are.same({ true, 333 }, { still.from_cache, still.value }, still.error)
    write(folder .. "/inc/val.h", "#define VAL 222\n")
    local present = compile(folder, source, '{ "-I", "inc" }')
    assert.are.same({ false, 222 }, { present.from_cache, present.value }, present.error)
  end)

  it("a header shadowed by a new file earlier in the search path is compiled again", function()
    local source = '#include "val.h"\n' .. KERNEL
    local extra = '{ "-I", "first", "-I", "second" }'
    write(folder .. "/second/val.h", "#define VAL 111\n")
    local first = compile(folder, source, extra)
    assert.are.same({ false, 111 }, { first.from_cache, first.value }, first.error)
    assert.is_true(compile(folder, source, extra).from_cache)
    write(folder .. "/first/val.h", "#define VAL 222\n")
    local shadowed = compile(folder, source, extra)
    assert.are.same({ false, 222 }, { shadowed.from_cache, shadowed.value }, shadowed.error)
  end)

  it("a deleted header fails the compile as NVRTC does, not from the cache", function()
    local source = '#include "val.h"\n' .. KERNEL
    write(folder .. "/inc/val.h", "#define VAL 111\n")
    compile(folder, source, '{ "-I", "inc" }')
    assert.is_true(compile(folder, source, '{ "-I", "inc" }').from_cache)
    os.remove(folder .. "/inc/val.h")
    local gone = compile(folder, source, '{ "-I", "inc" }')
    assert.is_not_nil(gone.error)
    assert.matches('cannot open source file "val.h"', gone.error)
  end)

  it("a relative include path is read from each working directory", function()
    local source = '#include "val.h"\n' .. KERNEL
    local a, b = folder .. "/first", folder .. "/second"
    run("mkdir -p " .. q(a .. "/inc") .. " " .. q(b .. "/inc"))
    write(a .. "/inc/val.h", "#define VAL 111\n")
    write(b .. "/inc/val.h", "#define VAL 222\n")
    assert.are.equal(111, compile(a, source, '{ "-I", "inc" }').value)
    local other = compile(b, source, '{ "-I", "inc" }')
    assert.are.same({ false, 222 }, { other.from_cache, other.value }, other.error)
    local back = compile(a, source, '{ "-I", "inc" }')
    assert.are.same({ true, 111 }, { back.from_cache, back.value }, back.error)
  end)

  it("an environment variable NVRTC reads is part of what it read", function()
    local source = KERNEL:gsub("VAL", "5")
    compile(folder, source)
    assert.is_true(compile(folder, source).from_cache)
    assert.is_false(compile(folder, source, nil, { NVRTC_APPEND_FLAGS = "-DX=1" }).from_cache)
  end)

  it("a program naming __TIME__ is compiled every time, and says so once", function()
    local source = '__device__ const char when[] = __TIME__;\n' .. KERNEL:gsub("VAL", "7")
    local first = compile(folder, source)
    assert.are.same({ false, 7 }, { first.from_cache, first.value })
    assert.matches("^gpurun: warning: kernel cache: k%.cu is compiled every time: it names __DATE__, "
      .. "__TIME__ or __TIMESTAMP__, which change with every compile\n$", first.stderr)
    assert.is_false(compile(folder, source).from_cache)
    write(folder .. "/inc/when.h", "#define WHEN __DATE__\n")
    local through_header = compile(folder, '#include "when.h"\n' .. KERNEL:gsub("VAL", "8"), '{ "-I", "inc" }')
    assert.is_false(through_header.from_cache)
    assert.matches("inc/when%.h names __DATE__", through_header.stderr)
  end)

  it("where NVRTC cannot be watched, says so once and compiles without the cache", function()
    local shim = process.gpurun_bin():match("^(.*)/[^/]*$") .. "/spec/hide_libraries.so"
    if not io.open(shim) then
      pending("no " .. shim .. " (sanitizer builds make none): not run")
      return
    end
    write(folder .. "/inc/val.h", "#define VAL 111\n")
    local source = '#include "val.h"\n' .. KERNEL
    for _ = 1, 2 do
      local result = compile(folder, source, '{ "-I", "inc" }', { LD_PRELOAD = shim })
      assert.are.same({ false, 111 }, { result.from_cache, result.value }, result.error)
      assert.are.equal("gpurun: warning: kernel cache: gpurun cannot watch what NVRTC reads (gpurun "
        .. "cannot find libnvrtc among the loaded libraries); continuing without the cache\n", result.stderr)
    end
  end)

  it("compiles uncached, saying so once, past 4096 paths or a path over 4096 bytes", function()
    local probes = {}
    for i = 1, 4200 do probes[i] = ('#if __has_include("missing_%d.h")\n#endif\n'):format(i) end
    local many = compile(folder, table.concat(probes) .. KERNEL:gsub("VAL", "3"))
    assert.are.same({ false, 3 }, { many.from_cache, many.value }, many.error)
    assert.matches("is compiled every time: NVRTC looked at more than 4096 paths, names and files\n$", many.stderr)
    assert.is_false(compile(folder, table.concat(probes) .. KERNEL:gsub("VAL", "3")).from_cache)
    local long = compile(folder, '#if __has_include("' .. ("d/"):rep(2100) .. 'x.h")\n#endif\n' .. KERNEL:gsub("VAL", "4"))
    assert.are.same({ false, 4 }, { long.from_cache, long.value }, long.error)
    assert.matches("NVRTC asked about a path, name or value longer than 4096 bytes\n$", long.stderr)
  end)

  for _, cached in ipairs({ "", "1" }) do
    local how = cached == "" and "with the cache" or "without the cache"
    it("refuses a FIFO include at once, naming it, " .. how, function()
      local fifo = folder .. "/inc/fifo.h"
      run("mkfifo " .. q(fifo))
      local started = os.time()
      local included = compile(folder, '#include "' .. fifo .. '"\n' .. KERNEL, nil, { GPURUN_NO_CACHE = cached })
      assert.matches("include file " .. fifo:gsub("%p", "%%%0") .. " is a FIFO, not a regular file", included.error)
      local pre = compile(folder, KERNEL:gsub("VAL", "1"), '{ "-include", "inc/fifo.h" }', { GPURUN_NO_CACHE = cached })
      assert.matches("include file inc/fifo%.h is a FIFO, not a regular file", pre.error)
      assert.is_true(os.time() - started < 30)
    end)
  end
end)
