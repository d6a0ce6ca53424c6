-- Memory that kernels and the host both reach: managed buffers
-- (gpurun.managed, Buffer:prefetch, Buffer:advise) and mapped pinned memory
-- (gpurun.pinned(n, dtype, { mapped = true })), on streams and in graphs,
-- and the rule that host access to either waits for the device's work.
local gpurun = require("gpurun")
local kernels = require("spec.support.kernels")

local expect = require("spec.support.expect")
local error_of = expect.error_of
local assert_contains = expect.contains

local N = 1 << 20
local CONFIG = { grid = 256, block = 256 }

describe("managed and mapped memory, before any device is needed", function()
  it("checks counts, dtypes and options first", function()
    assert_contains("bad argument #1 to 'gpurun.managed' (positive element count expected, got 0)",
      error_of(gpurun.managed, 0))
    assert_contains("bad argument #2 to 'gpurun.managed' (unknown dtype 'float8'",
      error_of(gpurun.managed, 4, "float8"))
    assert_contains([[bad argument #3 to 'gpurun.managed' (option 'attach' must be "global" or "host", got "device")]],
      error_of(gpurun.managed, 4, "float32", { attach = "device" }))
    assert_contains("bad argument #3 to 'gpurun.managed' (unknown option 'pool' (known: attach))",
      error_of(gpurun.managed, 4, "float32", { pool = true }))
    assert_contains("bad argument #3 to 'gpurun.pinned' (option 'mapped' must be a boolean, got string)",
      error_of(gpurun.pinned, 4, "float32", { mapped = "yes" }))
    assert_contains("bad argument #3 to 'gpurun.pinned' (unknown option 'map' (known: mapped))",
      error_of(gpurun.pinned, 4, "float32", { map = true }))
  end)
end)

describe("managed memory", function()
  local device, kernel
  before_each(function()
    local _
    device, _, kernel = kernels.setup()
  end)

  it("is a Buffer that a kernel writes and the host reads after a sync #gpu", function()
    local stream <close> = device:create_stream()
    local a <close> = gpurun.managed(N, "float32")
    local b <close> = gpurun.managed(N, "float32", { attach = "global" })
    local out <close> = gpurun.managed(N, "float32")
    assert.is_true(a.is_managed)
    assert.is_false(gpurun.zeros(4, "float32").is_managed)
    assert.are.equal(N, #a)
    a:fill(1.5)
    b:fill(2.0)
    out:fill(0)
    gpurun.launch(stream, gpurun.LaunchConfig(CONFIG), kernel("vec_add"), a, b, out, gpurun.u64(N))
    stream:sync()
    assert.are.equal(3.5, out[1])
    assert.are.equal(3.5, out:get(N))
    local tail = out:to_table(N - 3, 4)
    assert.are.same({ 3.5, 3.5, 3.5, 3.5 }, tail)
    out:set(2, -1)
    assert.are.equal(-1, out[2])
    assert.is_true(out:view(N - 1).is_managed)
  end)

  it("keeps the host's reads behind a kernel queued on another stream #gpu", function()
    local writer <close> = device:create_stream()
    local reader <close> = device:create_stream()
    local a <close> = gpurun.managed(N, "float32")
    local out <close> = gpurun.managed(N, "float32")
    a:fill(4.0)
    out:fill(0)
    gpurun.set_current_stream(reader)
    -- Ten passes over a MiB-sized buffer, on a stream the read does not go on.
    for _ = 1, 10 do
      gpurun.launch(writer, gpurun.LaunchConfig(CONFIG), kernel("vec_add"), a, a, out, gpurun.u64(N))
    end
    local ok, last = pcall(out.get, out, N) -- waits for the device's work first
    gpurun.set_current_stream(nil)
    assert(ok, last)
    assert.are.equal(8.0, last)
  end)

  it("holds host data a kernel reads, and attach = host memory the host fills #gpu", function()
    local stream <close> = device:create_stream()
    local values = {}
    for i = 1, 1000 do values[i] = i end
    local staged <close> = gpurun.managed(1000, "float32", { attach = "host" })
    staged:copy_from(values)
    assert.are.same(values, staged:to_table())
    local a <close> = gpurun.managed(1000, "float32")
    a:copy_from(values)
    local out <close> = gpurun.zeros(1000, "float32")
    gpurun.launch(stream, gpurun.LaunchConfig({ grid = 4, block = 256 }), kernel("vec_add"), a, a, out,
      gpurun.u64(1000))
    stream:sync()
    assert.are.equal(2, out[1])
    assert.are.equal(2000, out[1000])
  end)

  it("prefetches to the device and back to the host in stream order #gpu", function()
    local stream <close> = device:create_stream()
    local a <close> = gpurun.managed(N, "float32")
    local out <close> = gpurun.managed(N, "float32")
    a:fill(0.25)
    out:fill(0)
    assert.are.equal(a, a:prefetch(device, stream))
    out:prefetch(0, stream)
    gpurun.launch(stream, gpurun.LaunchConfig(CONFIG), kernel("vec_add"), a, a, out, gpurun.u64(N))
    out:prefetch("host", stream)
    a:view(1, 16):prefetch("host", stream)
    stream:sync()
    assert.are.equal(0.5, out[1])
    assert.are.equal(0.5, out[N])
  end)

  it("takes every advice cuda.core names and still computes the same #gpu", function()
    local stream <close> = device:create_stream()
    local a <close> = gpurun.managed(N, "float32")
    local out <close> = gpurun.managed(N, "float32")
    a:fill(1.0)
    assert.are.equal(a, a:advise("set_read_mostly"))
    a:advise("set_preferred_location", device)
    a:advise("set_accessed_by", 0)
    out:advise("set_preferred_location", "host")
    out:advise("set_accessed_by", device)
    gpurun.launch(stream, gpurun.LaunchConfig(CONFIG), kernel("vec_add"), a, a, out, gpurun.u64(N))
    stream:sync()
    assert.are.equal(2.0, out[N])
    a:advise("unset_accessed_by", device)
    a:advise("unset_preferred_location")
    a:advise("unset_read_mostly")
    out:advise("unset_preferred_location")
    out:advise("unset_accessed_by", 0)
    assert_contains("Buffer:advise: the gpurun.Buffer is not managed memory",
      error_of(function() gpurun.zeros(4, "float32"):advise("set_read_mostly") end))
  end)

  it("captures into a graph whose replays the host sees after a sync #gpu", function()
    local stream <close> = device:create_stream()
    local a <close> = gpurun.managed(N, "float32")
    local out <close> = gpurun.managed(N, "float32")
    a:fill(1.0)
    out:fill(0)
    local builder = stream:create_graph_builder()
    builder:begin_building()
    gpurun.launch(builder, gpurun.LaunchConfig(CONFIG), kernel("vec_add"), a, a, out, gpurun.u64(N))
    builder:end_building()
    local graph <close> = builder:complete()
    builder:close()
    graph:launch(stream)
    stream:sync()
    assert.are.equal(2.0, out[N])
    a:fill(3.0)
    graph:launch(stream)
    stream:sync()
    assert.are.equal(6.0, out[1])
    assert.are.equal(6.0, out[N])
  end)

  it("saves to .npy and loads back #gpu", function()
    local path = os.tmpname()
    local a <close> = gpurun.managed(16, "int32")
    a:copy_from({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 })
    a:save(path)
    local back <close> = gpurun.load(path)
    os.remove(path)
    assert.are.same(a:to_table(), back:to_table())
  end)

  it("refuses more than the device has free, with the figures #gpu", function()
    local free = gpurun.mem_info()
    local count = free // 4 + (1 << 20)
    local message = error_of(gpurun.managed, count, "float32")
    assert_contains("gpurun.managed: ", message)
    assert_contains(("for %d float32 elements is more than device 0 has free ("):format(count), message)
    assert.matches("%(%d[%d.]* %a+ free of %d[%d.]* %a+%)", message)
  end)
end)

describe("mapped pinned memory", function()
  local device, kernel
  before_each(function()
    local _
    device, _, kernel = kernels.setup()
  end)

  it("is pinned memory with a device address #gpu", function()
    local mapped <close> = gpurun.pinned(16, "float32", { mapped = true })
    assert.is_true(mapped.mapped)
    assert.is_true(mapped.device_ptr ~= 0)
    local plain <close> = gpurun.pinned(16, "float32")
    assert.is_false(plain.mapped)
    assert_contains("gpurun.PinnedBuffer is not mapped into the device's address space: allocate it with "
      .. "gpurun.pinned(n, dtype, { mapped = true })", error_of(function() return plain.device_ptr end))
    local unmapped <close> = gpurun.pinned(16, "float32", { mapped = false })
    assert.is_false(unmapped.mapped)
  end)

  it("is read and written by a kernel, and the host sees the result #gpu", function()
    local stream <close> = device:create_stream()
    local a <close> = gpurun.pinned(N, "float32", { mapped = true })
    local b <close> = gpurun.zeros(N, "float32")
    local out <close> = gpurun.pinned(N, "float32", { mapped = true })
    a:fill(1.25)
    b:fill(2.0)
    out:fill(0)
    gpurun.launch(stream, gpurun.LaunchConfig(CONFIG), kernel("vec_add"), a, b, out, gpurun.u64(N))
    assert.are.equal(3.25, out[N]) -- host access waits for the kernel's device
    stream:sync()
    assert.are.equal(3.25, out[1])
    -- Its device address passes as a plain pointer too, as the Python sample passes it.
    out:fill(0)
    gpurun.launch(stream, gpurun.LaunchConfig(CONFIG), kernel("vec_add"), a.device_ptr, a.device_ptr,
      out.device_ptr, gpurun.u64(N))
    stream:sync()
    assert.are.equal(2.5, out[1])
    assert.are.equal(2.5, out[N])
  end)

  it("is captured into a graph that reads what the host wrote before each replay #gpu", function()
    local stream <close> = device:create_stream()
    local a <close> = gpurun.pinned(N, "float32", { mapped = true })
    local out <close> = gpurun.pinned(N, "float32", { mapped = true })
    a:fill(1.0)
    out:fill(0)
    local builder = stream:create_graph_builder()
    builder:begin_building()
    gpurun.launch(builder, gpurun.LaunchConfig(CONFIG), kernel("vec_add"), a, a, out, gpurun.u64(N))
    builder:end_building()
    local graph = builder:complete()
    builder:close()
    graph:launch(stream)
    stream:sync()
    assert.are.equal(2.0, out[N])
    a:fill(5.0)
    graph:launch(stream)
    stream:sync()
    assert.are.equal(10.0, out[1])
    assert.are.equal(10.0, out[N])
    assert_contains("gpurun.PinnedBuffer is used by 1 graph(s)", error_of(function() out:close() end))
    graph:close()
    out:close()
  end)

  it("is held to its size by the fuzzer's guard, as a Buffer is #gpu", function()
    local guard = require("spec.support.fuzz_guard")
    local mapped <close> = gpurun.pinned(16, "float32", { mapped = true })
    local plain <close> = gpurun.pinned(16, "float32")
    local config = gpurun.LaunchConfig({ grid = 1, block = 16 })
    local function allowed(x, n)
      return guard.launch_allowed(kernel("vec_add"), config, { x, x, x, gpurun.u64(n) }, 1, 4)
    end
    assert.is_true(allowed(mapped, 16))
    assert.is_false(allowed(mapped, 17))
    assert.is_true(allowed(plain, 1 << 40)) -- gpurun refuses it: the launch is safe to try
  end)

  it("raises, and reads no freed memory, when a host callback its wait ran closed it #gpu", function()
    local stream <close> = device:create_stream()
    local mapped = gpurun.pinned(16, "float32", { mapped = true })
    mapped:fill(1.0)
    local b <close> = gpurun.zeros(16, "float32")
    gpurun.launch(stream, gpurun.LaunchConfig({ grid = 1, block = 16 }), kernel("vec_add"), mapped, b, mapped,
      gpurun.u64(16))
    local closer <close> = gpurun.HostCallback(function() mapped:close() end)
    closer:launch(stream)
    -- The read waits for the kernel's device, which runs the callback first.
    assert_contains("attempt to use a closed gpurun.PinnedBuffer", error_of(function() return mapped[1] end))
    stream:sync()
  end)

  it("refuses an unmapped one as a kernel argument #gpu", function()
    local stream <close> = device:create_stream()
    local plain <close> = gpurun.pinned(16, "float32")
    local b <close> = gpurun.zeros(16, "float32")
    assert_contains("kernel 'vec_add' parameter 1 (.u64): a gpurun.PinnedBuffer passes only when mapped",
      error_of(gpurun.launch, stream, gpurun.LaunchConfig({ grid = 1, block = 16 }), kernel("vec_add"),
        plain, b, b, gpurun.u64(16)))
  end)
end)
