-- bench/lto_link.lua and bench/cubin_load.lua (bench/device_code_compare.sh's
-- gpurun sides): one line and exit 1 without a GPU; with one (#gpu), each
-- run small, every row filled, and the SASS count read from cuobjdump's
-- listing (a stand-in cuobjdump prints a known one). Their options are
-- spec/benches_spec.lua's.
local gpurun = require("gpurun")
local cjson = require("cjson")
local files = require("spec.support.files")
local process = require("spec.support.process")

-- Six instruction lines in cuobjdump -sass's layout, one of them a NOP.
local LISTING = [[
	code for sm_90
		Function : apply_transform
	.headerflags	@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                 /* 0x00000a00ff017b82 */
                                                                          /* 0x000fe40000000800 */
        /*0010*/                   S2R R0, SR_TID.X ;                     /* 0x0000000000007919 */
        /*0020*/              @!P0 BRA 0x60 ;                             /* 0x0000000000008947 */
        /*0030*/                   EXIT ;                                 /* 0x000000000000794d */
        /*0040*/                   BRA 0x40;                              /* 0xfffffffc00fc7947 */
        /*0050*/                   NOP;                                   /* 0x0000000000007918 */
]]

describe("bench/lto_link.lua and bench/cubin_load.lua", function()
  it("end with one line and exit 1 where there is no GPU", function()
    if gpurun.device_count() > 0 then return end
    for _, bench in ipairs({ "lto_link", "cubin_load" }) do
      local result = process.gpurun("bench/" .. bench .. ".lua --reps 1")
      assert.are.equal(1, result.code)
      assert.matches("^" .. bench .. "%.lua: no CUDA GPU available: [^\n]+\n$", result.stderr)
    end
  end)

  it("time every cubin that builds, and count its SASS from cuobjdump's listing #gpu", function()
    local dir = files.temporary_folder()
    local fake = dir .. "/cuobjdump"
    local file = assert(io.open(fake, "w"))
    file:write("#!/bin/sh\ncat <<'LISTING'\n", LISTING, "LISTING\n")
    file:close()
    assert(os.execute("chmod +x " .. process.quote(fake)))
    local result = process.gpurun("bench/lto_link.lua --sizes 4096 --reps 1 --seconds 0.01 --json --cuobjdump "
      .. process.quote(fake))
    files.remove_folder(dir)
    assert.are.equal(0, result.code, result.stderr)
    local figures = cjson.decode(result.stdout)
    assert.are.equal("gpurun LTO link", figures.variants[1].name)
    for _, variant in ipairs(figures.variants) do
      if variant.missing == nil then
        assert.are.equal(5, variant.sass, variant.name)
        assert.is_true(variant.us["4096"] > 0, variant.name)
      else
        assert.matches("^nvcc ", variant.missing)
      end
    end
    assert.is_nil(figures.variants[1].missing)
    assert.is_nil(figures.variants[4].missing)
  end)

  it("time a compile, a kernel-cache hit and a saved cubin, and save both files #gpu", function()
    local dir = files.temporary_folder()
    local result = process.gpurun("bench/cubin_load.lua --reps 1 --seconds 0.01 --json --save "
      .. process.quote(dir .. "/saved"), { env = { GPURUN_CACHE_DIR = dir .. "/kernel-cache" } })
    local source = io.open(dir .. "/saved/matmul_epilogue.cu")
    local cubin = io.open(dir .. "/saved/matmul_epilogue.cubin", "rb")
    local cubin_bytes = cubin and cubin:read("a")
    if source then source:close() end
    if cubin then cubin:close() end
    files.remove_folder(dir)
    assert.are.equal(0, result.code, result.stderr)
    local figures = cjson.decode(result.stdout)
    for _, key in ipairs({ "compile_us", "cache_hit_us", "cubin_load_us", "cubin_kept_us", "cubin_launch_us" }) do
      assert.is_true(figures[key] > 0, key)
    end
    assert.truthy(source, "the source was saved")
    assert.are.equal("\127ELF", cubin_bytes:sub(1, 4))
  end)
end)
