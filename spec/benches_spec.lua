-- Every bench/*.lua reads its command line through gpurun.args: --help
-- prints the usage and exits 0, and a bad option or value is one line
-- "<name>: error: <reason>" and exit 2, before any GPU work. No GPU needed.
local process = require("spec.support.process")

-- A bad value each bench refuses, and what the refusal names.
local BAD_VALUE = {
  ["bench/alloc_compare.lua"] = { "--sizes 4096,1e6", "--sizes: expected a positive integer, got '1e6'" },
  ["bench/bandwidth.lua"] = { "--sizes 1048576,6", "--sizes: expected a multiple of 4, got '6'" },
  ["bench/compare.lua"] = { "--cpu-launches 1001", "--cpu-launches: expected an integer from 0 to 1000" },
  ["bench/fused.lua"] = { "--sizes 4096,0", "--sizes: expected a positive integer, got '0'" },
  ["bench/graph_update.lua"] = { "--reps 0", "--reps: expected a positive integer, got '0'" },
  ["bench/method_call.lua"] = { "--calls=x", "--calls: expected a positive integer, got 'x'" },
  ["bench/pipeline_compare.lua"] = { "--stages 0", "--stages: expected a positive integer, got '0'" },
  ["bench/reduce.lua"] = { "--seconds x", "--seconds: expected a finite number, got 'x'" },
  ["bench/startup.lua"] = { "--reps -1", "--reps: expected a positive integer, got '-1'" },
}

local function benches()
  local list = {}
  local pipe = assert(io.popen("ls bench/*.lua"))
  for path in pipe:lines() do list[#list + 1] = path end
  pipe:close()
  return list
end

describe("the benches' command lines", function()
  it("has a bad value for every bench", function()
    for _, path in ipairs(benches()) do
      assert.truthy(BAD_VALUE[path], path .. " has no row in BAD_VALUE")
    end
  end)

  for path, bad in pairs(BAD_VALUE) do
    describe(path, function()
      it("prints its usage for --help", function()
        local result = process.gpurun(path .. " --help")
        assert.are.equal(0, result.code, result.stderr)
        assert.matches("^Usage: ", result.stdout)
        assert.are.equal("", result.stderr)
      end)

      it("refuses an unknown option and a bad value as usage errors", function()
        local result = process.gpurun(path .. " --no-such-option")
        assert.are.equal(2, result.code)
        assert.matches("^[%w_/.]+%.lua: error: unknown option '%-%-no%-such%-option'\n$", result.stderr)
        result = process.gpurun(path .. " " .. bad[1])
        assert.are.equal(2, result.code)
        assert.matches("^[%w_/.]+%.lua: error: " .. bad[2]:gsub("%p", "%%%0"), result.stderr)
      end)
    end)
  end

  it("hands --startup of compare.lua to startup.lua, options and all", function()
    local result = process.gpurun("bench/compare.lua --startup --reps 0")
    assert.are.equal(2, result.code)
    assert.are.equal("startup.lua: error: --reps: expected a positive integer, got '0'\n", result.stderr)
  end)
end)
