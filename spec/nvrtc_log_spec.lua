-- NVRTC's log stays small and cheap whatever the source: a long one keeps
-- its head and tail, and a long line is not repeated with each diagnostic.
-- Each case runs in a child process, which reports its time and peak memory.
local process = require("spec.support.process")
local q = process.quote

-- Compiles the source that $CASE builds and prints what came of it.
local COMPILE = [==[
local g = require("gpurun")
local cases = {
  nested = function() -- 18 KB of nested comments: one warning per "/*"
    return 'extern "C" __global__ void k(int *o) { *o = 1; }\n/*' .. (" /*"):rep(6000) .. " */\n"
  end,
  failing = function() -- 40 KB of them, then an error
    return 'extern "C" __global__ void k(int *o) { *o = 1; }\n/*' .. (" /*"):rep(13000) .. " */\nnot C++\n"
  end,
  elementwise = function()
    return g.elementwise("float32 x", "float32 r", "r = x; /*" .. ("/*"):rep(50000), "big").source
  end,
  many = function() -- thousands of short warnings: a log past the cap
    return 'extern "C" __global__ void k(int *o) { *o = 1; }\n' .. ("/* /* */\n"):rep(3000)
  end,
  long_line = function() -- one error on a line of 600 bytes
    return 'extern "C" __global__ void k(int *o) { *o = 1; }\nint x = "' .. ("x"):rep(600) .. '";\n'
  end,
}
local source = cases[os.getenv("CASE")]()
local extra = load("return " .. (os.getenv("EXTRA") or "{}"))()
-- CPU seconds (NVRTC's and reading the entry's), which another process
-- on the machine does not stretch, as it does the wall clock's.
local started = os.clock()
local ok, result = pcall(function()
  return g.Program(source, "c++", { std = "c++17", arch = "sm_90", extra = extra }):compile("ptx")
end)
local seconds = os.clock() - started
local status = io.open("/proc/self/status")
local peak_kb = tonumber(status:read("a"):match("VmHWM:%s*(%d+)"))
status:close()
local text = ok and result.log or tostring(result)
local file = assert(io.open(os.getenv("LOG_FILE"), "wb"))
file:write(text)
file:close()
print(("ok=%s from_cache=%s seconds=%.3f peak_kb=%d"):format(ok, ok and result.from_cache, seconds, peak_kb))
]==]

local scratch, script_path, log_path

lazy_setup(function()
  scratch = os.tmpname()
  os.remove(scratch)
  assert(os.execute("mkdir -p " .. q(scratch)))
  script_path = scratch .. "/compile.lua"
  log_path = scratch .. "/log.txt"
  local file = assert(io.open(script_path, "wb"))
  file:write(COMPILE)
  file:close()
end)

lazy_teardown(function()
  os.execute("rm -rf " .. q(scratch))
end)

-- run(case[, extra[, cache_dir]]) -> { ok, from_cache, seconds, peak_kb, text = log or error }
local function run(case, extra, cache_dir)
  local result = process.run(process.gpurun_command("timeout 120") .. " " .. q(script_path), { env = {
    CASE = case, EXTRA = extra or "{}", LOG_FILE = log_path,
    GPURUN_NO_CACHE = cache_dir and "" or "1", GPURUN_CACHE_DIR = cache_dir or "" } })
  assert.are.equal(0, result.code, result.stderr)
  local line = result.stdout
  local file = assert(io.open(log_path, "rb"))
  local text = file:read("a")
  file:close()
  return { ok = line:match("ok=(%a+)") == "true", from_cache = line:match("from_cache=(%a+)") == "true",
           seconds = tonumber(line:match("seconds=([%d.]+)")), peak_kb = tonumber(line:match("peak_kb=(%d+)")),
           text = text }
end

local CAPPED = 64 * 1024 + 200 -- head, tail and the line between

describe("NVRTC's log", function()
  it("of 18 KB of nested comments is made in under a second, kept small, and cached small", function()
    local cache_dir = scratch .. "/cache-nested"
    local first = run("nested", nil, cache_dir)
    assert.is_true(first.ok)
    assert.is_true(first.seconds < 1, first.seconds .. " s")
    assert.is_true(#first.text <= CAPPED, #first.text .. " bytes of log")
    assert.matches("nested comment is not allowed", first.text)
    local entry = io.popen("du -b " .. q(cache_dir) .. "/*.entry"):read("a")
    assert.is_true(tonumber(entry:match("^%d+")) < 256 * 1024, entry) -- was 163 MB
    local hit = run("nested", nil, cache_dir)
    assert.is_true(hit.from_cache)
    assert.is_true(hit.seconds < 1, hit.seconds .. " s")
  end)

  it("of a failing 40 KB variant gives a short error in under a second", function()
    local failed = run("failing")
    assert.is_false(failed.ok)
    assert.matches("NVRTC_ERROR_COMPILATION", failed.text)
    assert.is_true(#failed.text <= CAPPED + 200, #failed.text .. " bytes of error") -- was 400 MB
    assert.is_true(failed.seconds < 1, failed.seconds .. " s")
    assert.is_true(failed.peak_kb < 400 * 1024, failed.peak_kb .. " KiB at the peak") -- was 1.2 GB
  end)

  it("of an elementwise operation of 50,000 nested comments is over in under a second", function()
    local failed = run("elementwise")
    assert.is_false(failed.ok)
    assert.is_true(#failed.text <= CAPPED + 200, #failed.text .. " bytes of error")
    assert.is_true(failed.seconds < 1, failed.seconds .. " s")
  end)

  it("keeps a long log's first and last lines and says how much it left out", function()
    local many = run("many")
    assert.is_true(many.ok)
    assert.is_true(#many.text <= CAPPED, #many.text .. " bytes of log")
    assert.matches("^k%.cu%(2%): warning #9%-D: nested comment is not allowed\n", many.text)
    local left_out = tonumber(many.text:match("\n%[gpurun: (%d+) bytes of NVRTC's log left out here%]\n"))
    assert.is_true(left_out > 100000, many.text:sub(1, 200))
    assert.matches("k%.cu%(3001%): warning #9%-D: nested comment is not allowed\n.-$", many.text)
  end)

  it("gives a line longer than 512 bytes no echo, unless the options ask for it", function()
    local brief = run("long_line")
    assert.is_false(brief.ok)
    assert.matches("k%.cu%(2%): error", brief.text)
    assert.is_nil(brief.text:find(("x"):rep(600), 1, true))
    local full = run("long_line", '{ "--brief-diagnostics=false" }')
    assert.is_not_nil(full.text:find(("x"):rep(600), 1, true))
  end)
end)
