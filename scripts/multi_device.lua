-- multi_device.lua: the cudagraphs sample's pipeline, r3 = (a + b) * c - a,
-- over every visible GPU of one machine in one process: a slice and a graph
-- per device, all replayed at once, against one device running every
-- slice. With --declared, the same from one gpurun.pipeline declaration.
--
--   gpurun scripts/multi_device.lua [--elements N] [--iterations K] [--devices D]
--                                   [--declared] [--json]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local check = require("gpurun.check")
local report = require("gpurun.report")

local KERNELS = require("gpurun.samples.kernels").source("cudagraphs") -- vec_add, vec_mul, vec_sub
local BYTES_PER_ELEMENT = 9 * 4 -- three kernels, each reading two float32 and writing one
local WARMUP = 3
local SAMPLES = 64

local cli = args.new("multi_device.lua",
  "Runs add -> mul -> sub as a graph on every visible GPU at once and compares with one GPU.")
cli:integer_option("--elements", "Elements per vector, split across the devices.", 1 << 24)
cli:integer_option("--iterations", "Graph replays to time.", 200)
cli:integer_option("--devices", "Devices to use (default: every visible one).", nil)
cli:flag("--json", "Write the figures as one JSON object to stdout instead of the text report.")
cli:flag("--declared", "Declare the pipeline once (gpurun.pipeline over the devices) instead.")
local options = cli:parse(arg)

-- Seconds for `iterations` rounds of launch(slice) over every slice, each
-- on its own stream, from all streams idle to all streams idle.
local function time_rounds(slices, iterations, launch)
  for _, slice in ipairs(slices) do slice.stream:sync() end
  local start = gpurun.perf_counter()
  for _ = 1, iterations do
    for _, slice in ipairs(slices) do launch(slice) end
  end
  for _, slice in ipairs(slices) do slice.stream:sync() end
  return gpurun.perf_counter() - start
end

local function figures(seconds, iterations, elements)
  return {
    us_per_iter = seconds * 1e6 / iterations,
    gb_per_s = elements * BYTES_PER_ELEMENT * iterations / seconds / 1e9,
  }
end

-- The pipeline over buffers s.a .. s.r3 of s.count elements, captured on
-- s.stream with the kernels { add, mul, sub }.
local function capture(s, kernels)
  local add, mul, sub = table.unpack(kernels)
  local config = gpurun.LaunchConfig{ grid = math.min((s.count + 255) // 256, 65535), block = 256 }
  local size = gpurun.u64(s.count)
  local builder <close> = s.stream:create_graph_builder()
  builder:begin_building()
  gpurun.launch(builder, config, add, s.a, s.b, s.r1, size)
  gpurun.launch(builder, config, mul, s.r1, s.c, s.r2, size)
  gpurun.launch(builder, config, sub, s.r2, s.a, s.r3, size)
  builder:end_building()
  s.graph = builder:complete()
  s.graph:upload(s.stream)
end

-- The device's kernels, stream and its slice's buffers; the pipeline's graph.
local function prepare(ordinal, first, count, seed)
  local device = gpurun.Device(ordinal)
  device:set_current()
  local slice = { device = device, first = first, count = count }
  slice.stream = device:create_stream()
  local code = gpurun.Program(KERNELS, "c++",
    gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch }):compile("cubin")
  slice.kernels = { code:get_kernel("vec_add"), code:get_kernel("vec_mul"), code:get_kernel("vec_sub") }
  local rng = gpurun.default_rng(seed)
  slice.a, slice.b, slice.c = rng:random(count), rng:random(count), rng:random(count)
  slice.r1, slice.r2, slice.r3 = gpurun.empty(count), gpurun.empty(count), gpurun.empty(count)
  capture(slice, slice.kernels)
  return slice
end

-- Device 0's copy of a slice (inputs gathered over the devices' link) with
-- its own graph: what one device does with the whole vectors.
local function on_device_zero(slice, zero)
  local device = gpurun.Device(0)
  device:set_current()
  local copy = { count = slice.count, stream = zero.stream }
  copy.a = gpurun.empty(slice.count):copy_from(slice.a)
  copy.b = gpurun.empty(slice.count):copy_from(slice.b)
  copy.c = gpurun.empty(slice.count):copy_from(slice.c)
  copy.r1, copy.r2, copy.r3 = gpurun.empty(slice.count), gpurun.empty(slice.count), gpurun.empty(slice.count)
  capture(copy, zero.kernels)
  return copy
end

-- --declared: the sample over every device from one declaration. The
-- pipeline is declared once by its data, with gpurun.pipeline{ devices =
-- ... }: gpurun splits the vectors into the slices, makes each device's
-- buffers and graph, runs them all at once and copies each slice's r3 back;
-- checked against the host's arithmetic.
-- --declared: the sample over every device from one declaration.
local function main_declared(count, n, out, checks)
  local devices = {}
  for d = 1, count do devices[d] = d - 1 end
  gpurun.Device(0):set_current()
  local ew = gpurun.elementwise
  local rng = gpurun.default_rng(1000)
  local a, b, c = rng:random(n), rng:random(n), rng:random(n)
  local r3 = gpurun.zeros(n)
  local p <close> = gpurun.pipeline{ name = "multi", devices = devices }
  local v = p:buffers{ a = a, b = b, c = c, r3 = r3 }
  local r1, r2 = p:temporary("r1", n), p:temporary("r2", n)
  p:call(ew("float32 x, float32 y", "float32 r", "r = x + y", "add"), v.a, v.b, r1)
  p:call(ew("float32 x, float32 y", "float32 r", "r = x * y", "mul"), r1, v.c, r2)
  p:call(ew("float32 x, float32 y", "float32 r", "r = x - y", "sub"), r2, v.a, v.r3)
  out:say(p:explain())
  p:graph()
  p:wait()
  local start = gpurun.perf_counter()
  for _ = 1, options.iterations do p:graph() end
  p:wait()
  local seconds = gpurun.perf_counter() - start
  local aggregate = figures(seconds, options.iterations, n)
  out:field("aggregate", aggregate)
  out:say(("aggregate over %d device%s, declared: %.1f us/iter, %.1f GB/s (slices copied in and "
    .. "out each replay where a device holds none of the buffers)"):format(count, count == 1 and "" or "s",
    aggregate.us_per_iter, aggregate.gb_per_s))
  gpurun.Device(0):set_current()
  local actual, expected = {}, {}
  for s = 1, math.min(SAMPLES, n) do
    local i = 1 + (s - 1) * (n - 1) // math.max(1, math.min(SAMPLES, n) - 1)
    actual[s] = r3:get(i)
    expected[s] = (a:get(i) + b:get(i)) * c:get(i) - a:get(i)
  end
  checks:tables("declared over the devices against the host", actual, expected, 1e-5, 1e-5)
  if checks:passed() then
    out:say("result: OK (one declaration, split over the devices; matches the host)")
  end
  return out:finish(checks)
end

-- The vectors are split into one slice per device; each device makes its
-- slice's inputs, captures the pipeline as a graph on its own stream, and
-- the graphs replay on all devices at once. The slices are then gathered on
-- device 0 (copies between devices: peer-to-peer where the hardware allows)
-- and checked against device 0 running every slice's graph itself (the
-- one-device baseline, timed in the same run) and against the host's
-- arithmetic on sampled elements. Reports per-device, aggregate and
-- one-device throughput. With one device it runs the same steps on it.
local function main()
  local visible = gpurun.device_count()
  if visible == 0 then
    io.stderr:write("multi_device.lua: no CUDA device (", gpurun.driver_error() or "none visible", ")\n")
    return 1
  end
  local count = options.devices or visible
  if count > visible then
    io.stderr:write(("multi_device.lua: --devices %d but %d visible\n"):format(count, visible))
    return 2
  end
  local n = options.elements
  if n < count then
    io.stderr:write("multi_device.lua: --elements must be at least the number of devices\n")
    return 2
  end
  local out = report.new{ json = options.json }
  local checks = check.new(cli.name)
  out:field("devices", count)
  out:field("elements", n)
  out:say(("devices: %d (%s)"):format(count, gpurun.Device(0).name))
  if options.declared then
    return main_declared(count, n, out, checks)
  end

  local slices, first = {}, 0
  for d = 0, count - 1 do
    local size = n // count + (d < n % count and 1 or 0)
    slices[#slices + 1] = prepare(d, first, size, 1000 + d)
    first = first + size
  end
  out:say(("elements: %d in %d slice%s"):format(n, count, count == 1 and "" or "s"))

  local function replay(slice) slice.graph:launch(slice.stream) end
  time_rounds(slices, WARMUP, replay)
  local per_device = {}
  for d, slice in ipairs(slices) do
    local result = figures(time_rounds({ slice }, options.iterations, replay), options.iterations, slice.count)
    per_device[d] = result
    out:say(("device %d: %d elements, %.1f us/iter, %.1f GB/s"):format(d - 1, slice.count,
      result.us_per_iter, result.gb_per_s))
  end
  out:field("per_device", per_device)
  local aggregate = figures(time_rounds(slices, options.iterations, replay), options.iterations, n)
  out:field("aggregate", aggregate)
  out:say(("aggregate over %d device%s: %.1f us/iter, %.1f GB/s"):format(count,
    count == 1 and "" or "s", aggregate.us_per_iter, aggregate.gb_per_s))

  local zero = slices[1]
  local copies = {}
  for d, slice in ipairs(slices) do copies[d] = on_device_zero(slice, zero) end
  time_rounds({ copies[1] }, WARMUP, function() for _, copy in ipairs(copies) do replay(copy) end end)
  local seconds = time_rounds({ copies[1] }, options.iterations,
    function() for _, copy in ipairs(copies) do replay(copy) end end)
  local one = figures(seconds, options.iterations, n)
  out:field("one_device", one)
  out:say(("one device (device 0, every slice): %.1f us/iter, %.1f GB/s"):format(one.us_per_iter,
    one.gb_per_s))
  out:field("scaling", one.us_per_iter / aggregate.us_per_iter)
  out:say(("scaling: %.2fx over one device with %d device%s"):format(one.us_per_iter / aggregate.us_per_iter,
    count, count == 1 and "" or "s"))

  -- Gather every slice's r3 on device 0 and compare with device 0's own
  -- results, then sampled elements with the host's arithmetic.
  gpurun.Device(0):set_current()
  for d, slice in ipairs(slices) do
    local gathered = gpurun.empty(slice.count):copy_from(slice.r3)
    checks:buffers(("slice %d (device %d) against one device"):format(d, d - 1), gathered,
      copies[d].r3, 1e-6, 1e-6)
    local a, b, c = copies[d].a, copies[d].b, copies[d].c
    local actual, expected = {}, {}
    for s = 1, math.min(SAMPLES, slice.count) do
      local i = 1 + (s - 1) * (slice.count - 1) // math.max(1, math.min(SAMPLES, slice.count) - 1)
      actual[s] = gathered:get(i)
      expected[s] = (a:get(i) + b:get(i)) * c:get(i) - a:get(i)
    end
    checks:tables(("slice %d against the host"):format(d), actual, expected, 1e-5, 1e-5)
  end
  if checks:passed() then
    out:say("result: OK (gathered on device 0; matches one device and the host)")
  end
  return out:finish(checks)
end

os.exit(main(), true)
