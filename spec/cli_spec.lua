-- The command line: gpurun behaves as `lua` does, plus its own version line
-- and exit codes (0 success, 1 script error, 2 usage error).
local process = require("spec.support.process")
local q = process.quote

local function script(text)
  local path = os.tmpname() .. ".lua"
  local file = assert(io.open(path, "w"))
  file:write(text)
  file:close()
  return path
end

describe("gpurun command line", function()
  it("lays out arg as lua does and passes arguments as ...", function()
    local path = script([[
      local a, b = ...
      print(arg[0], arg[1], arg[2], #arg, a, b, select("#", ...))
      print(arg[-1] ~= nil, arg[-2] == nil)
    ]])
    local result = process.gpurun(q(path) .. " one two")
    assert.are.equal(0, result.code, result.stderr)
    local lines = {}
    for line in result.stdout:gmatch("[^\n]+") do lines[#lines + 1] = line end
    assert.are.equal(path .. "\tone\ttwo\t2\tone\ttwo\t2", lines[1])
    assert.are.equal("true\ttrue", lines[2])
    os.remove(path)
  end)

  it("puts the interpreter and its options at negative indices", function()
    local path = script("print(arg[-1], arg[-2], arg[-3] == 'gpurun', arg[-4])")
    local result = process.gpurun("-e 'x=1' " .. q(path))
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("x=1\t-e\ttrue\tnil\n", result.stdout)
    os.remove(path)
  end)

  it("skips a first line starting with #", function()
    local path = script("#!/usr/bin/env gpurun\nprint('after shebang')\n")
    local result = process.gpurun(q(path))
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("after shebang\n", result.stdout)
    os.remove(path)
  end)

  it("runs -e statements in order and -l libraries", function()
    local result = process.gpurun("-e 'io.write(1)' -l string -e 'io.write(2, type(string.rep))'")
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("12function", result.stdout)
  end)

  it("supports -l name=module", function()
    local result = process.gpurun("-l g=gpurun -e 'print(type(g.device_count))'")
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("function\n", result.stdout)
  end)

  it("reads the script from stdin with -", function()
    local result = process.gpurun("- a b", { stdin = "print('stdin', ...)" })
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("stdin\ta\tb\n", result.stdout)
  end)

  it("reads stdin when there is no script and stdin is not a terminal", function()
    local result = process.gpurun("", { stdin = "print(6 * 7)" })
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("42\n", result.stdout)
  end)

  it("runs an interactive session with -i after its version lines, lines of any length", function()
    local long_comment = "-- " .. ("long "):rep(2000)
    -- Readline echoes the input wrapped at the screen's width, which with
    -- no terminal comes from $COLUMNS or else terminfo (80 for xterm, with
    -- \r at each wrap, on a bare Debian 12): a width past the line, so
    -- that the echo is the line as typed.
    local result = process.gpurun("-i", { stdin = "x = 6 *\n7\n" .. long_comment .. "\nx\n",
      env = { COLUMNS = "100000" } })
    assert.are.equal(0, result.code, result.stderr)
    assert.matches("^gpurun %d+%.%d+%.%d+\nNVRTC [^\n]*\nCUDA driver[^\n]*\nLua 5%.4[^\n]*\n> ",
      result.stdout)
    local session = "\n> x = 6 *\n>> 7\n> " .. long_comment .. "\n> x\n42\n> \n"
    assert.are.equal(session, result.stdout:sub(-#session))
    assert.are.equal("", result.stderr)
  end)

  it("stops handling options at --", function()
    local path = script("print(...)")
    local result = process.gpurun("-- " .. q(path) .. " -v")
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("-v\n", result.stdout)
    os.remove(path)
  end)

  it("prints gpurun, NVRTC and CUDA driver versions, then Lua's banner, with -v and --version", function()
    for _, flag in ipairs({ "-v", "--version" }) do
      local result = process.gpurun(flag)
      assert.are.equal(0, result.code, result.stderr)
      assert.matches("^gpurun %d+%.%d+%.%d+\nNVRTC %d+%.%d+\nCUDA driver[^\n]*\n"
        .. "Lua 5%.4%.%d+  Copyright %(C%) 1994%-%d+ Lua%.org, PUC%-Rio\n$", result.stdout)
    end
  end)

  it("prints the -v lines docs/command-line.md shows, in that order, also without a driver", function()
    local markdown = require("spec.support.markdown")
    local file = assert(io.open("docs/command-line.md"))
    local shown = markdown.marked(markdown.blocks(file:read("a")), "output: gpurun -v")
    file:close()
    assert(shown, "docs/command-line.md has no block marked <!-- output: gpurun -v -->")
    -- The shown lines as patterns: any version numbers, any reason in parentheses.
    local pattern = shown.text:gsub("%b()", "\1"):gsub("[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0")
      :gsub("%d+", "%%d+"):gsub("\1", "%%([^\n]+%%)")
    local result = process.gpurun("-v", { env = { GPURUN_CUDA_DRIVER = "/nonexistent/libcuda.so.1" } })
    assert.are.equal(0, result.code, result.stderr)
    assert.matches("^" .. pattern .. "$", result.stdout)
  end)

  it("prints what -e prints on the line right after Lua's banner, as lua -v -e does", function()
    local result = process.gpurun("-v -e \"print'hello'\"")
    assert.are.equal(0, result.code, result.stderr)
    assert.matches("\nLua 5%.4%.%d+  Copyright [^\n]*\nhello\n$", result.stdout)
  end)

  it("reports the CUDA driver version in -v #gpu", function()
    local result = process.gpurun("-v")
    assert.are.equal(0, result.code, result.stderr)
    assert.matches("\nCUDA driver %d+%.%d+\n", result.stdout)
  end)

  describe("with a stand-in driver (spec/support/fake_libcuda.c)", function()
    local driver, record
    lazy_setup(function()
      local cuda = os.getenv("CUDA_HOME") or "/usr/local/cuda"
      driver, record = os.tmpname() .. ".so", os.tmpname()
      local built = process.run(("cc -shared -fPIC -Wall -Wextra -Werror -I%s "
        .. "spec/support/fake_libcuda.c -o %s"):format(q(cuda .. "/include"), q(driver)))
      assert.are.equal(0, built.code, built.stderr)
    end)
    lazy_teardown(function()
      os.remove(driver)
      os.remove(record)
    end)

    local function with_driver(args)
      os.remove(record)
      local result = process.gpurun(args, { env = { GPURUN_CUDA_DRIVER = driver,
        GPURUN_FAKE_CUDA_RECORD = record } })
      local file = io.open(record)
      result.record = file and file:read("a") or ""
      if file then file:close() end
      return result
    end

    it("-v prints the driver's version without starting it (no cuInit)", function()
      local result = with_driver("-v")
      assert.are.equal(0, result.code, result.stderr)
      assert.matches("\nCUDA driver 13%.0\nLua 5%.4", result.stdout)
      assert.are.equal("", result.record)
    end)

    it("starts it on first use, also after -v opened it", function()
      local result = with_driver("-v -e 'print(require(\"gpurun\").device_count())'")
      assert.are.equal(0, result.code, result.stderr)
      assert.matches("\n0\n$", result.stdout)
      assert.are.equal("cuInit\n", result.record)
    end)
  end)

  it("prints usage with -h and --help", function()
    for _, flag in ipairs({ "-h", "--help" }) do
      local result = process.gpurun(flag)
      assert.are.equal(0, result.code)
      assert.matches("usage: gpurun %[options%] %[script %[args%]%]", result.stdout)
    end
  end)

  it("exits 2 on a usage error", function()
    local unknown = process.gpurun("-z")
    assert.are.equal(2, unknown.code)
    assert.matches("unrecognized option '%-z'", unknown.stderr)
    assert.matches("usage:", unknown.stderr)
    local missing = process.gpurun("-e")
    assert.are.equal(2, missing.code)
    assert.matches("'%-e' needs argument", missing.stderr)
  end)

  it("prints 'gpurun: message' and a traceback and exits 1 on a script error", function()
    local path = script("local function inner() error('boom') end\ninner()\n")
    local result = process.gpurun(q(path))
    assert.are.equal(1, result.code)
    assert.matches("^gpurun: [^\n]*:1: boom\nstack traceback:\n", result.stderr)
    assert.matches("in local 'inner'", result.stderr)
    os.remove(path)
  end)

  it("exits 1 on a syntax error and on a missing script", function()
    local syntax = process.gpurun("-e 'x = = 1'")
    assert.are.equal(1, syntax.code)
    assert.matches("^gpurun: ", syntax.stderr)
    local missing = process.gpurun(q("/nonexistent/script.lua"))
    assert.are.equal(1, missing.code)
    assert.matches("cannot open /nonexistent/script.lua", missing.stderr)
  end)

  it("reports error objects that are not strings", function()
    local result = process.gpurun("-e 'error(setmetatable({}, {__tostring = function() return \"custom\" end}))'")
    assert.are.equal(1, result.code)
    assert.matches("^gpurun: custom", result.stderr)
    local plain = process.gpurun("-e 'error({})'")
    assert.matches("error object is a table value", plain.stderr)
  end)

  it("honours os.exit codes", function()
    assert.are.equal(7, process.gpurun("-e 'os.exit(7)'").code)
    assert.are.equal(0, process.gpurun("-e 'os.exit(true, true)'").code)
  end)

  it("honours LUA_PATH and LUA_INIT, and -E ignores them", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. q(dir)))
    local file = assert(io.open(dir .. "/pathmod.lua", "w"))
    file:write("return { answer = 42 }")
    file:close()
    local env = { LUA_PATH = dir .. "/?.lua;;", LUA_INIT = "INITIALISED = 'yes'" }
    local result = process.gpurun("-e 'print(require(\"pathmod\").answer, INITIALISED)'", { env = env })
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("42\tyes\n", result.stdout)
    local ignored = process.gpurun("-E -e 'print(pcall(require, \"pathmod\"), INITIALISED)'", { env = env })
    assert.matches("^false", ignored.stdout)
    local init_file = process.gpurun("-e 'print(FROM_FILE)'",
      { env = { LUA_INIT = "@" .. dir .. "/init.lua" } })
    assert.are.equal(1, init_file.code) -- the file does not exist
    os.execute("rm -rf " .. q(dir))
  end)

  it("finds require('gpurun') and its Lua library from any working directory", function()
    local result = process.run("cd / && " .. q(process.gpurun_bin())
      .. " -e 'print(require(\"gpurun\").version, select(2, require(\"gpurun.bench\")))'")
    assert.are.equal(0, result.code, result.stderr)
    local source_dir = assert(os.getenv("PWD"))
    assert.are.equal(require("gpurun").version .. "\t" .. source_dir .. "/lua/gpurun/bench.lua\n",
      result.stdout)
  end)

  it("finds its Lua library through a searcher, leaving package.path as lua sets it", function()
    local result = process.gpurun("-l gpurun.check -e 'print(package.path)'",
      { env = { LUA_PATH = "/nowhere/?.lua" } })
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("/nowhere/?.lua\n", result.stdout)
    local from_env = process.gpurun("-e 'print(select(2, require(\"gpurun.check\")))'",
      { env = { GPURUN_LUA_DIR = "/nowhere" } })
    assert.are.equal(1, from_env.code)
    assert.matches("no file '/nowhere/gpurun/check.lua'", from_env.stderr, 1, true)
  end)

  it("finds its Lua modules after cmake --install, from any directory", function()
    local build_dir = process.gpurun_bin():match("^(.*)/[^/]*$")
    local prefix = os.tmpname()
    os.remove(prefix)
    local install = process.run("cmake --install " .. q(build_dir) .. " --prefix " .. q(prefix))
    assert.are.equal(0, install.code, install.stderr)
    local result = process.run("cd / && env -u GPURUN_LUA_DIR " .. q(prefix .. "/bin/gpurun")
      .. " -e 'print(select(2, require(\"gpurun.bench\")))'")
    os.execute("rm -rf " .. q(prefix))
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal(prefix .. "/share/lua/5.4/gpurun/bench.lua\n", result.stdout)
  end)

  it("loads Lua C modules installed on the system", function()
    local result = process.gpurun("-e 'local lfs = require(\"lfs\"); local cjson = require(\"cjson\"); "
      .. "print(type(lfs.currentdir()), cjson.encode({1}))'")
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("string\t[1]\n", result.stdout)
  end)

  it("turns Ctrl-C into an 'interrupted!' error and exits 1", function()
    local result = process.interrupt(process.gpurun_command()
      .. " -e 'local t <close> = setmetatable({}, {__close = function() print(\"closed\") end}) "
      .. "while true do end' & pid=$!; sleep 0.5")
    assert.are.equal(1, result.code)
    assert.matches("^gpurun: interrupted!\nstack traceback:", result.stderr)
    assert.are.equal("closed\n", result.stdout)
  end)
end)
