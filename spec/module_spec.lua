-- gpurun.so: the bindings as a module for any Lua 5.4, here Debian's
-- lua5.4, built next to the executable from the same objects.
local process = require("spec.support.process")
local q = process.quote

local LUA = process.lua54() or "lua5.4"
local build_dir = process.gpurun_bin():match("^(.*)/[^/]*$")
local source_dir = assert(os.getenv("PWD"))

-- Sanitizer builds make no gpurun.so (an ASan module loads only into an
-- ASan host): their specs here are pending.
local function sanitizer_build()
  local cache = io.open(build_dir .. "/CMakeCache.txt")
  if not cache then return false end
  local sanitizers = cache:read("a"):match("\nGPURUN_SANITIZE:STRING=([^\n]*)")
  cache:close()
  return sanitizers ~= nil and sanitizers ~= ""
end
local it_module = sanitizer_build() and pending or it

-- lua5.4 with `dir` (default: the build folder) first on its C path.
local function lua54(args, options, dir)
  options = options or {}
  options.env = options.env or {}
  options.env.LUA_CPATH_5_4 = (dir or build_dir) .. "/?.so;;"
  return process.run(q(LUA) .. " " .. args, options)
end

local function lines(text)
  local list = {}
  for line in text:gmatch("[^\n]+") do list[#list + 1] = line end
  return list
end

describe("gpurun.so", function()
  it_module("sits next to the executable, exports its openers alone, links no liblua", function()
    local module_path = build_dir .. "/gpurun.so"
    local needed = process.run("readelf -d " .. q(module_path))
    assert.are.equal(0, needed.code, needed.stderr)
    assert.matches("libnvrtc", needed.stdout)
    assert.is_nil(needed.stdout:find("liblua", 1, true), needed.stdout)
    local symbols = process.run("nm -D --defined-only " .. q(module_path))
    assert.are.equal(0, symbols.code, symbols.stderr)
    assert.are.same({ "luaopen_gpurun", "luaopen_gpurun_nvtx" }, lines(symbols.stdout:gsub("[^\n]* [A-Za-z] ", "")))
  end)

  it_module("loads into lua5.4: require('gpurun').device_count() as gpurun says", function()
    local command = "-e 'print(require(\"gpurun\").device_count())'"
    local from_lua = lua54(command)
    assert.are.equal(0, from_lua.code, from_lua.stderr)
    assert.are.same(process.gpurun(command), from_lua)
  end)

  it_module("gives lua5.4 -l gpurun the module gpurun has built in", function()
    local names = "-l gpurun -e 'local t = {} for k in pairs(gpurun) do t[#t + 1] = k end "
      .. "table.sort(t) print(table.concat(t, \" \"))'"
    local from_lua = lua54(names)
    assert.are.equal(0, from_lua.code, from_lua.stderr)
    assert.matches("Device", from_lua.stdout)
    assert.are.equal(process.gpurun(names).stdout, from_lua.stdout)
  end)

  it_module("finds the Lua library from any folder through a searcher, package.path untouched", function()
    local result = lua54("-e 'require(\"gpurun\") print(select(2, require(\"gpurun.bench\"))) "
      .. "print(package.path)'", { env = { LUA_PATH = "/nowhere/?.lua" } })
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal(source_dir .. "/lua/gpurun/bench.lua\n/nowhere/?.lua\n", result.stdout)
  end)

  it_module("honours GPURUN_LUA_DIR, unless lua5.4 -E says to ignore the environment", function()
    local require_check = "-e 'require(\"gpurun\") print(select(2, require(\"gpurun.check\")))'"
    local env = { GPURUN_LUA_DIR = "/nowhere" }
    local honoured = lua54(require_check, { env = env })
    assert.are.equal(1, honoured.code)
    assert.matches("no file '/nowhere/gpurun/check.lua'", honoured.stderr, 1, true)
    -- -E drops LUA_CPATH_5_4 too: the module's folder goes in by hand
    local cpath = ("-e 'package.cpath = %q' "):format(build_dir .. "/?.so")
    local ignored = lua54("-E " .. cpath .. require_check, { env = env })
    assert.are.equal(0, ignored.code, ignored.stderr)
    assert.are.equal(source_dir .. "/lua/gpurun/check.lua\n", ignored.stdout)
  end)

  it_module("installs into Lua 5.4's folders with cmake --install and is found there", function()
    local prefix = os.tmpname()
    os.remove(prefix)
    local install = process.run("cmake --install " .. q(build_dir) .. " --prefix " .. q(prefix))
    assert.are.equal(0, install.code, install.stderr)
    local module_dir = process.run("cd " .. q(prefix) .. " && ls -d lib*/lua/5.4").stdout:match("[^\n]+")
    local result = lua54("-e 'require(\"gpurun\") print(package.searchpath(\"gpurun\", package.cpath), "
      .. "select(2, require(\"gpurun.bench\")))'", { env = { LUA_PATH = ";;" } }, prefix .. "/" .. module_dir)
    local man_page = io.open(prefix .. "/share/man/man1/gpurun.1.gz")
    if man_page then man_page:close() end
    os.execute("rm -rf " .. q(prefix))
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal(("%s/%s/gpurun.so\t%s/share/lua/5.4/gpurun/bench.lua\n"):format(prefix, module_dir, prefix),
      result.stdout)
    assert.truthy(man_page, "no share/man/man1/gpurun.1.gz")
  end)

  it_module("opens in one Lua state of a process at a time, and says so to a second one", function()
    local result = process.run(q(build_dir .. "/spec/two_states") .. " " .. q(build_dir))
    assert.are.equal(0, result.code, result.stderr)
    assert.are.same({
      "A: ok, a table",
      "B: gpurun supports one Lua state per process, and another Lua state of this process "
        .. "has it open: close that state first",
      "C: ok, a table",
    }, lines(result.stdout))
  end)

  it_module("refuses to open in a state that has gpurun's built-in bindings open", function()
    local result = process.gpurun(("-e 'require(\"gpurun\") package.loaded.gpurun = nil "
      .. "package.preload.gpurun = nil package.cpath = %s print(pcall(require, \"gpurun\"))'")
      :format(("%q"):format(build_dir .. "/?.so")))
    assert.are.equal(0, result.code, result.stderr)
    assert.matches("^false\t[^\n]*gpurun is already open in this Lua state from another copy of its "
      .. "bindings", result.stdout)
  end)

  it_module("compiles, launches and checks a kernel from lua5.4 #gpu", function()
    local script = os.tmpname() .. ".lua"
    local file = assert(io.open(script, "w"))
    file:write([[
      local gpurun = require("gpurun")
      local device = gpurun.Device(0)
      device:set_current()
      local stream <close> = device:create_stream()
      local code = gpurun.Program([=[
        extern "C" __global__ void twice(float *x, unsigned n) {
          unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
          if (i < n) x[i] *= 2.0f;
        }]=], "c++", gpurun.ProgramOptions{ arch = "sm_" .. device.arch }):compile("cubin")
      local x <close> = gpurun.full(1000, 1.5, "float32")
      gpurun.launch(stream, gpurun.LaunchConfig{ grid = 4, block = 256 }, code:get_kernel("twice"),
        x, gpurun.u32(1000))
      stream:sync()
      print(gpurun.allclose(x, 3.0, 0, 0), device.name)
    ]])
    file:close()
    local result = lua54(q(script))
    os.remove(script)
    assert.are.equal(0, result.code, result.stderr)
    assert.matches("^true\t%S", result.stdout)
  end)
end)
