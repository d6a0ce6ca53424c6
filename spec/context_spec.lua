-- Green contexts: Device.resources.sm, SMResource:split and the counts its
-- refusals give, gpurun.Context made of a group, and that kernels and
-- graphs launched on its streams run on its multiprocessors only (each
-- block writes the SM it ran on, %smid). Without a driver: one message.
local gpurun = require("gpurun")
local expect = require("spec.support.expect")
local error_of = expect.error_of
local assert_contains = expect.contains

-- Each block records its SM and then holds it a little, so that a grid of
-- many blocks spreads over every SM it may use.
local SOURCE = [[
extern "C" __global__ void where(unsigned int *sm_of_block, unsigned long long cycles)
{
  if (threadIdx.x == 0) {
    unsigned int sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    sm_of_block[blockIdx.x] = sm;
  }
  const long long until = clock64() + (long long)cycles;
  while (clock64() < until) { }
}
]]
local HOLD_CYCLES = 20000 -- about 10 us at 2 GHz

local function distinct(values)
  local seen, count = {}, 0
  for _, value in ipairs(values) do
    if not seen[value] then seen[value], count = true, count + 1 end
  end
  return count
end

describe("green contexts", function()
  it("need a driver: Device.resources without one says why", function()
    if gpurun.driver_error() == nil then return end
    assert_contains("the CUDA driver could not be loaded", error_of(gpurun.Device, 0))
  end)

  describe("on a GPU", function()
    local device, sm, where, blocks
    before_each(function()
      device = gpurun.Device(0)
      device:set_current()
      sm = device.resources.sm
      if not where then
        local options = gpurun.ProgramOptions({ arch = "sm_" .. device.arch })
        where = gpurun.Program(SOURCE, "c++", options):compile("cubin"):get_kernel("where")
      end
      blocks = 8 * sm.sm_count
    end)

    -- The SMs a grid of `blocks` blocks ran on, launched by `launch(buffer)`.
    local function sms_used(launch_on)
      local out <close> = gpurun.zeros(blocks, "uint32")
      launch_on(out)
      device:sync()
      return distinct(out:to_table())
    end

    local function launcher(stream)
      return function(out)
        gpurun.launch(stream, gpurun.LaunchConfig({ grid = blocks, block = 32 }), where, out, gpurun.u64(HOLD_CYCLES))
        stream:sync()
      end
    end

    it("reads the device's SMs #gpu", function()
      assert.are.equal(device.multiprocessor_count, sm.sm_count)
      assert.is_true(sm.min_partition_size >= 1 and sm.min_partition_size <= sm.sm_count)
      assert.is_true(sm.coscheduled_alignment >= 1)
      assert.are.equal(0, sm.device)
      assert.matches("^gpurun%.SMResource%(%d+ SMs of device 0%)$", tostring(sm))
    end)

    it("refuses more SMs than exist, with the counts #gpu", function()
      local message = error_of(sm.split, sm, { count = sm.sm_count + 1 })
      assert_contains(("1 group(s) of %d SMs asked for, but the device has %d SMs (groups take at least %d, "
        .. "in multiples of %d)"):format(sm.sm_count + 1, sm.sm_count, sm.min_partition_size,
        sm.coscheduled_alignment), message)
      -- Groups within the 64 a split makes, that together pass the device.
      local count = math.max(sm.min_partition_size, sm.sm_count // 64 + 1)
      local groups = sm.sm_count // count + 1
      message = error_of(sm.split, sm, { count = count, groups = groups })
      assert_contains(("%d group(s) of %d SMs asked for, but the device has %d SMs"):format(groups,
        count, sm.sm_count), message)
    end)

    it("splits into groups and a remainder that add up to the device #gpu", function()
      local groups, remainder = sm:split({ count = sm.min_partition_size, groups = 2 })
      assert.are.equal(2, #groups)
      local total = remainder and remainder.sm_count or 0
      for _, group in ipairs(groups) do
        assert.is_true(group.sm_count >= sm.min_partition_size)
        total = total + group.sm_count
      end
      assert.are.equal(sm.sm_count, total)
      assert_contains("only a device's whole SM resource (Device.resources.sm) splits",
        error_of(groups[1].split, groups[1], { count = sm.min_partition_size }))
    end)

    it("runs kernels on a green context's stream on its SMs only #gpu", function()
      local groups = sm:split({ count = sm.min_partition_size })
      local context <close> = device:create_context({ resources = { groups[1] } })
      local given = context.resources.sm.sm_count
      assert.are.equal(groups[1].sm_count, given)
      assert.are.equal(0, context.device)
      local stream = context:create_stream()
      assert.are.equal(0, stream.device)
      local green = sms_used(launcher(stream))
      assert.is_true(green >= 1 and green <= given, ("%d SMs used, %d given"):format(green, given))
      -- The check can fail: the primary context's stream spreads wider.
      local primary <close> = device:create_stream()
      local all = sms_used(launcher(primary))
      assert.is_true(all > given, ("primary context: %d SMs used, the group has %d"):format(all, given))
    end)

    it("replays a graph captured on a green stream on its SMs, forks too #gpu", function()
      local groups = sm:split({ count = sm.min_partition_size })
      local context = device:create_context({ resources = groups })
      local given = context.resources.sm.sm_count
      local stream = context:create_stream()
      local config = gpurun.LaunchConfig({ grid = blocks, block = 32 })
      local a <close> = gpurun.zeros(blocks, "uint32")
      local b <close> = gpurun.zeros(blocks, "uint32")
      -- Closed before the buffers its capture keeps.
      local builder <close> = stream:create_graph_builder()
      builder:begin_building()
      local main, fork = builder:split(2)
      gpurun.launch(main, config, where, a, gpurun.u64(HOLD_CYCLES))
      gpurun.launch(fork, config, where, b, gpurun.u64(HOLD_CYCLES))
      gpurun.join(main, fork)
      builder:end_building()
      local graph <close> = builder:complete()
      -- Its nodes are known as the kernel's (launched through its CUkernel).
      local nodes = graph:nodes()
      assert.are.equal(2, #nodes)
      assert.are.equal("where", nodes[1].kernel.name)
      local function check(label)
        for _, out in ipairs({ a, b }) do
          local used = distinct(out:to_table())
          assert.is_true(used <= given, ("%s: %d SMs used, %d given"):format(label, used, given))
        end
      end
      graph:launch(stream)
      stream:sync()
      check("on its stream")
      -- Closed, the context lives on while the graph holds it: the graph
      -- closes after it, and the device goes on working.
      context:close()
      graph:close()
      a:fill(7)
      assert.are.equal(7, a[1])
    end)

    it("times with events on green streams, and they outlive the context #gpu", function()
      local groups = sm:split({ count = sm.min_partition_size })
      local context = device:create_context({ resources = { groups[1] } })
      local stream = context:create_stream()
      local start = stream:record()
      launcher(stream)(gpurun.zeros(blocks, "uint32"))
      local stop = stream:record()
      stop:sync()
      context:close()
      assert.is_true(stop - start > 0)
    end)

    it("lives while an FFT plan made on its stream does; the one-call cache keeps plans apart #gpu", function()
      local signal <close> = gpurun.array({ 1, 1, 1, 1, 1, 1, 1, 1 }, "complex64")
      local plan
      do
        local groups = sm:split({ count = sm.min_partition_size })
        local context = device:create_context({ resources = { groups[1] } })
        local stream = context:create_stream()
        plan = gpurun.fft.plan(8, { stream = stream })
        local spectrum <close> = gpurun.fft.fft(signal, { stream = stream })
        stream:sync()
        assert.are.same({ 8, 0 }, spectrum:get(1))
        context:close()
      end
      collectgarbage("collect")
      collectgarbage("collect")
      -- The cached plan of the green stream is not reused here, and the
      -- plan's close releases it in its context, which it kept.
      local primary <close> = device:create_stream()
      local spectrum <close> = gpurun.fft.fft(signal, { stream = primary })
      primary:sync()
      assert.are.same({ 8, 0 }, spectrum:get(1))
      plan:close()
      gpurun.fft.clear_cache()
      collectgarbage("collect")
      collectgarbage("collect")
    end)

    it("closes its streams with it, once #gpu", function()
      local groups = sm:split({ count = sm.min_partition_size })
      local context = device:create_context({ resources = { groups[1] } })
      local stream = context:create_stream()
      context:sync()
      context:close()
      context:close()
      assert.are.equal("gpurun.Context(closed)", tostring(context))
      assert_contains("attempt to use a closed gpurun.Context", error_of(context.create_stream, context))
      assert_contains("attempt to use a closed gpurun.Stream", error_of(stream.sync, stream))
      assert_contains("attempt to use a closed gpurun.SMResource", error_of(function()
        local closed = sm:split({ count = sm.min_partition_size })[1]
        closed:close()
        return device:create_context({ resources = { closed } })
      end))
      -- The device goes on working.
      local buffer <close> = gpurun.full(4, 2.0, "float32")
      assert.are.same({ 2, 2, 2, 2 }, buffer:to_table())
    end)

    it("combines only one split's groups #gpu", function()
      local first = sm:split({ count = sm.min_partition_size })
      local second = sm:split({ count = sm.min_partition_size })
      assert_contains("resources[2] comes from another split than resources[1]",
        error_of(device.create_context, device, { resources = { first[1], second[1] } }))
    end)
  end)
end)
