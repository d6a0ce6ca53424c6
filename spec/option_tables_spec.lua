-- Every public function that takes a table of options refuses a key it does
-- not know, by name, with the keys it knows: a misspelt option never passes
-- for a default. One rule per language: gpurun_check_options in C
-- (src/runtime/value.c), gpurun.options in Lua. Each row calls a function
-- with { <a near miss> = ... } and with a number key; #gpu rows need a
-- device to make their object.
local gpurun = require("gpurun")
local options = require("gpurun.options")
local expect = require("spec.support.expect")

local SOURCE = 'extern "C" __global__ void k(float *x) { x[0] = 1.0f; }'

-- Stand-ins for a stream and buffers: the option checks come first.
local function stand_in_buffer(dtype, n)
  return setmetatable({}, { __name = "gpurun.Buffer", __len = function() return n end,
                            __index = { dtype = dtype, device = 0, ptr = 0x7f0000000000 } })
end
local STREAM = setmetatable({ device = 0 }, { __name = "gpurun.Stream" })
local X, COUNT = stand_in_buffer("float32", 16), stand_in_buffer("int64", 1)

local function plain(text) return (text:gsub("%p", "%%%0")) end

-- { label, call(bad) -> raises, function name as the message spells it,
--   known keys as listed, gpu }
local ROWS = {
  { "gpurun.ProgramOptions", function(bad) gpurun.ProgramOptions(bad) end, "gpurun.ProgramOptions:",
    "std, arch, defines, include_paths, line_info, debug, use_fast_math, max_register_count, "
      .. "relocatable_device_code, link_time_optimization, extra" },
  { "Program:compile", function(bad) gpurun.Program(SOURCE, "c++"):compile("ptx", bad) end,
    "bad argument #2 to 'Program:compile'", "name_expressions, name" },
  { "gpurun.LinkerOptions", function(bad) gpurun.LinkerOptions(bad) end, "gpurun.LinkerOptions:",
    "name, arch, max_register_count, time, verbose, link_time_optimization, optimization_level, debug, "
      .. "lineinfo, ftz, prec_div, prec_sqrt, fma, kernels_used, variables_used, optimize_unused_variables, "
      .. "ptxas_options, split_compile, no_cache" },
  { "gpurun.ObjectCode.from_cubin", function(bad)
      local file = { path = "README.md" }
      for k, v in pairs(bad) do file[k] = v end
      gpurun.ObjectCode.from_cubin(file)
    end, "bad argument #1 to 'gpurun.ObjectCode.from_cubin'", "path" },
  { "gpurun.ObjectCode.from_ptx", function(bad) gpurun.ObjectCode.from_ptx(".version 8.0", bad) end,
    "bad argument #2 to 'gpurun.ObjectCode.from_ptx'", "name, symbol_mapping" },
  { "gpurun.LaunchConfig", function(bad)
      local t = { grid = 1, block = 1 }
      for k, v in pairs(bad) do t[k] = v end
      gpurun.LaunchConfig(t)
    end, "bad argument #1 to 'gpurun.LaunchConfig'",
    "grid, block, shmem_size, cluster, is_cooperative, cooperative_launch, programmatic_stream_serialization, priority" },
  { "gpurun.Event", function(bad) gpurun.Event(bad) end, "bad argument #1 to 'gpurun.Event'", "timing, blocking, ipc",
    gpu = true },
  { "Device:create_stream", function(bad) gpurun.Device(0):create_stream(bad) end,
    "bad argument #1 to 'Device:create_stream'", "priority", gpu = true },
  { "Kernel:occupancy", function(bad)
      gpurun.Program(SOURCE, "c++"):compile("cubin"):get_kernel("k"):occupancy(bad)
    end, "bad argument #1 to 'Kernel:occupancy'", "block, shmem_size", gpu = true },
  { "Kernel:max_potential_block_size", function(bad)
      gpurun.Program(SOURCE, "c++"):compile("cubin"):get_kernel("k"):max_potential_block_size(bad)
    end, "bad argument #1 to 'Kernel:max_potential_block_size'", "shmem_size, block_size_limit", gpu = true },
  { "GraphBuilder:debug_dot_print", function(bad)
      local stream = gpurun.Device(0):create_stream()
      local builder = stream:create_graph_builder()
      builder:begin_building()
      builder:end_building()
      builder:debug_dot_print(os.tmpname(), bad)
    end, "bad argument #2 to 'GraphBuilder:debug_dot_print'", "verbose, kernel_node_params, "
      .. "memcpy_node_params, memset_node_params, event_node_params, kernel_node_attributes, handles, "
      .. "conditional_node_params", gpu = true },
  { "GraphBuilder:begin_building", function(bad)
      gpurun.Device(0):create_stream():create_graph_builder():begin_building(bad)
    end, "bad argument #1 to 'GraphBuilder:begin_building'", "mode", gpu = true },
  { "GraphBuilder:complete", function(bad)
      local stream = gpurun.Device(0):create_stream()
      local builder = stream:create_graph_builder()
      builder:begin_building()
      builder:end_building()
      builder:complete(bad)
    end, "bad argument #1 to 'GraphBuilder:complete'",
    "auto_free_on_launch, check, device_launch, use_node_priority, upload_stream", gpu = true },
  { "Graph:to_dot", function(bad)
      local stream = gpurun.Device(0):create_stream()
      local builder = stream:create_graph_builder()
      builder:begin_building()
      builder:end_building()
      builder:complete():to_dot(bad)
    end, "bad argument #1 to 'Graph:to_dot'", "name, title, races", gpu = true },
  { "gpurun.elementwise", function(bad) gpurun.elementwise("float32 a", "float32 r", "r = a", "k", bad) end,
    "elementwise kernel 'k':", "block, unroll, blocks_per_sm, preamble, cache" },
  { "gpurun.elementwise_pipeline", function(bad)
      gpurun.elementwise_pipeline("float32 a", { "float32 r = a" }, "r", "p", bad)
    end, "elementwise pipeline 'p':", "fuse, accumulate, block, unroll, blocks_per_sm, preamble, cache" },
  { "gpurun.reduction", function(bad) gpurun.reduction("float32 x", "float32 s", "x", "sum", nil, nil, "k", bad) end,
    "reduction kernel 'k':", "reduce_type, block, unroll, blocks_per_sm, preamble, cache" },
  -- The prebuilt reductions, the scans and select check their options
  -- before they look at a target or a buffer.
  { "gpurun.sum", function(bad) gpurun.sum(STREAM, X, nil, bad) end,
    "bad argument #4 to 'gpurun.sum'", "accumulate, rows, cols, axis, offsets" },
  { "gpurun.max_abs_diff", function(bad) gpurun.max_abs_diff(STREAM, X, 0, nil, bad) end,
    "bad argument #5 to 'gpurun.max_abs_diff'", "accumulate, rows, cols, axis, offsets" },
  { "gpurun.inclusive_scan", function(bad) gpurun.inclusive_scan(STREAM, X, X, "sum", bad) end,
    "bad argument #5 to 'gpurun.inclusive_scan'", "identity, deterministic, block, items" },
  { "gpurun.exclusive_scan", function(bad) gpurun.exclusive_scan(STREAM, X, X, "sum", bad) end,
    "bad argument #5 to 'gpurun.exclusive_scan'", "identity, deterministic, block, items" },
  { "gpurun.select", function(bad) gpurun.select(STREAM, X, "x > 0", X, COUNT, bad) end,
    "bad argument #6 to 'gpurun.select'", "block, items" },
  { "gpurun.pipeline", function(bad) gpurun.pipeline(bad) end, "gpurun.pipeline:",
    "name, max_streams, fuse, strict, timing, pool, quiet, devices" },
  { "Pipeline:buffer", function(bad) gpurun.pipeline():buffer("t", {}, bad) end,
    "pipeline 'pipeline': buffer 't':", "filled" },
  { "Pipeline:call", function(bad)
      local p = gpurun.pipeline()
      local spec = { gpurun.elementwise("float32 a", "float32 r", "r = a", "k"), p:temporary("a", 4),
                     p:temporary("r", 4) }
      for k, v in pairs(bad) do spec[k == 1 and 1.5 or k] = v end -- a non-integer key: not positional
      p:call(spec)
    end, "pipeline 'pipeline': call:", "name, reads, writes" },
  { "Pipeline:fill", function(bad) local p = gpurun.pipeline(); p:fill(p:temporary("t", 4), 0, bad) end,
    "pipeline 'pipeline': fill:", "name, reads, writes" },
  { "Pipeline:plan", function(bad) gpurun.pipeline():plan(bad) end, "pipeline 'pipeline': plan:", "sources" },
  { "Pipeline:to_dot", function(bad) gpurun.pipeline():to_dot(bad) end, "pipeline 'pipeline': to_dot:", "title" },
  { "bench.run", function(bad) require("gpurun.bench").run(nil, function() end, bad) end, "bench.run:",
    "iters, warmup, repeats, per_step, name, progress" },
  { "bench.capture", function(bad) require("gpurun.bench").capture(nil, function() end, bad) end,
    "bench.capture:", "iterations, auto_free_on_launch" },
  { "report.new", function(bad) require("gpurun.report").new(bad) end, "report.new:", "json, write" },
  { "breakdown.measure", function(bad) require("gpurun.breakdown").measure(nil, {}, bad) end,
    "breakdown.measure:", "iters, device, hold, clock" },
  { "plot.render", function(bad) require("gpurun.plot").render({ rows = {} }, "x.png", bad) end,
    "plot.render:", "gnuplot" },
  { "progress.new", function(bad) require("gpurun.progress").new(bad) end, "progress.new:",
    "total, label, sizes, enabled, write, clock" },
  { "cli:common_options", function(bad) require("gpurun.args").new("t", ""):common_options(bad) end,
    "cli:common_options:", "iters, device" },
  { "sweep.add_options", function(bad) require("gpurun.sweep").add_options(require("gpurun.args").new("t", ""), bad) end,
    "sweep.add_options:", "from, to" },
  { "dist.init", function(bad) require("gpurun.dist").init(bad) end, "dist.init:", "device" },
}

describe("option tables", function()
  for _, row in ipairs(ROWS) do
    local label, call, caller, known = row[1], row[2], row[3], row[4]
    it(("%s refuses an unknown key by name, with the keys it knows%s"):format(label, row.gpu and " #gpu" or ""),
      function()
        if row.gpu then gpurun.Device(0):set_current() end
        local message = expect.error_of(call, { misspelt_option = true })
        assert.matches(plain(caller) .. ".*unknown option 'misspelt_option' %(known: " .. plain(known) .. "%)",
          message)
        assert.is_nil(message:find("\n", 1, true), message)
        local numbered = expect.error_of(call, { [1] = true })
        assert.matches(plain(caller) .. ".*unknown option: a number key %(known: " .. plain(known) .. "%)",
          numbered)
      end)
  end

  it("have one Lua rule: gpurun.options", function()
    assert.is_nil(options.unknown({ a = 1, b = 2 }, { "a", "b", "c" }))
    assert.are.equal("unknown option 'd' (known: a, b)", options.unknown({ d = 1 }, { "a", "b" }))
    assert.are.equal("unknown option: a boolean key (known: a)", options.unknown({ [true] = 1 }, { "a" }))
    assert.are.same({ x = 1 }, options.check("f", { x = 1 }, { "x" }))
    assert.is_nil(options.check("f", nil, { "x" }))
    expect.contains("f: options must be a table, got number", expect.error_of(options.check, "f", 5, { "x" }))
    expect.contains("f: unknown option 'y' (known: x)", expect.error_of(options.check, "f", { y = 1 }, { "x" }))
    -- A proxy's __index is not an option given.
    assert.is_nil(options.unknown(setmetatable({}, { __index = { z = 1 } }), { "x" }))
  end)
end)
