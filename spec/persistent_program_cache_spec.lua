-- samples/2_CoreConcepts/persistentProgramCache.lua: its command line, its
-- kernel (lua/gpurun/samples/kernels/matmul_epilogue.cu under each
-- specialization) compiled, saved and read back without a GPU, and two runs
-- in two processes, a miss then a hit, on one (#gpu).
local gpurun = require("gpurun")
local kernels = require("gpurun.samples.kernels")
local files = require("spec.support.files")
local process = require("spec.support.process")

local SAMPLE = "samples/2_CoreConcepts/persistentProgramCache.lua"
local SMALL = { "--m", "64", "--n", "48", "--k", "40", "--warmup", "1", "--iterations", "2" }

local function run(...)
  local words = { process.quote(SAMPLE) }
  for _, list in ipairs({ ... }) do
    for _, word in ipairs(list) do words[#words + 1] = process.quote(word) end
  end
  return process.gpurun(table.concat(words, " "))
end

local function field(stdout, name)
  return stdout:match("\n" .. name .. ":%s+([^\n]*)")
end

describe(SAMPLE, function()
  local folder = files.folder_per_spec(before_each, after_each)

  it("prints its options for --help and refuses bad values before any GPU work", function()
    local result = run({ "--help" })
    assert.are.equal(0, result.code, result.stderr)
    for _, option in ipairs({ "--device", "--m", "--n", "--k", "--tile-size", "--epilogue", "--cache-dir",
                              "--clear-cache", "--warmup", "--iterations" }) do
      assert.truthy(result.stdout:find("   " .. option .. " ", 1, true), option)
    end
    local refusals = {
      { { "--tile-size", "8" }, "--tile-size: expected one of 16, 32, got '8'" },
      { { "--epilogue", "gelu" }, "--epilogue: expected one of identity, relu, got 'gelu'" },
      { { "--k", "0" }, "--k: expected a positive integer, got '0'" },
      { { "--iterations", "x" }, "--iterations: expected a positive integer, got 'x'" },
      { { "--m", "4294967296" }, "--m must fit the kernel's int, got 4294967296" },
    }
    for _, refusal in ipairs(refusals) do
      result = run(refusal[1])
      assert.are.equal(2, result.code)
      assert.are.equal("persistentProgramCache.lua: error: " .. refusal[2] .. "\n", result.stderr)
    end
  end)

  it("clears the cache's cubins, and only those, then ends with one line without a GPU", function()
    local dir = folder()
    if gpurun.device_count() > 0 then return end
    for _, name in ipairs({ "0123.cubin", "notes.txt" }) do assert(io.open(dir .. "/" .. name, "w")):close() end
    local result = run({ "--cache-dir", dir, "--clear-cache" })
    assert.are.equal(1, result.code)
    assert.matches("^persistentProgramCache%.lua: no CUDA GPU available: [^\n]+\n$", result.stderr)
    assert.is_nil(io.open(dir .. "/0123.cubin"))
    assert(io.open(dir .. "/notes.txt")):close()
  end)

  it("compiles each specialization of its kernel, saved and read back as the same cubin", function()
    local dir = folder()
    for _, tile in ipairs({ 16, 32 }) do
      for _, epilogue in ipairs({ "(value)", "((value) > 0.0f ? (value) : 0.0f)" }) do
        local source = ("#define TILE_SIZE %d\n#define EPILOGUE(value) %s\n"):format(tile, epilogue)
          .. kernels.source("matmul_epilogue")
        local code <close> = gpurun.Program(source, "c++", { std = "c++17", arch = "sm_90" })
          :compile("cubin", { name = "matmul_epilogue.cu" })
        local path = dir .. "/k.cubin"
        code:save(path)
        local loaded <close> = gpurun.ObjectCode.from_cubin({ path = path }, { name = "persistentProgramCache" })
        assert.are.equal(code.code, loaded.code)
        assert.truthy(loaded.code:find("matmul_epilogue", 1, true))
      end
    end
  end)

  it("misses and stores, then hits in a second process; a damaged entry is compiled again #gpu", function()
    local dir = folder()
    local cache = { "--cache-dir", dir }
    local first = run(SMALL, cache, { "--clear-cache" })
    assert.are.equal(0, first.code, first.stderr)
    assert.are.equal("MISS", field(first.stdout, "Cache status"))
    assert.matches("^%d+%.%d%d%d ms", field(first.stdout, "Compile time"))
    assert.matches("^%d+%.%d%d%d ms$", field(first.stdout, "Cache store"))
    assert.are.equal("PASSED", field(first.stdout, "Validation"))
    assert.matches("^\nPersistent Program Cache\nDevice: ", first.stdout)

    local second = run(SMALL, cache)
    assert.are.equal(0, second.code, second.stderr)
    assert.are.equal("HIT", field(second.stdout, "Cache status"))
    assert.are.equal(field(first.stdout, "Cache key"), field(second.stdout, "Cache key"))
    assert.are.equal("skipped", field(second.stdout, "Compile time"))
    assert.is_nil(field(second.stdout, "Cache store"))
    assert.are.equal("PASSED", field(second.stdout, "Validation"))

    local other = run(SMALL, cache, { "--tile-size", "32", "--epilogue", "identity" })
    assert.are.equal(0, other.code, other.stderr)
    assert.are.equal("MISS", field(other.stdout, "Cache status"))
    assert.are.equal("PASSED", field(other.stdout, "Validation"))

    local entry = dir .. "/" .. field(first.stdout, "Cache key"):gsub("%.%.%.$", "")
    local pipe = assert(io.popen("ls " .. process.quote(dir)))
    local entry_file
    for name in pipe:lines() do
      if (dir .. "/" .. name):sub(1, #entry) == entry then entry_file = dir .. "/" .. name end
    end
    pipe:close()
    local file = assert(io.open(assert(entry_file, "no entry file for the first run's key"), "wb"))
    file:write("\127ELF truncated")
    file:close()
    local damaged = run(SMALL, cache)
    assert.are.equal(0, damaged.code, damaged.stderr)
    assert.matches("^persistentProgramCache%.lua: cache entry [^\n]+ refused %([^\n]+%); compiling again\n$",
      damaged.stderr)
    assert.are.equal("MISS", field(damaged.stdout, "Cache status"))
    assert.are.equal("PASSED", field(damaged.stdout, "Validation"))
  end)
end)
