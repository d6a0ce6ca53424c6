-- samples/2_CoreConcepts/jitLtoLinking.lua: its command line, and its two
-- links of lua/gpurun/samples/kernels/apply_transform.cu and
-- user_transform.cu, which nvJitLink makes without a GPU; the sample itself
-- runs on one (#gpu).
local gpurun = require("gpurun")
local kernels = require("gpurun.samples.kernels")
local process = require("spec.support.process")

local SAMPLE = "samples/2_CoreConcepts/jitLtoLinking.lua"
local ARCH = "sm_90"

local function run(...)
  local words = { process.quote(SAMPLE) }
  for _, word in ipairs({ ... }) do words[#words + 1] = process.quote(word) end
  return process.gpurun(table.concat(words, " "))
end

-- The sample's two halves compiled to `target` and linked to `output`.
local function link(target, program_options, linker_options, output)
  local main <close> = gpurun.Program(kernels.source("apply_transform"), "c++", program_options)
    :compile(target, { name = "apply_transform.cu" })
  local user <close> = gpurun.Program(kernels.source("user_transform"), "c++", program_options)
    :compile(target, { name = "user_transform.cu" })
  local linker <close> = gpurun.Linker(main, user, gpurun.LinkerOptions(linker_options))
  return linker:link(output or "cubin")
end

describe(SAMPLE, function()
  it("prints its options for --help and refuses a bad one before any GPU work", function()
    local result = run("--help")
    assert.are.equal(0, result.code, result.stderr)
    assert.matches("^Usage: jitLtoLinking%.lua ", result.stdout)
    assert.truthy(result.stdout:find("--elements <elements> Number of float32 elements. (default: 65536)", 1, true))
    assert.truthy(result.stdout:find("--device <device>     CUDA device id. (default: 0)", 1, true))
    result = run("--elements", "0")
    assert.are.equal(2, result.code)
    assert.are.equal("jitLtoLinking.lua: error: --elements: expected a positive integer, got '0'\n", result.stderr)
  end)

  it("ends with one line and exit 1 where there is no GPU", function()
    if gpurun.device_count() > 0 then return end
    local result = run()
    assert.are.equal(1, result.code)
    assert.are.equal("", result.stdout)
    assert.matches("^jitLtoLinking%.lua: no CUDA GPU available: [^\n]+\n$", result.stderr)
  end)

  it("links relocatable PTX with the call left in, and LTO-IR with it inlined", function()
    local ptx_linked <close> = link("ptx", { std = "c++17", arch = ARCH, relocatable_device_code = true },
      { arch = ARCH })
    assert.are.equal("cubin", ptx_linked.code_type)
    assert.truthy(ptx_linked.code:find("user_transform", 1, true), "the callee is a function of its own")
    local lto = { std = "c++17", arch = ARCH, link_time_optimization = true }
    local lto_options = { arch = ARCH, link_time_optimization = true }
    local lto_linked <close> = link("ltoir", lto, lto_options)
    assert.are.equal("cubin", lto_linked.code_type)
    assert.falsy(lto_linked.code:find("user_transform", 1, true), "the callee is inlined")
    local lto_ptx <close> = link("ltoir", lto, lto_options, "ptx")
    assert.truthy(lto_ptx.code:find(".entry apply_transform", 1, true))
    assert.falsy(lto_ptx.code:find("call", 1, true))
    assert.truthy(lto_ptx.code:find("max.f32", 1, true), "max(y, 0) is in the kernel")
  end)

  it("says which input lacks the device function when the user's half is missing", function()
    local options = { std = "c++17", arch = ARCH, link_time_optimization = true }
    local main <close> = gpurun.Program(kernels.source("apply_transform"), "c++", options)
      :compile("ltoir", { name = "apply_transform.cu" })
    local linker <close> = gpurun.Linker(main, gpurun.LinkerOptions{ arch = ARCH, link_time_optimization = true })
    local ok, message = pcall(linker.link, linker, "cubin")
    assert.is_false(ok)
    assert.truthy(tostring(message):find("user_transform", 1, true), tostring(message))
  end)

  it("links, runs and checks both modes, and prints what the original prints #gpu", function()
    local result = run("--elements", "4096")
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("", result.stderr)
    assert.matches("^Device: [^\n]+\nCompute Capability: %d+%.%d+\n\n"
      .. "%[1%] PTX linking %(no LTO%)\n  %[ptx%] result verified against the host reference\n\n"
      .. "%[2%] LTO linking %(link%-time optimization%)\n  %[lto%] result verified against the host reference\n\n"
      .. "Both PTX and LTO linked kernels produced matching results%. Done\n$", result.stdout)
  end)
end)
