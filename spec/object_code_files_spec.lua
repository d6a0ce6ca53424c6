-- gpurun.ObjectCode.from_cubin, from_ptx, from_fatbin, from_ltoir (and
-- from_object, from_library) and code:save: device code brought from
-- bytes or files, hostile files refused by name before anything reads
-- past them, and kernels found and launched with checked arguments (#gpu).
local gpurun = require("gpurun")
local fatbins = require("spec.support.fatbins")
local files = require("spec.support.files")
local shell = require("gpurun.shell")

local VEC = [[
extern "C" __global__ void vec_add(const float *a, const float *b, float *c, unsigned long long n)
{
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
]]
local TEMPLATE = "template <typename T> __global__ void scale(T *x, T factor) { x[threadIdx.x] *= factor; }"

local function error_of(f, ...)
  local ok, message = pcall(f, ...)
  assert.is_false(ok, "expected an error")
  return tostring(message)
end

local function compile(target, arch)
  return gpurun.Program(VEC, "c++", { arch = arch or "sm_90" }):compile(target)
end

local function write(path, bytes)
  local file = assert(io.open(path, "wb"))
  file:write(bytes)
  file:close()
end

describe("gpurun.ObjectCode from bytes and files", function()
  local folder = files.folder_per_spec(before_each, after_each)

  it("round-trips a cubin through save and from_cubin, bytes or path", function()
    local compiled = compile("cubin")
    local path = folder() .. "/vec_add.cubin"
    assert.are.equal(compiled, compiled:save(path))
    assert.are.equal(compiled.code, files.read(path))
    local from_file = gpurun.ObjectCode.from_cubin({ path = path })
    assert.are.equal("cubin", from_file.code_type)
    assert.are.equal(path, from_file.name)
    assert.are.equal(compiled.code, from_file.code)
    local from_bytes = gpurun.ObjectCode.from_cubin(compiled.code, { name = "mine" })
    assert.are.equal("mine", from_bytes.name)
    assert.are.equal("", gpurun.ObjectCode.from_cubin(compiled.code).name)
    assert.matches("^gpurun.ObjectCode%(cubin, %d+ bytes%)$", tostring(from_bytes))
  end)

  it("takes PTX as text, a trailing NUL dropped, and keeps a symbol mapping", function()
    local ptx = compile("ptx").code
    local code = gpurun.ObjectCode.from_ptx(ptx .. "\0", { symbol_mapping = { add = "vec_add" } })
    assert.are.equal("ptx", code.code_type)
    assert.are.equal(ptx, code.code)
    assert.are.same({ add = "vec_add" }, code.lowered_names)
  end)

  it("takes a fatbin, LTO-IR, a host object and a library by their magic numbers", function()
    -- One entry: a 64-byte header (kind 2, a cubin) and a cubin, padded to 8.
    local cubin = compile("cubin", "sm_90").code
    local padded = cubin .. ("\0"):rep((8 - #cubin % 8) % 8)
    local entry = string.pack("<I2I2I4I8", 2, 0x101, 64, #padded) .. ("\0"):rep(48) .. padded
    local fatbin = "\80\237\85\186\1\0\16\0" .. string.pack("<I8", #entry) .. entry
    assert.are.equal("fatbin", gpurun.ObjectCode.from_fatbin(fatbin).code_type)
    assert.are.equal("ltoir", gpurun.ObjectCode.from_ltoir("\237\67\78\127rest").code_type)
    assert.are.equal("library", gpurun.ObjectCode.from_library("!<arch>\n").code_type)
    local devrt = "/usr/local/cuda/lib64/libcudadevrt.a"
    if files.read(devrt) then
      assert.are.equal(devrt, gpurun.ObjectCode.from_library({ path = devrt }).name)
    end
  end)

  it("refuses a truncated cubin, a fatbin longer than its bytes, and the wrong kind, by name", function()
    local cubin = compile("cubin").code
    local path = folder() .. "/cut.cubin"
    write(path, cubin:sub(1, 200))
    local message = error_of(gpurun.ObjectCode.from_cubin, { path = path })
    assert.are.equal(path .. " is truncated: its ", message:sub(1, #path + 19))
    assert.matches("headers end at byte %d+ of 200$", message)
    assert.matches("the cubin given as bytes is truncated: its [%a%d ]+ ends? at byte %d+ of %d+",
      error_of(gpurun.ObjectCode.from_cubin, cubin:sub(1, #cubin - 1)))
    local fatbin = "\80\237\85\186\1\0\16\0" .. string.pack("<I8", 1 << 40)
    assert.matches("the fatbin given as bytes is truncated: its header says it ends at byte 1099511627792 of 16",
      error_of(gpurun.ObjectCode.from_fatbin, fatbin), 1, true)
    assert.matches("is not a fatbin", error_of(gpurun.ObjectCode.from_fatbin, cubin))
    assert.matches("is a cubin, not a host object: load it with from_cubin",
      error_of(gpurun.ObjectCode.from_object, cubin), 1, true)
    local wrong_machine = cubin:sub(1, 18) .. "\62\0" .. cubin:sub(21)
    assert.matches("is not a cubin: an ELF for machine 62, not for an NVIDIA GPU (machine 190)",
      error_of(gpurun.ObjectCode.from_cubin, wrong_machine), 1, true)
    assert.matches("is not PTX text: it is an ELF file", error_of(gpurun.ObjectCode.from_ptx, cubin), 1, true)
  end)

  it("refuses a FIFO without blocking, and a file over 1 GiB before reading it", function()
    local fifo = folder() .. "/code.fifo"
    assert(os.execute("mkfifo " .. shell.quote(fifo)))
    assert.are.equal("cannot read device code from " .. fifo .. ": it is a FIFO, not a regular file",
      error_of(gpurun.ObjectCode.from_cubin, { path = fifo }))
    local huge = folder() .. "/huge.cubin"
    assert(os.execute("truncate -s 4G " .. shell.quote(huge))) -- sparse: no disk used
    assert.are.equal("cannot read device code from " .. huge .. ": it is 4.00 GiB, more than the 1.00 GiB "
      .. "gpurun reads as device code", error_of(gpurun.ObjectCode.from_cubin, { path = huge }))
    local code = compile("ptx")
    assert.are.equal("ObjectCode:save: cannot write " .. fifo .. ": it is a FIFO, not a regular file",
      error_of(code.save, code, fifo))
  end)

  it("refuses to load LTO-IR, an object or a library into the driver", function()
    local code = gpurun.ObjectCode.from_ltoir("\237\67\78\127rest", { name = "lib.ltoir" })
    assert.are.equal("the ltoir of lib.ltoir cannot be loaded into the driver: link it into a cubin first "
      .. "(gpurun.Linker)", error_of(code.get_kernel, code, "k"))
  end)

  describe("on a device", function()
    local device
    before_each(function()
      device = gpurun.Device(0)
      device:set_current()
    end)

    it("launches a kernel of a cubin without PTX, its parameters read from the driver #gpu", function()
      local path = folder() .. "/vec_add.cubin"
      compile("cubin", "sm_" .. device.arch):save(path)
      local code = gpurun.ObjectCode.from_cubin({ path = path })
      local kernel = code:get_kernel("vec_add")
      local sizes = {}
      for i, param in ipairs(kernel:params()) do sizes[i] = param.size end
      assert.are.same({ 8, 8, 8, 8 }, sizes)
      local n = 300
      local a, b, c = gpurun.full(n, 1.5, "float32"), gpurun.full(n, 2, "float32"), gpurun.zeros(n, "float32")
      local stream = device:create_stream()
      local config = gpurun.LaunchConfig({ grid = 2, block = 256 })
      gpurun.launch(stream, config, kernel, a, b, c, gpurun.u64(n))
      stream:sync()
      assert.is_true(gpurun.allclose(c, 3.5))
      assert.matches("kernel 'vec_add' takes 4 parameters, got 3",
        error_of(gpurun.launch, stream, config, kernel, a, b, c), 1, true)
    end)

    -- The layout is read at the first launch into memory of its own: freed
    -- memory full of 0xff bytes must not become a parameter's kind.
    it("takes an integer for a cubin's untyped 4-byte parameter, whatever the memory held #gpu", function()
      local path = folder() .. "/iota.cubin"
      gpurun.Program([[
extern "C" __global__ void iota(float *x, unsigned int n)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = (float)i;
}
]], "c++", { arch = "sm_" .. device.arch }):compile("cubin"):save(path)
      local n = 300
      local stream = device:create_stream()
      local config = gpurun.LaunchConfig({ grid = 2, block = 256 })
      for _ = 1, 20 do
        local junk = {}
        for size = 64, 1024, 8 do junk[#junk + 1] = string.rep("\255", size) end
        junk = nil -- luacheck: ignore 311
        collectgarbage()
        local code <close> = gpurun.ObjectCode.from_cubin({ path = path })
        local x = gpurun.zeros(n, "float32")
        gpurun.launch(stream, config, code:get_kernel("iota"), x, n)
        stream:sync()
        assert.are.equal(299, x[n])
      end
    end)

    it("types a PTX kernel's parameters from its text, and finds it through the mapping #gpu", function()
      local ptx = gpurun.Program(TEMPLATE, "c++", { arch = "sm_" .. device.arch })
        :compile("ptx", { name_expressions = { "scale<float>" } })
      local code = gpurun.ObjectCode.from_ptx(ptx.code, { symbol_mapping = ptx.lowered_names })
      local kernel = code:get_kernel("scale<float>")
      assert.are.equal(".f32", kernel:params()[2].type)
    end)

    it("types a fatbin's kernels from the PTX it carries, compressed or not #gpu", function()
      local missing = fatbins.missing()
      if missing then pending(missing) return end
      local built = fatbins.build(folder(), [[
extern "C" __global__ void scale(float *x, float factor, unsigned long long n)
{
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) x[i] *= factor;
}
]], device.arch, { "default", "none" })
      for _, compress in ipairs{ "default", "none" } do
        local path = built[compress]
        local kernel = gpurun.ObjectCode.from_fatbin({ path = path }):get_kernel("scale")
        local types = {}
        for i, param in ipairs(kernel:params()) do types[i] = param.type end
        assert.are.same({ ".u64", ".f32", ".u64" }, types, compress)
        local n = 300
        local x = gpurun.full(n, 1.5, "float32")
        local stream = device:create_stream()
        local config = gpurun.LaunchConfig({ grid = 2, block = 256 })
        gpurun.launch(stream, config, kernel, x, 2, gpurun.u64(n))
        stream:sync()
        assert.is_true(gpurun.allclose(x, 3.0))
        -- Typed by size alone, a 4-byte integer would pass for the float.
        assert.matches("floating-point, but gpurun.i32 is an integer",
          error_of(gpurun.launch, stream, config, kernel, x, gpurun.i32(2), gpurun.u64(n)), 1, true)
      end
    end)

    it("names the PTX and the assembler's complaint when PTX does not assemble #gpu", function()
      local broken = ".version 8.0\n.target sm_" .. device.arch .. "\n.address_size 64\n"
        .. ".visible .entry k() { this is not an instruction; }\n"
      local code = gpurun.ObjectCode.from_ptx(broken, { name = "broken.ptx" })
      local message = error_of(code.get_kernel, code, "k")
      -- The driver loads lazily: the load or the first lookup fails,
      -- naming the code; the JIT log follows where the driver wrote one.
      assert.matches("CUDA_ERROR_INVALID_PTX", message, 1, true)
      assert.matches("the ptx of broken.ptx", message, 1, true)
    end)

    it("names a cubin built for another GPU #gpu", function()
      local other = device.arch == "80" and "sm_90" or "sm_80"
      local code = gpurun.ObjectCode.from_cubin(compile("cubin", other).code, { name = "other.cubin" })
      local message = error_of(code.get_kernel, code, "vec_add")
      assert.matches("CUDA_ERROR_NO_BINARY_FOR_GPU", message, 1, true)
      assert.matches("the cubin of other.cubin", message, 1, true)
    end)
  end)
end)
