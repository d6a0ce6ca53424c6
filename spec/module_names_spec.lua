-- Every module name the docs give, or ever gave, loads: a script written
-- against the docs of its day keeps working after files move.
local gpurun = require("gpurun")
local files = require("spec.support.files")

-- The names `require("gpurun...")` took in README.md and docs/ over their
-- history (git log -p -- README.md docs), whether or not the docs still
-- give them, and the library's modules docs/library.md names.
local EVER_DOCUMENTED = {
  "gpurun", "gpurun.bench", "gpurun.compute.elementwise", "gpurun.dist", "gpurun.elementwise",
  "gpurun.kernels", "gpurun.nvtx", "gpurun.samples.kernels", "gpurun.testing", "gpurun.timeline",
  "gpurun.args", "gpurun.check", "gpurun.report", "gpurun.plot", "gpurun.progress", "gpurun.sweep",
  "gpurun.sweep.sizes", "gpurun.sweep.measure", "gpurun.sweep.present", "gpurun.breakdown",
  "gpurun.shell", "gpurun.options", "gpurun.npy", "gpurun.python_literal", "gpurun.quoted",
}

-- The names the docs give now.
local function documented_now()
  local names, seen = {}, {}
  local pipe = assert(io.popen("ls README.md docs/*.md"))
  for path in pipe:lines() do
    local text = assert(files.read(path), path)
    for name in text:gmatch("require%s*%(?%s*[\"'](gpurun[%w_%.]*)[\"']") do
      if not seen[name] then
        seen[name] = true
        names[#names + 1] = name
      end
    end
  end
  pipe:close()
  return names
end

describe("module names", function()
  it("loads every one the docs give now", function()
    local names = documented_now()
    assert.is_true(#names >= 8, ("found only %d names in the docs"):format(#names))
    for _, name in ipairs(names) do
      local ok, err = pcall(require, name)
      assert(ok, ("require(%q), which the docs give: %s"):format(name, tostring(err)))
    end
  end)

  it("loads every one the docs ever gave", function()
    for _, name in ipairs(EVER_DOCUMENTED) do
      local ok, err = pcall(require, name)
      assert(ok, ("require(%q), which the docs gave: %s"):format(name, tostring(err)))
    end
  end)

  -- Lua's own searcher (scripts under lua5.4, busted's --helper) finds
  -- gpurun.x only at gpurun/x.lua: a subsystem's file keeps its public
  -- name as a file at the top that returns it.
  it("loads each file of script/ and io/ under its public name, as one module", function()
    local pipe = assert(io.popen("cd lua && find gpurun/script gpurun/io -name '*.lua' | sort"))
    local count = 0
    for path in pipe:lines() do
      local real = path:gsub("%.lua$", ""):gsub("/", ".")
      local public = real:gsub("^gpurun%.%w+%.", "gpurun.")
      assert(files.read("lua/" .. public:gsub("%.", "/") .. ".lua"), public .. " has no file at the top")
      assert(rawequal(require(real), require(public)), public .. " is not " .. real)
      count = count + 1
    end
    pipe:close()
    assert.is_true(count >= 15, ("found only %d files"):format(count))
  end)

  it("gives gpurun.elementwise as the docs did: callable, with elementwise and pipeline", function()
    local ew = require("gpurun.elementwise")
    assert.are.equal(require("gpurun.compute.elementwise"), ew)
    local double = ew("float32 x", "float32 y", "y = 2 * x", "double_it")
    assert.matches("y = 2 %* x", double.source)
    local axpby = ew.elementwise("float32 x, float32 y, float32 a", "float32 r", "r = a * x + y", "axpby")
    assert.are.equal("axpby", axpby.name)
    local pipe = ew.pipeline("float32 a, float32 b", { "float32 r1 = a + b", "float32 r2 = r1 * a" },
                             "r2", "two")
    assert.are.equal(1, #pipe.kernels)
    assert.are.equal("function", type(gpurun.elementwise))
  end)

  it("gives gpurun.kernels as the docs did: the sample's kernel sources", function()
    local kernels = require("gpurun.kernels")
    assert.are.equal(require("gpurun.samples.kernels"), kernels)
    assert.truthy(kernels.source("cudagraphs"):find("vec_add", 1, true))
  end)
end)
