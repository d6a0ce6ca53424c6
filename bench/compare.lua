-- bench/compare.lua: gpurun's Lua loops against the same loops in pure C
-- (bench/cudagraphs_c) on scripts/cudagraphs.lua's pipeline, r1 = a + b,
-- r2 = r1 * c, r3 = r2 - a over float32 buffers, rep for rep, in one table
-- of medians; docs/benchmark.md says how it times and what each row is.
--
--   build/gpurun bench/compare.lua [--sizes 4096,65536,1048576,16777216]
--       [--reps 15] [--iters 5000] [--json] [--c-bench PATH]
--   build/gpurun bench/compare.lua --startup [bench/startup.lua's options]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local cjson = require("cjson")
local bench = require("gpurun.bench")
local median = bench.median
local progress = require("gpurun.progress")

local WARMUP_ITERATIONS = 5
local BLOCK_SIZE = 256

-- The kernels bench/cudagraphs_c.c embeds when it is built: both sides run the same code.
local KERNEL_SOURCE = require("gpurun.samples.kernels").source("cudagraphs")

-- Exact in float32, and every argument mix-up gives another r3:
-- (1.5 + 2.25) * 0.5 - 1.5 = 0.375.
local A, B, C, EXPECTED = 1.5, 2.25, 0.5, 0.375
local POISON = -1.0

-- The targets for the gpurun/C ratio of medians, by size and path.
local TARGETS = {
  [4096] = { launch = 1.10, plan = 1.10, graph = 1.05 },
  [16777216] = { launch = 1.02, plan = 1.02, graph = 1.02 },
}

local PROGRAM = "compare.lua"

local function fail(message)
  io.stderr:write(PROGRAM, ": ", message, "\n")
  os.exit(1)
end

local shell = require("gpurun.shell")
local shell_quote, dirname, file_exists = shell.quote, shell.dirname, shell.file_exists
local interpreter_path = shell.interpreter
local quoted = require("gpurun.quoted")

---------------------------------------------------------------------------
-- options

local MAX_CPU_LAUNCHES = 1000

-- "" (no rows) or a list of positive integers.
local function to_per_graph(text)
  if text == "" then return {} end
  return bench.parse_sizes(text)
end

local function to_cpu_launches(text)
  local value = args.to_integer(text, 0)
  if not value or value > MAX_CPU_LAUNCHES then
    return nil, ("expected an integer from 0 to %d, got %s"):format(MAX_CPU_LAUNCHES, quoted(text))
  end
  return value
end

local cli = args.new(PROGRAM, "gpurun against pure C on the add -> mul -> sub pipeline.")
bench.sizes_option(cli, "Comma-separated element counts.", "4096,65536,1048576,16777216")
cli:integer_option("--reps", "Reps per size; each re-times every path on both sides.", 15)
cli:integer_option("--iters", "Timed iterations per path and rep.", 5000)
cli:flag("--json", "Print one JSON object with every figure instead of the table.")
cli.parser:option("--c-bench", "The C reference (default: bench/cudagraphs_c next to gpurun).")
cli:converted_option("--per-graph", "Passes of the pipeline per graph to time, plain and with "
                     .. "programmatic dependent launch (empty: skip those rows).", "1,10,100", to_per_graph)
cli:converted_option("--cpu-launches", "Launches per rep timed on the CPU alone with the GPU held "
                     .. "busy (0: skip those rows).", 256, to_cpu_launches)
cli:flag("--startup", "Measure start-up instead (see bench/startup.lua).")

---------------------------------------------------------------------------
-- the C side

-- Runs the C reference with `arguments` and --json; returns what it printed,
-- decoded, once usable(result) says so, or raises.
local function run_c(c_bench, arguments, usable)
  local command = ("%s %s --json"):format(shell_quote(c_bench), arguments)
  local pipe = assert(io.popen(command, "r"))
  local output = pipe:read("a")
  local ok, how, code = pipe:close()
  if not ok then
    error(("%s ended with %s %s (its message is above)"):format(command, how, code), 0)
  end
  local decoded, result = pcall(cjson.decode, output)
  if not decoded or type(result) ~= "table" or not usable(result) then
    error(("%s printed no usable JSON: %q"):format(command, output), 0)
  end
  return result
end

local function run_c_rep(c_bench, elements, iters)
  local result = run_c(c_bench, ("--elements %d --iters %d --reps 1"):format(elements, iters),
    function(r)
      return type(r.individual_us) == "table" and type(r.individual_us[1]) == "number"
        and type(r.graph_us) == "table" and type(r.graph_us[1]) == "number"
    end)
  return result.individual_us[1], result.graph_us[1]
end

---------------------------------------------------------------------------
-- the gpurun side: each path is a loop of n iterations that holds what it
-- needs in locals, as C's loop does, and time_us runs it WARMUP_ITERATIONS
-- times untimed, then `iters` times from a sync to a sync. (bench.run calls
-- a step per iteration: a cost C's loop does not have, in figures held to
-- 2-10% of C's.)

local now = gpurun.perf_counter

local function time_us(stream, iters, loop, ...)
  loop(WARMUP_ITERATIONS, stream, ...)
  stream:sync()
  local start = now()
  loop(iters, stream, ...)
  stream:sync()
  return (now() - start) * 1e6 / iters
end

local function launch_loop(n, stream, config, add, mul, sub, a, b, c, r1, r2, r3, count)
  local launch = gpurun.launch
  for _ = 1, n do
    launch(stream, config, add, a, b, r1, count)
    launch(stream, config, mul, r1, c, r2, count)
    launch(stream, config, sub, r2, a, r3, count)
  end
end

local function plan_loop(n, stream, plan_add, plan_mul, plan_sub)
  for _ = 1, n do
    plan_add:launch(stream)
    plan_mul:launch(stream)
    plan_sub:launch(stream)
  end
end

local function graph_loop(n, stream, graph)
  for _ = 1, n do
    graph:launch(stream)
  end
end

local function check_result(stream, r3, elements, path)
  stream:sync()
  local result = gpurun.compare(r3, EXPECTED, 1e-5, 1e-5)
  if result.mismatches > 0 then
    error(("wrong result from the gpurun %s path at %d elements: %d of %d elements of r3 "
           .. "are not %g, e.g. r3[%d] = %g"):format(path, elements, result.mismatches,
           result.count, EXPECTED, result.worst_index, result.worst_actual), 0)
  end
end

-- Times one size; returns the per-rep figures of both sides. `line` (a
-- gpurun.progress line) moves on after each rep. Reps of the C reference
-- (one process per rep) alternate with reps of the same pipeline driven
-- from Lua in this process, so both see the same machine noise. Three
-- gpurun paths are timed:
--   launch  gpurun.launch(stream, config, kernel, ...) three times per iteration
--   plan    kernel:bind(config, ...) once, plan:launch(stream) three times per iteration
--   graph   graph:launch(stream) once per iteration
-- launch and plan stand against C's three cuLaunchKernel calls, graph against
-- C's cuGraphLaunch. Every figure is microseconds per iteration, timed from a
-- stream sync to a stream sync after 5 warm-up iterations, as in the C
-- program. (Individual launches at small sizes vary by 20-30% between reps
-- on a shared machine; 15 reps of 5000 iterations keep their medians steady.)
local function measure_size(gpu, elements, options, line)
  local stream, kernels = gpu.stream, gpu.kernels
  local add, mul, sub = kernels.add, kernels.mul, kernels.sub
  local config = gpurun.LaunchConfig{ grid = (elements + BLOCK_SIZE - 1) // BLOCK_SIZE, block = BLOCK_SIZE }
  local count = gpurun.u64(elements)

  local a <close> = gpurun.empty(elements, "float32")
  local b <close> = gpurun.empty(elements, "float32")
  local c <close> = gpurun.empty(elements, "float32")
  local r1 <close> = gpurun.empty(elements, "float32")
  local r2 <close> = gpurun.empty(elements, "float32")
  local r3 <close> = gpurun.empty(elements, "float32")
  a:fill(A)
  b:fill(B)
  c:fill(C)
  local function poison()
    r1:fill(POISON)
    r2:fill(POISON)
    r3:fill(POISON)
  end

  local plan_add <close> = add:bind(config, a, b, r1, count)
  local plan_mul <close> = mul:bind(config, r1, c, r2, count)
  local plan_sub <close> = sub:bind(config, r2, a, r3, count)

  local graph <close> = bench.capture(stream, function(builder)
    gpurun.launch(builder, config, add, a, b, r1, count)
    gpurun.launch(builder, config, mul, r1, c, r2, count)
    gpurun.launch(builder, config, sub, r2, a, r3, count)
  end)

  -- Each path once, from poisoned results, before anything is timed.
  poison()
  time_us(stream, 1, launch_loop, config, add, mul, sub, a, b, c, r1, r2, r3, count)
  check_result(stream, r3, elements, "launch")
  poison()
  time_us(stream, 1, plan_loop, plan_add, plan_mul, plan_sub)
  check_result(stream, r3, elements, "plan")
  poison()
  graph:launch(stream)
  check_result(stream, r3, elements, "graph")

  local figures = {
    c = { individual_us = {}, graph_us = {} },
    gpurun = { launch_us = {}, plan_us = {}, graph_us = {} },
  }
  local iters = options.iters
  line:clear()
  io.stderr:write(("measuring %d elements, %d reps\n"):format(elements, options.reps))
  for rep = 1, options.reps do
    line:begin(("%d elements, rep %d of %d"):format(elements, rep, options.reps))
    figures.c.individual_us[rep], figures.c.graph_us[rep] =
      run_c_rep(options.c_bench, elements, iters)
    -- Whatever reading the C program's output left for the collector goes
    -- now, not inside a timed loop.
    collectgarbage("collect")
    figures.gpurun.launch_us[rep] =
      time_us(stream, iters, launch_loop, config, add, mul, sub, a, b, c, r1, r2, r3, count)
    figures.gpurun.plan_us[rep] = time_us(stream, iters, plan_loop, plan_add, plan_mul, plan_sub)
    figures.gpurun.graph_us[rep] = time_us(stream, iters, graph_loop, graph)
    line:finish_item()
  end
  return figures
end

local function summary(values)
  return { median = median(values), min = math.min(table.unpack(values)),
           max = math.max(table.unpack(values)) }
end

---------------------------------------------------------------------------
-- K passes per graph, plain and with programmatic dependent launch (PDL)
--
-- One graph launch has a cost of its own; a graph of K passes spreads it
-- over K iterations. With PDL (cudagraphs_pdl.cu, launched with
-- programmatic_stream_serialization), each kernel may start while the one
-- before it runs and waits for it on the device. C builds the same graphs
-- (cudagraphs_c --per-graph), in one process for all its reps.

local function run_c_per_graph(c_bench, elements, iters, reps, passes)
  local result = run_c(c_bench, ("--elements %d --iters %d --reps %d --per-graph %s"):format(
    elements, iters, reps, table.concat(passes, ",")),
    function(r) return type(r.per_graph) == "table" end)
  local figures = {}
  for _, entry in ipairs(result.per_graph) do
    -- cjson reads every number as a float: 1.0, not 1.
    figures[math.tointeger(entry.k) .. (entry.pdl and " pdl" or "")] = entry.us
  end
  return figures
end

local function measure_per_graph(gpu, elements, options)
  local stream, kernels = gpu.stream, gpu.kernels
  local grid = (elements + BLOCK_SIZE - 1) // BLOCK_SIZE
  local plain = gpurun.LaunchConfig{ grid = grid, block = BLOCK_SIZE }
  local pdl = gpurun.LaunchConfig{ grid = grid, block = BLOCK_SIZE,
                                   programmatic_stream_serialization = true }
  local count = gpurun.u64(elements)
  local a <close> = gpurun.full(elements, A, "float32")
  local b <close> = gpurun.full(elements, B, "float32")
  local c <close> = gpurun.full(elements, C, "float32")
  local r1 <close> = gpurun.empty(elements, "float32")
  local r2 <close> = gpurun.empty(elements, "float32")
  local r3 <close> = gpurun.empty(elements, "float32")
  local c_figures = run_c_per_graph(options.c_bench, elements, options.iters, options.reps,
                                    options.per_graph)
  local rows = {}
  for _, k in ipairs(options.per_graph) do
    for _, with_pdl in ipairs({ false, true }) do
      local config = with_pdl and pdl or plain
      local add = with_pdl and kernels.pdl_add or kernels.add
      local mul = with_pdl and kernels.pdl_mul or kernels.mul
      local sub = with_pdl and kernels.pdl_sub or kernels.sub
      local graph <close> = bench.capture(stream, function(builder)
        gpurun.launch(builder, config, add, a, b, r1, count)
        gpurun.launch(builder, config, mul, r1, c, r2, count)
        gpurun.launch(builder, config, sub, r2, a, r3, count)
      end, { iterations = k })
      r3:fill(POISON)
      graph:launch(stream)
      check_result(stream, r3, elements, ("graph of %d%s"):format(k, with_pdl and " PDL" or ""))
      local launches = (options.iters + k - 1) // k
      local us = {}
      for rep = 1, options.reps do
        us[rep] = time_us(stream, launches, graph_loop, graph) / k
      end
      local key = k .. (with_pdl and " pdl" or "")
      local c_row = summary(c_figures[key])
      local g_row = summary(us)
      rows[#rows + 1] = { elements = elements, per_graph = k, pdl = with_pdl, c = c_row,
                          gpurun = g_row, ratio = g_row.median / c_row.median,
                          c_us = c_figures[key], gpurun_us = us }
    end
  end
  return rows
end

local function print_per_graph_table(rows)
  io.write("\nK passes of add -> mul -> sub per graph, us per iteration (median / min / max of the reps)\n\n")
  io.write(("%10s  %5s  %-4s  %8s %8s %8s   %8s %8s %8s   %8s\n"):format("elements", "K", "PDL",
    "C", "min", "max", "gpurun", "min", "max", "gpurun/C"))
  for _, row in ipairs(rows) do
    io.write(("%10d  %5d  %-4s  %8.2f %8.2f %8.2f   %8.2f %8.2f %8.2f   %8.3f\n"):format(
      row.elements, row.per_graph, row.pdl and "yes" or "no", row.c.median, row.c.min,
      row.c.max, row.gpurun.median, row.gpurun.min, row.gpurun.max, row.ratio))
  end
end

---------------------------------------------------------------------------
-- the binding's own cost: CPU time per launch with the GPU held busy
--
-- Wall-clock loops at small sizes swing 20-30% with the machine; a launch's
-- CPU cost does not. Each rep launches one long kernel (busy.cu, ~20 ms),
-- then times N launches that can only queue behind it, so the clock sees
-- the host's work alone: gpurun's checks and packing plus the driver's.

local function run_c_cpu_rep(c_bench, elements, launches)
  local result = run_c(c_bench, ("--elements %d --cpu-launch %d --reps 1"):format(elements, launches),
    function(r) return type(r.launch_ns) == "table" end)
  return result.launch_ns[1], result.graph_ns[1], result.gpu_stayed_busy
end

local function measure_cpu_launch(gpu, options)
  local elements = 4096
  local device = gpu.device
  local launches = options.cpu_launches
  local add = gpu.kernels.add
  local busy <close> = gpu.busy_code:get_kernel("busy")
  local one = gpurun.LaunchConfig{ grid = 1, block = 1 }
  -- About 20 ms of one SM's clock (clock_rate is in kHz).
  local cycles = gpurun.i64(device:get_attribute(13) * 20)
  local config = gpurun.LaunchConfig{ grid = (elements + BLOCK_SIZE - 1) // BLOCK_SIZE, block = BLOCK_SIZE }
  local count = gpurun.u64(elements)
  local stream = gpu.stream
  local a <close> = gpurun.zeros(elements, "float32")
  local b <close> = gpurun.zeros(elements, "float32")
  local r1 <close> = gpurun.zeros(elements, "float32")
  local plan <close> = add:bind(config, a, b, r1, count)
  local graph <close> = bench.capture(stream, function(builder)
    gpurun.launch(builder, config, add, a, b, r1, count)
  end, { iterations = 3 })

  local launch, now_ = gpurun.launch, now
  local stayed_busy = true
  local function timed(body)
    stream:sync()
    launch(stream, one, busy, cycles)
    local start = now_()
    body()
    local seconds = now_() - start
    if stream:query() then stayed_busy = false end
    stream:sync()
    return seconds * 1e9 / launches
  end
  local paths = {
    launch = function() for _ = 1, launches do launch(stream, config, add, a, b, r1, count) end end,
    plan = function() for _ = 1, launches do plan:launch(stream) end end,
    graph = function() for _ = 1, launches do graph:launch(stream) end end,
  }
  local figures = { c = { launch = {}, graph = {} }, gpurun = { launch = {}, plan = {}, graph = {} } }
  io.stderr:write(("measuring CPU time per launch, %d reps of %d launches\n"):format(options.reps, launches))
  for rep = 1, options.reps do
    local c_launch, c_graph, c_busy = run_c_cpu_rep(options.c_bench, elements, launches)
    figures.c.launch[rep], figures.c.graph[rep] = c_launch, c_graph
    stayed_busy = stayed_busy and c_busy
    collectgarbage("collect")
    for _, path in ipairs({ "launch", "plan", "graph" }) do
      figures.gpurun[path][rep] = timed(paths[path])
    end
  end
  figures.stayed_busy = stayed_busy
  figures.launches = launches
  return figures
end

local function cpu_rows(figures)
  local rows = {}
  for _, path in ipairs({ "launch", "plan", "graph" }) do
    local c = summary(figures.c[path == "plan" and "launch" or path])
    local g = summary(figures.gpurun[path])
    rows[#rows + 1] = { path = path, c = c, gpurun = g, difference_ns = g.median - c.median,
                        ratio = g.median / c.median }
  end
  return rows
end

local function print_cpu_table(figures, rows)
  io.write(("\nCPU time per launch with the GPU held busy, ns (median / min / max of %d reps "
            .. "of %d launches at 4096 elements)%s\n\n"):format(#figures.c.launch, figures.launches,
            figures.stayed_busy and "" or "; WARNING: the GPU went idle in a rep, figures include waiting"))
  io.write(("%-8s  %8s %8s %8s   %8s %8s %8s   %10s  %8s\n"):format("path", "C", "min", "max",
    "gpurun", "min", "max", "gpurun - C", "gpurun/C"))
  for _, row in ipairs(rows) do
    io.write(("%-8s  %8.1f %8.1f %8.1f   %8.1f %8.1f %8.1f   %10.1f  %8.3f\n"):format(row.path,
      row.c.median, row.c.min, row.c.max, row.gpurun.median, row.gpurun.min, row.gpurun.max,
      row.difference_ns, row.ratio))
  end
  io.write("(C's launch is one cuLaunchKernel of vec_add; gpurun's launch is gpurun.launch and plan\n"
           .. "is plan:launch of the same kernel and arguments; graph is a 3-kernel graph's launch)\n")
end

---------------------------------------------------------------------------
-- report


-- Rows of the table for one size: gpurun path, the C path it stands against.
local function size_rows(elements, figures)
  local c, g = figures.c, figures.gpurun
  local rows = {
    { path = "launch", c = summary(c.individual_us), gpurun = summary(g.launch_us) },
    { path = "plan", c = summary(c.individual_us), gpurun = summary(g.plan_us) },
    { path = "graph", c = summary(c.graph_us), gpurun = summary(g.graph_us) },
  }
  local launch_median = rows[1].gpurun.median
  for _, row in ipairs(rows) do
    row.ratio = row.gpurun.median / row.c.median
    local targets = TARGETS[elements]
    if targets then
      row.target = targets[row.path]
      row.target_met = row.ratio <= row.target
    end
    if row.path == "plan" then
      row.saving_vs_launch_us = launch_median - row.gpurun.median
      row.saving_vs_launch_pct = 100 * row.saving_vs_launch_us / launch_median
    end
  end
  return rows
end

local ROW_FORMAT = "%10s  %-6s  %8s %8s %8s   %8s %8s %8s   %8s  %-14s  %s\n"

local function print_table(header, results)
  io.write(header, "\n\n")
  io.write(("%18s  %-26s   %-26s\n"):format("", "------------ C -----------", "--------- gpurun ---------"))
  io.write(ROW_FORMAT:format("elements", "path", "median", "min", "max", "median", "min", "max",
                             "gpurun/C", "target", "plan vs launch"))
  local met, targeted = 0, 0
  for _, result in ipairs(results) do
    for _, row in ipairs(result.rows) do
      local target = ""
      if row.target then
        targeted = targeted + 1
        if row.target_met then met = met + 1 end
        target = ("<= %.2f %s"):format(row.target, row.target_met and "ok" or "MISSED")
      end
      local saving = ""
      if row.saving_vs_launch_us then
        saving = ("%s %.2f us (%.1f%%)"):format(row.saving_vs_launch_us >= 0 and "saves" or "costs",
          math.abs(row.saving_vs_launch_us), math.abs(row.saving_vs_launch_pct))
      end
      local function us(x) return ("%.2f"):format(x) end
      local line = ROW_FORMAT:format(result.elements, row.path,
        us(row.c.median), us(row.c.min), us(row.c.max),
        us(row.gpurun.median), us(row.gpurun.min), us(row.gpurun.max),
        ("%.3f"):format(row.ratio), target, saving)
      io.write((line:gsub(" +\n$", "\n")))
    end
  end
  if targeted > 0 then
    io.write(("\ntargets met: %d of %d\n"):format(met, targeted))
  end
end

---------------------------------------------------------------------------
-- main

local argv = { ... }
for i, value in ipairs(argv) do
  if value == "--startup" then
    table.remove(argv, i)
    local script_dir = dirname(debug.getinfo(1, "S").source:sub(2))
    local startup = assert(loadfile(script_dir .. "/startup.lua"))
    return startup(table.unpack(argv))
  end
end

local options = cli:parse(argv)
local device = cli:open_device(0)

if not options.c_bench then
  local interpreter = interpreter_path()
  if not interpreter then
    fail("cannot tell where the gpurun binary is, so not where cudagraphs_c is: pass --c-bench PATH")
  end
  options.c_bench = dirname(interpreter) .. "/bench/cudagraphs_c"
end
if not file_exists(options.c_bench) then
  fail(("no C reference at %s: build it with `cmake --build build --target cudagraphs_c`, "
        .. "or pass --c-bench PATH"):format(options.c_bench))
end

local stream <close> = device:create_stream()
gpurun.set_current_stream(stream)
local program_options = gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch }
local code <close> = gpurun.Program(KERNEL_SOURCE, "c++", program_options):compile("cubin")
local busy_code <close> = gpurun.Program(require("gpurun.samples.kernels").source("busy"), "c++",
  program_options):compile("cubin")
local gpu = {
  device = device,
  busy_code = busy_code,
  stream = stream,
  kernels = {
    add = code:get_kernel("vec_add"),
    mul = code:get_kernel("vec_mul"),
    sub = code:get_kernel("vec_sub"),
  },
}

-- On a terminal, and without --json, a progress line on stderr counts the reps.
local rep_sizes = {} -- one entry per rep, for the progress line's estimate
for _, elements in ipairs(options.sizes) do
  for _ = 1, options.reps do
    rep_sizes[#rep_sizes + 1] = elements
  end
end
local line = progress.new{ label = PROGRAM, total = #rep_sizes, sizes = rep_sizes,
                           enabled = not options.json and progress.is_terminal() }
local results = {}
for i, elements in ipairs(options.sizes) do
  local figures = measure_size(gpu, elements, options, line)
  results[i] = { elements = elements, c = figures.c, gpurun = figures.gpurun,
                 rows = size_rows(elements, figures) }
end
line:close()

local per_graph_rows = {}
if #options.per_graph > 0 then
  local pdl_code <close> = gpurun.Program(require("gpurun.samples.kernels").source("cudagraphs_pdl"), "c++",
    program_options):compile("cubin")
  gpu.kernels.pdl_add = pdl_code:get_kernel("pdl_vec_add")
  gpu.kernels.pdl_mul = pdl_code:get_kernel("pdl_vec_mul")
  gpu.kernels.pdl_sub = pdl_code:get_kernel("pdl_vec_sub")
  for _, elements in ipairs(options.sizes) do
    io.stderr:write(("measuring %d elements, graphs of %s passes\n"):format(elements,
      table.concat(options.per_graph, ", ")))
    for _, row in ipairs(measure_per_graph(gpu, elements, options)) do
      per_graph_rows[#per_graph_rows + 1] = row
    end
  end
end

local cpu_figures, cpu_table
if options.cpu_launches > 0 then
  cpu_figures = measure_cpu_launch(gpu, options)
  cpu_table = cpu_rows(cpu_figures)
end

local driver_major, driver_minor = gpurun.driver_version()
if options.json then
  io.write(cjson.encode({
    device = device.name,
    arch = device.arch,
    driver = ("%d.%d"):format(driver_major, driver_minor),
    gpurun = gpurun.version,
    c_bench = options.c_bench,
    iters = options.iters,
    reps = options.reps,
    warmup_iterations = WARMUP_ITERATIONS,
    unit = "us/iter",
    sizes = results,
    per_graph = per_graph_rows,
    cpu_per_launch_ns = cpu_figures and { launches = cpu_figures.launches,
      gpu_stayed_busy = cpu_figures.stayed_busy, c = cpu_figures.c,
      gpurun = cpu_figures.gpurun, rows = cpu_table } or nil,
  }), "\n")
else
  print_table(("%s (sm_%s), CUDA driver %d.%d; %d iterations per rep, %d reps; "
               .. "microseconds per iteration of add -> mul -> sub"):format(
                  device.name, device.arch, driver_major, driver_minor, options.iters, options.reps),
              results)
  if #per_graph_rows > 0 then print_per_graph_table(per_graph_rows) end
  if cpu_figures then print_cpu_table(cpu_figures, cpu_table) end
end
gpurun.set_current_stream(nil)
