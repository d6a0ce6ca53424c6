-- gpurun.testing: the assertions on buffers and tables, the #gpu rule in
-- a user's busted run, and the user project the README describes, built
-- from the README's own text and run by its own commands on a machine
-- that has no GPU (GPURUN_CUDA_DRIVER points nowhere, so this holds on a
-- GPU host too).
local gpurun = require("gpurun")
local testing = require("gpurun.testing")
local markdown = require("spec.support.markdown")
local files = require("spec.support.files")
local process = require("spec.support.process")
local expect = require("spec.support.expect")
local error_of = expect.error_of
local assert_contains = expect.contains

local q = process.quote
local NO_GPU = "GPURUN_CUDA_DRIVER=/nonexistent/libcuda.so.1"

-- The message of a failed assertion.
local failure_of = error_of

describe("gpurun.testing's assertions on tables", function()
  it("pass within rtol and atol, by gpurun.check's rule", function()
    assert.buffer_near({ 1, 2, 3 }, { 1, 2, 3.00001 })
    assert.buffer_near(2, { 2, 2, 2 })
    assert.buffer_near({ 100 }, { 101 }, 0.02)
    assert.buffer_near({ 100 }, { 100.4 }, 0, 0.5)
    assert.buffer_equal({ 1, 2 }, { 1, 2 })
    assert.buffer_equal(0, { 0, 0 })
  end)

  it("name the worst element, its index and both values when they fail", function()
    -- The line docs/testing.md shows.
    assert_contains("buffer_near: 1 of 5 elements differ (rtol=1e-05, atol=1e-08); worst |difference| 1 at "
      .. "index 3: got 37, expected 36",
      failure_of(assert.buffer_near, { 12, 24, 36, 48, 60 }, { 12, 24, 37, 48, 60 }))
    assert_contains("buffer_equal: 1 of 2 elements differ (rtol=0, atol=0); worst |difference| 0.5 at index 2: "
      .. "got 2.5, expected 2", failure_of(assert.buffer_equal, { 1, 2 }, { 1, 2.5 }))
    assert_contains("buffer_near: 1 of 1 elements differ (rtol=0, atol=0.5)",
      failure_of(assert.buffer_near, { 100 }, { 101 }, 0, 0.5))
    assert_contains("buffer_near: got 2 elements, expected 3",
      failure_of(assert.buffer_near, { 1, 2, 3 }, { 1, 2 }))
  end)

  it("never pass NaN", function()
    assert_contains("1 of 1 elements differ", failure_of(assert.buffer_near, { 0 / 0 }, { 0 / 0 }))
    assert_contains("1 of 1 elements differ", failure_of(assert.buffer_equal, 1, { 0 / 0 }))
  end)

  it("take luassert's modifiers and a message of the spec's own", function()
    assert.is_not.buffer_near({ 1 }, { 2 })
    assert_contains("buffer_near: every element within rtol=1e-05, atol=1e-08",
      failure_of(assert.is_not.buffer_near, { 1 }, { 1 }))
    assert_contains("the kernel's result", failure_of(assert.buffer_near, { 1 }, { 2 }, nil, nil,
      "the kernel's result"))
    assert_contains("the copy", failure_of(assert.buffer_equal, { 1 }, { 2 }, "the copy"))
  end)

  it("refuse arguments of the wrong kind at the spec's line", function()
    local message = error_of(function() assert.buffer_near({ 1 }, "1") end)
    assert_contains("bad argument #2 to 'buffer_near' (gpurun.Buffer, gpurun.PinnedBuffer or table of numbers "
      .. "expected, got string)", message)
    assert.matches("^spec/testing_spec%.lua:%d+: ", message)
    assert_contains("bad argument #1 to 'buffer_equal' (gpurun.Buffer, gpurun.PinnedBuffer, table of numbers or "
      .. "number expected, got nil)", error_of(assert.buffer_equal, nil, { 1 }))
    assert_contains("buffer_near: bad argument #2 to 'check.tables' (element 2 is string, not a number)",
      error_of(assert.buffer_near, { 1, 2 }, { 1, "2" }))
  end)
end)

describe("gpurun.testing's rule", function()
  it("says what it left out, as gpurun's own suite says it", function()
    local rule = testing.gpu
    assert.are.equal(gpurun.device_count(), rule.device_count)
    assert.are.equal(rule.device_count > 0, rule.available)
    assert.is_true(testing.has_tag("adds #gpu", "#gpu"))
    assert.is_false(testing.has_tag("adds", "#gpu"))
    assert.is_false(rule.report) -- spec/support/summary_output.lua writes the lines itself
    -- What the rule left out so far of this run, one line per tag.
    for _, line in ipairs(testing.summary_lines()) do
      local known = line:match("^%d+ spec%(s%) tagged #gpu excluded: no usable CUDA GPU %(.+%)$")
        or line:match("^%d+ spec%(s%) tagged #multigpu excluded: %d+ CUDA device%(s%) visible, these need 2 or more$")
        or line:match("^#gpu specs ran on %d+ CUDA device%(s%)$")
      assert.truthy(known, line)
    end
  end)
end)

describe("gpurun.testing's assertions on buffers", function()
  before_each(function()
    gpurun.Device(0):set_current()
  end)

  it("compare on the device against a buffer or a number, and on the host against a table #gpu", function()
    local x <close> = gpurun.array({ 1, 2, 3, 4 }, "float32")
    local same <close> = gpurun.array({ 1, 2, 3, 4 }, "float64")
    assert.buffer_near(same, x)
    assert.buffer_equal({ 1, 2, 3, 4 }, x)
    assert.buffer_near({ 1, 2, 3, 4 }, same:to_table())
    assert.buffer_near(x, { 1, 2, 3, 4 })
    local threes <close> = gpurun.full(1000, 3, "int32")
    assert.buffer_equal(3, threes)
    local pinned <close> = gpurun.pinned(4, "float32")
    pinned:copy_from({ 1, 2, 3, 4 })
    assert.buffer_equal(x, pinned)
  end)

  it("name the worst element of a buffer that fails #gpu", function()
    local y <close> = gpurun.array({ 12, 24, 37, 48, 60 }, "float32")
    local expected <close> = gpurun.array({ 12, 24, 36, 48, 60 }, "float32")
    local line = "buffer_near: 1 of 5 elements differ (rtol=1e-05, atol=1e-08); worst |difference| 1 at index 3: "
      .. "got 37, expected 36"
    assert_contains(line, failure_of(assert.buffer_near, expected, y))
    assert_contains(line, failure_of(assert.buffer_near, { 12, 24, 36, 48, 60 }, y))
    assert_contains("buffer_equal: 5 of 5 elements differ", failure_of(assert.buffer_equal, 1, y))
    local short <close> = gpurun.zeros(3, "float32")
    assert_contains("buffer_near: got 5 elements, expected 3", failure_of(assert.buffer_near, short, y))
  end)
end)

-- The first of `names` on PATH, or nil.
local function command_path(name)
  local pipe = io.popen("command -v " .. q(name))
  local path = pipe and pipe:read("l")
  if pipe then pipe:close() end
  return path ~= "" and path or nil
end

local ROOT = os.getenv("PWD") or "."

-- Runs a shell command in `folder`, without a GPU unless with_gpu, with
-- gpurun on PATH and its module and Lua library where an install would put
-- them.
local function run_in(folder, command, with_gpu)
  local bin_dir = process.gpurun_bin():match("^(.*)/[^/]+$")
  return process.run(("cd %s && PATH=%s:\"$PATH\" %s LUA_CPATH_5_4=%s LUA_PATH_5_4=%s %s"):format(
    q(folder), q(bin_dir), with_gpu and "" or NO_GPU, q(bin_dir .. "/?.so;;"), q(ROOT .. "/lua/?.lua;;"),
    command))
end

local function write_file(path, text)
  assert(os.execute("mkdir -p " .. q(path:match("^(.*)/") or ".")))
  local file = assert(io.open(path, "w"))
  file:write(text)
  file:close()
end

-- The first of busted's launcher (a `lua` script) and the interpreters it
-- runs under that is not here, or nil; gpurun is the binary under test,
-- which run_in puts on PATH.
local function missing_tools(interpreters)
  for _, name in ipairs({ "busted", "lua", table.unpack(interpreters) }) do
    if name ~= "gpurun" and not command_path(name) then return name end
  end
  return nil
end

describe("a user's own specs", function()
  local folder
  before_each(function() folder = files.temporary_folder() end)
  after_each(function() files.remove_folder(folder) end)

  it("skip the specs tagged for one GPU or two when there is none, and count them", function()
    local missing = missing_tools({ "gpurun" })
    if missing then return pending(missing .. " is not on PATH") end
    write_file(folder .. "/spec/rule_spec.lua", [[
require("gpurun.testing")
describe("the rule", function()
  it("runs what needs no GPU", function() assert.buffer_near({ 1 }, { 1 }) end)
  it("leaves out what needs one #gpu", function() error("ran without a GPU") end)
  it("and what needs two #multigpu", function() error("ran without two GPUs") end)
end)
]])
    local result = run_in(folder, "busted --lua=gpurun --helper=gpurun.testing")
    assert.are.equal(0, result.code, result.stdout .. result.stderr)
    assert_contains("1 success / 0 failures / 0 errors / 0 pending", result.stdout)
    assert_contains("1 spec(s) tagged #gpu excluded: no usable CUDA GPU (", result.stdout)
    assert_contains("1 spec(s) tagged #multigpu excluded: 0 CUDA device(s) visible", result.stdout)
  end)

  it("refuse the GPU tag on a describe block where no GPU is usable, saying where it belongs", function()
    local missing = missing_tools({ "gpurun" })
    if missing then return pending(missing .. " is not on PATH") end
    write_file(folder .. "/spec/tagged_spec.lua", [[
require("gpurun.testing")
describe("a whole block #gpu", function() it("x", function() end) end)
]])
    local result = run_in(folder, "busted --lua=gpurun --helper=gpurun.testing")
    assert.are_not.equal(0, result.code)
    assert_contains("tag #gpu belongs on `it` blocks, not on `describe`", result.stdout .. result.stderr)
  end)

  it("run a describe block tagged #gpu as any other where a GPU is usable #gpu", function()
    local missing = missing_tools({ "gpurun" })
    if missing then return pending(missing .. " is not on PATH") end
    write_file(folder .. "/spec/tagged_spec.lua", [[
require("gpurun.testing")
describe("a whole block #gpu", function() it("x", function() end) end)
]])
    local result = run_in(folder, "busted --lua=gpurun --helper=gpurun.testing", true)
    assert.are.equal(0, result.code, result.stdout .. result.stderr)
    assert_contains("1 success / 0 failures / 0 errors / 0 pending", result.stdout)
  end)

  -- Writes the README's user project into the folder; -> its commands.
  local function readme_project()
    local blocks = markdown.blocks(assert(files.read("README.md")))
    local count = 0
    for _, block in ipairs(blocks) do
      local path = block.mark and block.mark:match("^user file:%s*(%S+)$")
      if path then
        write_file(folder .. "/" .. path, block.text)
        count = count + 1
      end
    end
    assert.is_true(count > 0, "the README has no <!-- user file: PATH --> block")
    local block = assert(markdown.marked(blocks, "user commands"), "the README has no <!-- user commands --> block")
    local commands = {}
    for line in block.text:gmatch("[^\n]+") do commands[#commands + 1] = (line:gsub("%s+#%s.*$", "")) end
    assert.is_true(#commands > 0, "the README's user commands block is empty")
    return commands
  end

  -- Runs each command (pending where its tools are missing) and checks
  -- its output with check(result).
  local function run_commands(commands, with_gpu, check)
    local bin_dir = process.gpurun_bin():match("^(.*)/[^/]+$")
    local has_module = io.open(bin_dir .. "/gpurun.so") ~= nil
    for _, command in ipairs(commands) do
      local missing = missing_tools({ command:match("%-%-lua=(%S+)") })
      if missing then
        pending(missing .. " is not on PATH: " .. command)
      elseif not has_module and not command:find("--lua=gpurun", 1, true) then
        -- Sanitizer builds make no gpurun.so: it could load only into an
        -- interpreter built with the same sanitizers.
        pending(bin_dir .. " has no gpurun.so (a sanitizer build): " .. command)
      else
        local result = run_in(folder, command, with_gpu)
        assert.are.equal(0, result.code, command .. ":\n" .. result.stdout .. result.stderr)
        check(result)
      end
    end
  end

  it("written from the README alone run by its commands, the GPU ones skipped and counted", function()
    run_commands(readme_project(), false, function(result)
      assert_contains("1 success / 0 failures / 0 errors / 0 pending", result.stdout)
      assert_contains("1 spec(s) tagged #gpu excluded: no usable CUDA GPU (", result.stdout)
    end)
  end)

  it("written from the README alone run by busted in lua5.4 from another prefix, with install.md's paths", function()
    local missing = missing_tools({ "lua5.4" })
    if missing then return pending(missing .. " is not on PATH") end
    local bin_dir = process.gpurun_bin():match("^(.*)/[^/]+$")
    if not files.read(bin_dir .. "/gpurun.so") then
      return pending(bin_dir .. " has no gpurun.so (a sanitizer build)")
    end
    local block = assert(markdown.marked(markdown.blocks(assert(files.read("docs/install.md"))), "fresh root: prefix"),
      "docs/install.md has no <!-- fresh root: prefix --> block")
    local prefix, env = folder .. "/prefix", {}
    for name, value in block.text:gmatch('export (LUA_C?PATH_5_4)="([^"]*)"') do
      env[#env + 1] = name .. "=" .. q((value:gsub("/opt/gpurun", prefix)))
    end
    assert.are.equal(2, #env, "install.md's prefix block sets LUA_CPATH_5_4 and LUA_PATH_5_4")
    local installed = process.run(("cmake --install %s --prefix %s"):format(q(bin_dir), q(prefix)))
    assert.are.equal(0, installed.code, installed.stdout .. installed.stderr)
    readme_project()
    local result = process.run(("cd %s && %s %s busted --lua=lua5.4 --helper=gpurun.testing"):format(
      q(folder), NO_GPU, table.concat(env, " ")))
    assert.are.equal(0, result.code, result.stdout .. result.stderr)
    assert_contains("1 spec(s) tagged #gpu excluded: no usable CUDA GPU (", result.stdout)
  end)

  it("written from the README alone run by its commands, all of them on a GPU #gpu", function()
    run_commands(readme_project(), true, function(result)
      assert_contains("2 successes / 0 failures / 0 errors / 0 pending", result.stdout)
      assert_contains("#gpu specs ran on ", result.stdout)
    end)
  end)
end)
