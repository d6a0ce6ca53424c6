-- gpurun's command line against Debian's lua5.4 (5.4.4, the first on PATH):
-- each case runs the same command through both, each started as `lua` from
-- PATH (so argv[0], the prefix of their messages, is the same word), and
-- compares stdout, stderr and the exit code. The deliberate differences,
-- listed in docs/command-line.md, have cases of their own that pin down what each
-- one does.
local process = require("spec.support.process")
local q = process.quote

local LUA = process.lua54() or "lua5.4"

-- A folder per interpreter, each holding a link named `lua` to it.
local dirs = {}

local function as_lua(which, args, options)
  return process.run(("PATH=%s:\"$PATH\" lua %s"):format(q(dirs[which]), args or ""), options)
end

-- Runs args through both: lua5.4's result, gpurun's.
local function both(args, options)
  return as_lua("lua5.4", args, options), as_lua("gpurun", args, options)
end

-- The outputs must be the same; `adjust` (optional) maps each result first.
local function same(args, options, adjust)
  local expected, actual = both(args, options)
  if adjust then
    expected, actual = adjust(expected), adjust(actual)
  end
  assert.are.same(expected, actual)
  return actual
end

-- The version lines that -i prints first: lua's banner, gpurun's block
-- (its -v, with the banner among them).
local VERSION_LINES = { "^gpurun %d", "^Lua 5%.4%.%d+  Copyright", "^NVRTC %d", "^CUDA driver" }

local function is_version_line(line)
  for _, pattern in ipairs(VERSION_LINES) do
    if line:find(pattern) then return true end
  end
  return false
end

local function without_version(result)
  local stdout = result.stdout
  while true do
    local line, rest = stdout:match("^([^\n]*)\n(.*)$")
    if not line or not is_version_line(line) then break end
    stdout = rest
  end
  return { stdout = stdout, stderr = result.stderr, code = result.code }
end

-- The interactive mode with `input` on a pipe, compared without the
-- version lines.
local function same_session(input, args)
  return same((args or "") .. " -i", { stdin = input }, without_version)
end

local function write_file(text, suffix)
  local path = os.tmpname() .. (suffix or ".lua")
  local file = assert(io.open(path, "w"))
  file:write(text)
  file:close()
  return path
end

-- Interrupts `lua <args>` half a second after it started. With
-- `blocked_read`, its stdin is a FIFO that another job of the shell keeps
-- open and silent (an explicit redirection: a background job's stdin is
-- /dev/null otherwise).
local function interrupted(which, args, blocked_read)
  local input = "/dev/null"
  local feed = ""
  if blocked_read then
    local fifo = os.tmpname()
    os.remove(fifo)
    input = '"$fifo"'
    feed = ("fifo=%s; mkfifo \"$fifo\"; sleep 10 >\"$fifo\" & feeder=$!\n"
      .. "trap 'kill $feeder; rm -f \"$fifo\"' EXIT\n"):format(q(fifo))
  end
  return process.interrupt(("%sPATH=%s:\"$PATH\" lua %s <%s & pid=$!; sleep 0.5")
    :format(feed, q(dirs[which]), args, input))
end

describe("gpurun as lua5.4", function()
  local root

  lazy_setup(function()
    assert(process.lua54(), "lua5.4 is not on PATH (apt-get install lua5.4): these specs compare gpurun with it")
    root = os.tmpname()
    os.remove(root)
    dirs["lua5.4"], dirs.gpurun = root .. "/lua5.4", root .. "/gpurun"
    for which, target in pairs({ ["lua5.4"] = LUA, gpurun = process.gpurun_bin() }) do
      assert(os.execute(("mkdir -p %s && ln -s %s %s/lua"):format(q(dirs[which]), q(target),
        q(dirs[which]))))
    end
    -- Each `lua` is the one it should be: a broken link would fail both alike.
    local probe = "-e 'print(_VERSION, package.preload.gpurun ~= nil)'"
    assert.are.same({ stdout = "Lua 5.4\tfalse\n", stderr = "", code = 0 }, as_lua("lua5.4", probe))
    assert.are.same({ stdout = "Lua 5.4\ttrue\n", stderr = "", code = 0 }, as_lua("gpurun", probe))
  end)

  lazy_teardown(function()
    if root then os.execute("rm -rf " .. q(root)) end
  end)

  describe("runs scripts and options as lua does:", function()
    it("arg and ... for a script with arguments, after -e", function()
      local path = write_file([[
        print(select("#", ...), ...)
        for i = -3, #arg do io.write(tostring(arg[i]), " ") end
        print()
      ]])
      same("-e 'x = 1' " .. q(path) .. " one 'two words' ''")
      os.remove(path)
    end)

    it("-e statements and -l libraries in order, -l g=mod, an argument joined to its option", function()
      same("-e 'io.write(1)' -l string -e 'io.write(type(string.rep))' -l s=string "
        .. "-e 'print(s == string)' '-eprint(2)' -ltable")
    end)

    it("a missing -l library: require's message, exit 1", function()
      local result = same("-l no_such_module -e 'print(1)'")
      assert.are.equal(1, result.code)
    end)

    it("the script '-' and no script at all read stdin, -- ends the options", function()
      same("- a b", { stdin = "print('stdin', ...)" })
      same("", { stdin = "print(6 * 7, arg[0])" })
      local path = write_file("print('file', ...)")
      same("-- " .. q(path) .. " -v")
      os.remove(path)
    end)

    it("-e and -v without a script leave stdin alone", function()
      same("-e 'print(1)'", { stdin = "print(2)" })
      same("-v -e 'print(3)'", { stdin = "print(4)" }, without_version)
    end)

    it("-v: what -e and a script print follows Lua's banner, as lua's own tests expect", function()
      local path = write_file("print('script', ...)")
      same("-v -e \"print'hello'\"", nil, without_version)
      same("-v " .. q(path) .. " x", nil, without_version)
      os.remove(path)
      -- The banner is the last version line, so -v's output ends as lua's.
      local expected, actual = both("-v -e \"print'hello'\"")
      assert.are.equal(expected.stdout, actual.stdout:sub(-#expected.stdout))
    end)

    it("a first line starting with # is skipped", function()
      local path = write_file("#!/usr/bin/env lua\nprint('after the shebang line')\n")
      same(q(path))
      os.remove(path)
    end)

    it("os.exit's status", function()
      assert.are.equal(7, same("-e 'os.exit(7)'").code)
      assert.are.equal(1, same("-e 'os.exit(false)'").code)
      assert.are.equal(0, same("-e 'io.write(1) os.exit(true, true)'").code)
    end)

    it("the garbage collector running, in generational mode", function()
      same("-e 'print(collectgarbage(\"isrunning\"), collectgarbage(\"incremental\"))'")
    end)

    it("warnings with -W and with @on, none without", function()
      same("-e 'warn(\"quiet\")'")
      same("-W -e 'warn(\"loud\", \"er\")'")
      same("-e 'warn(\"@on\") warn(\"on now\")'")
    end)

    it("'arg' that a -e statement took away", function()
      local path = write_file("print(...)")
      assert.are.equal(1, same("-e 'arg = nil' " .. q(path) .. " a").code)
      os.remove(path)
    end)
  end)

  describe("reports errors as lua does, prefixed with argv[0]:", function()
    it("a runtime error with its traceback, exit 1", function()
      local path = write_file("local function inner() error('boom') end\ninner()\n")
      local result = same(q(path))
      assert.matches("^lua: ", result.stderr)
      os.remove(path)
    end)

    it("syntax errors in -e and in a script", function()
      same("-e 'x = = 1'")
      local path = write_file("x = = 1\n")
      same(q(path))
      os.remove(path)
    end)

    it("a script that cannot be opened", function()
      same(q("/nonexistent/script.lua"))
    end)

    it("error objects that are not strings: a table, __tostring, nil, a number", function()
      same("-e 'error({})'")
      same("-e 'error(setmetatable({}, {__tostring = function() return \"custom\" end}))'")
      same("-e 'error(setmetatable({}, {__tostring = function() return 1 end}))'")
      same("-e 'error(nil)'")
      same("-e 'error(42)'")
    end)

    it("usage errors: the same first line", function()
      for _, args in ipairs({ "-z", "-e", "-l", "-e -x", "-vx", "-iE", "--foo" }) do
        local expected, actual = both(args)
        assert.are.equal(expected.stderr:match("^[^\n]*"), actual.stderr:match("^[^\n]*"))
        assert.matches("\nusage: lua %[options%] %[script %[args%]%]\n", actual.stderr)
        assert.are.equal("", actual.stdout)
      end
    end)

    it("Ctrl-C in a Lua loop: 'interrupted!' where it landed, exit 1", function()
      local args = q("local function spin() while true do end end spin()")
      local expected, actual = interrupted("lua5.4", "-e " .. args), interrupted("gpurun", "-e " .. args)
      assert.are.same({ expected.stdout, expected.stderr, expected.code },
        { actual.stdout, actual.stderr, actual.code })
      assert.matches("^lua: %(command line%):1: interrupted!\n", actual.stderr)
    end)

    it("Ctrl-C during a blocking read ends it at once", function()
      local args = "-e " .. q("print(io.read())")
      local expected = interrupted("lua5.4", args, true)
      local actual = interrupted("gpurun", args, true)
      assert.are.same({ expected.stdout, expected.stderr, expected.code },
        { actual.stdout, actual.stderr, actual.code })
      assert.matches("^lua: %(command line%):1: interrupted!\n", actual.stderr)
      assert.is_true(expected.elapsed_ms < 2000, "lua5.4 ended " .. expected.elapsed_ms .. " ms after SIGINT")
      assert.is_true(actual.elapsed_ms < 2000, "gpurun ended " .. actual.elapsed_ms .. " ms after SIGINT")
    end)
  end)

  describe("reads the environment as lua does:", function()
    local print_paths = "-e 'print(package.path) print(package.cpath)'"

    it("package.path and package.cpath: the defaults", function()
      same(print_paths)
    end)

    it("LUA_PATH and LUA_CPATH, ';;' standing for the default", function()
      same(print_paths, { env = { LUA_PATH = "/a/?.lua;;/b/?.lua", LUA_CPATH = ";;/c/?.so" } })
      same(print_paths, { env = { LUA_PATH = "/only/?.lua", LUA_CPATH = "/only/?.so" } })
    end)

    it("LUA_PATH_5_4 and LUA_CPATH_5_4 over LUA_PATH and LUA_CPATH", function()
      same(print_paths, { env = { LUA_PATH_5_4 = "/v/?.lua;;", LUA_PATH = "/x/?.lua",
                                  LUA_CPATH_5_4 = "/v/?.so", LUA_CPATH = "/x/?.so;;" } })
    end)

    it("-E: the defaults whatever the environment says", function()
      same("-E " .. print_paths, { env = { LUA_PATH = "/x/?.lua", LUA_CPATH_5_4 = "/v/?.so" } })
    end)

    it("require of a module that is nowhere: the same list of places", function()
      same("-e 'require(\"no_such_module\")'", { env = { LUA_PATH = "/a/?.lua;;" } })
    end)

    it("LUA_INIT, LUA_INIT_5_4 first, @file, an error in it, -E", function()
      local init = write_file("print('init file', arg ~= nil)")
      same("-e 'print(INIT)'", { env = { LUA_INIT = "INIT = 'from LUA_INIT'" } })
      same("-e 'print(INIT)'", { env = { LUA_INIT_5_4 = "INIT = 5.4", LUA_INIT = "INIT = 0" } })
      same("-e ''", { env = { LUA_INIT = "@" .. init } })
      same("-e ''", { env = { LUA_INIT = "@/nonexistent/init.lua" } })
      same("-e 'print(1)'", { env = { LUA_INIT = "error('in init')" } })
      same("-E -e 'print(INIT)'", { env = { LUA_INIT = "INIT = 1" } })
      os.remove(init)
    end)
  end)

  describe("has lua's interactive mode:", function()
    it("an expression prints its values ('return' added with a ';')", function()
      same_session("1 + 1\n'a', nil, 3\n1;\nnil\n\nx = 5\nx\n")
    end)

    it("'=expr' on a first line means 'return expr'", function()
      same_session("=1 + 2\n=math.pi\nfor i = 1, 1 do\n=i\nend\n")
    end)

    it("unfinished statements read more lines, joined with newlines", function()
      same_session("for i = 1, 2 do\nprint(i)\nend\nt = {\n1,\n2}\nprint(#t)\n"
        .. "s = [[one\ntwo]]\nprint(s)\nfunction f()\nreturn 'f'\nend\nf()\n")
    end)

    it("errors print without the program name, and the session goes on", function()
      local result = same_session("error('boom')\nx = = 1\nerror({})\nprint('after')\n")
      assert.matches("^stdin:1: boom\n", result.stderr)
      assert.are.equal(0, result.code)
    end)

    it("_PROMPT and _PROMPT2 through tostring, __tostring included", function()
      same_session("_PROMPT = 'one> '\n_PROMPT2 = 'two> '\nfor i = 1, 1 do\nend\n"
        .. "_PROMPT = setmetatable({}, {__tostring = function() return 'T> ' end})\n"
        .. "_PROMPT2 = 42\nif true then\nend\n_PROMPT = nil\n_PROMPT2 = nil\n")
    end)

    it("a print that fails: \"error calling 'print'\"", function()
      local result = same_session("print = function() error('no print') end\n1\n"
        .. "print = nil\n2\n")
      assert.matches("error calling 'print' %(attempt to call a nil value%)", result.stderr)
    end)

    it("more results than the stack can take for print: an error that ends the session", function()
      local result = same_session("return table.unpack({}, 1, 999980)\nprint('not reached')\n")
      assert.are.equal("stack overflow (too many results to print)\n", result.stderr)
      assert.are.equal(1, result.code)
    end)

    it("-i after a script and -e keeps their globals", function()
      local path = write_file("from_script = 42")
      same_session("from_script, from_e\n", "-e 'from_e = 1' " .. q(path))
      os.remove(path)
    end)

    it("a last line without a newline", function()
      same_session("print('last')")
    end)

    it("starts after the version when stdin is a terminal and there is nothing else to do", function()
      -- script(1) gives lua a terminal; the input comes once readline waits
      -- for it (an end of input typed before that could go unseen)
      local function on_terminal(which)
        local result = process.run(("{ (sleep 1; printf 'x = 1\\nx + 1\\n') | timeout 20 script -qec %s /dev/null; }")
          :format(q(("PATH=%s:\"$PATH\" lua"):format(q(dirs[which])))))
        local kept = {}
        for line in result.stdout:gmatch("[^\n]*\n?") do
          if not is_version_line(line) then kept[#kept + 1] = line end
        end
        result.stdout = table.concat(kept)
        return result
      end
      local expected, actual = on_terminal("lua5.4"), on_terminal("gpurun")
      assert.matches("> x %+ 1\r\n[^\n]*2\r\n", expected.stdout)
      assert.are.same(expected, actual)
    end)

    it("prints the version first, lua's banner among gpurun's lines", function()
      local expected, actual = both("-i", { stdin = "" })
      local banner = expected.stdout:match("^([^\n]*)\n")
      assert.matches("^Lua 5%.4", banner)
      assert.truthy(("\n" .. actual.stdout):find("\n" .. banner .. "\n", 1, true))
    end)
  end)

  describe("prints its version:", function()
    it("lua -v's line among gpurun -v's", function()
      local expected, actual = both("-v")
      assert.are.equal(0, actual.code)
      assert.truthy(("\n" .. actual.stdout):find("\n" .. expected.stdout, 1, true),
        "gpurun -v lacks lua5.4 -v's line " .. expected.stdout)
    end)
  end)

  describe("differs on purpose (docs/command-line.md: differences from lua5.4):", function()
    it("-h and --help print gpurun's help, where lua reports an unknown option", function()
      for _, flag in ipairs({ "-h", "--help" }) do
        local expected, actual = both(flag)
        assert.are.equal(1, expected.code)
        assert.matches("^lua: unrecognized option '" .. flag:gsub("%-", "%%-") .. "'", expected.stderr)
        assert.are.equal(0, actual.code)
        assert.matches("^usage: lua %[options%] %[script %[args%]%]\n", actual.stdout)
      end
    end)

    it("--version prints the versions, where lua reports an unknown option", function()
      local expected, actual = both("--version")
      assert.matches("^lua: unrecognized option '%-%-version'", expected.stderr)
      assert.are.same(as_lua("gpurun", "-v"), actual)
    end)

    it("a usage error exits 2, where lua exits 1", function()
      local expected, actual = both("-z")
      assert.are.equal(1, expected.code)
      assert.are.equal(2, actual.code)
    end)

    it("a failing script piped on stdin exits 1, where lua exits 0", function()
      local expected, actual = both("", { stdin = "error('piped')" })
      assert.are.equal(expected.stderr, actual.stderr)
      assert.are.equal(0, expected.code)
      assert.are.equal(1, actual.code)
    end)

    it("input that ends inside a statement reports its syntax error, as lua 5.4.6 does", function()
      local expected, actual = both("-i", { stdin = "_PROMPT2 = 'more> '\nfor i = 1, 2 do\n" })
      assert.are.equal("more> \n", expected.stderr) -- 5.4.4 reports the prompt left on its stack
      assert.are.equal("stdin:1: 'end' expected near <eof>\n", actual.stderr)
      assert.are.same(without_version(expected).stdout, without_version(actual).stdout)
    end)

    it("an error object that is not a string reaching the top: named so, where lua prints (null)", function()
      local input = "_PROMPT = setmetatable({}, {__tostring = function() error({}) end})\n"
      local expected, actual = both("-i", { stdin = input })
      assert.are.same({ "(null)\n", 1 }, { expected.stderr, expected.code })
      assert.are.same({ "(error object is not a string)\n", 1 }, { actual.stderr, actual.code })
    end)

    it("one more searcher, second, for gpurun.*, and gpurun in package.preload", function()
      local count = "-e 'print(#package.searchers, package.preload.gpurun ~= nil)'"
      local expected, actual = both(count)
      assert.are.equal("4\tfalse\n", expected.stdout)
      assert.are.equal("5\ttrue\n", actual.stdout)
    end)
  end)
end)
