-- dag.lua: a pipeline that is a graph, not a chain: two independent
-- branches run side by side and a later stage joins them, as individual
-- launches on two streams and as one graph, whose alpha then changes
-- without building a new one. --declared: the same DAG from gpurun.pipeline,
-- which infers the streams, the wait, the fork and the join; --profile:
-- each node's time (graph:profile), the critical path and the timeline.
--
--   gpurun scripts/dag.lua [--elements N] [--alpha X] [--beta X] [--iters N]
--                          [--declared] [--profile] [--dot FILE] [--svg FILE]
--                          [--device ID] [--json]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local bench = require("gpurun.bench")
local shell = require("gpurun.shell")
local timeline = require("gpurun.timeline")

local KERNELS = require("gpurun.samples.kernels").source("dag")

local RTOL, ATOL = 1e-5, 1e-5
local WARMUP = 5

local cli = args.new("dag.lua",
  "Runs two branches joined by a later stage, on two streams and as one graph, and updates the graph in place.")
cli:integer_option("--elements", "Elements per vector.", 1 << 16)
cli:number_option("--alpha", "Branch 1's factor.", 2.0)
cli:number_option("--beta", "Branch 2's offset.", 0.5)
cli.parser:option("--dot", "Write the graph's Graphviz DOT text to FILE.")
cli.parser:option("--svg", "Draw the graph as SVG into FILE (needs Graphviz's dot).")
cli:flag("--declared", "Declare the stages by their data (gpurun.pipeline) and let gpurun build the DAG.")
cli:flag("--profile", "Time each node of the graph (graph:profile) and print the critical path.")
cli:common_options{ iters = 1000 }
local options = cli:parse(arg)

-- "39.06 KiB", as gpurun's messages write sizes.
local function size_text(bytes)
  if bytes < 1024 then return bytes .. " bytes" end
  local units, scaled, unit = { "KiB", "MiB", "GiB" }, bytes / 1024, 1
  while scaled >= 1024 and unit < #units do scaled, unit = scaled / 1024, unit + 1 end
  return ("%.2f %s"):format(scaled, units[unit])
end

local function reference(a, b, alpha, beta)
  local expected = {}
  for i = 1, #a do
    expected[i] = alpha * a[i] + (b[i] + beta)
  end
  return expected
end

-- Writes the DOT text, and the SVG through dot when asked: returns nil or
-- a one-line problem.
local function draw(graph, device)
  local dot = graph:to_dot{ title = ("dag.lua on %s"):format(device.name) }
  if options.dot then
    local ok, why = shell.write_file(options.dot, dot)
    if not ok then return why end
  end
  if options.svg then
    local source = os.tmpname()
    local ok, why = shell.write_file(source, dot)
    if not ok then return why end
    local command = ("dot -Tsvg %s -o %s 2>&1"):format(shell.quote(source), shell.quote(options.svg))
    local pipe = io.popen(command)
    local output = pipe:read("a")
    local done = pipe:close()
    os.remove(source)
    if not done then
      return ("could not draw %s with Graphviz's dot (install graphviz): %s"):format(
        options.svg, (output:gsub("%s+$", "")))
    end
  end
  return nil
end

-- The same stages declared by their data: the streams, waits, fork and
-- join are gpurun.pipeline's.
local function declared(p, kernels, buffers, config, alpha, beta, n)
  local v = p:buffers(buffers) -- a, b, b_copy, x, y, r, by name
  p:copy(v.b_copy, v.b)
  p:launch(kernels.shift, config, v.b_copy, v.y, beta, n)
  p:launch(kernels.scale, config, v.a, v.x, p:scalar("alpha", alpha), n)
  p:launch(kernels.combine, config, v.x, v.y, v.r, n)
  return p
end

-- --profile: each node's median time, the critical path and the timeline.
local function print_profile(out, graph, stream)
  local profile = graph:profile(stream, { replays = math.max(1, math.min(options.iters, 1000)) })
  out:field("profile_critical_us", profile.critical_us)
  out:field("profile_plain_us", profile.plain_us)
  local node_us = {}
  for k, node in ipairs(profile.nodes) do node_us[k] = node.us end
  out:field("profile_node_us", node_us)
  out:say("\nEach node's time (graph:profile, medians of " .. profile.replays .. " replays):")
  out:say(require("gpurun.graph.profile").format(profile))
  out:say(timeline.format(profile))
end

local function node_kinds(graph)
  local kinds = {}
  for _, node in ipairs(graph:nodes()) do kinds[#kinds + 1] = node.name or node.kind end
  return table.concat(kinds, ", ")
end

-- With --declared, the same DAG comes from gpurun.pipeline instead: each
-- stage says only what it reads and writes, and gpurun infers the two
-- streams, the wait before combine, the fork and the join (the same four
-- nodes and dependencies, the same results). alpha then changes in the
-- graph in place through pipeline:set, and pointing `a` at another buffer of
-- the same shape updates the graph (graph:update) without a new one.
-- --declared: the pipeline's run, graph, set and update in place of the
-- hand-built ones, with the same output.
local function main_declared(device, out, checks, main_stream, kernels, buffers, config)
  local n, alpha, beta = options.elements, options.alpha, options.beta
  local a_host, b_host = buffers.a:to_table(), buffers.b:to_table()
  local p <close> = declared(gpurun.pipeline{ name = "dag" }, kernels, buffers, config, alpha, beta, n)
  local plan = p:plan()
  out:field("declared_streams", #plan.streams)
  out:say(("Declared: %d stages, %d streams, %d waits between them, inferred from what each stage "
    .. "reads and writes"):format(#plan.stages, #plan.streams, (function()
      local waits = 0
      for _, unit in ipairs(plan.units) do waits = waits + #unit.waits end
      return waits
    end)()))
  local expected <close> = gpurun.array(reference(a_host, b_host, alpha, beta), "float32")
  local individual = bench.run(main_stream, function(s) p:run(s) end,
                               { iters = options.iters, warmup = WARMUP, name = "two streams" })
  checks:buffers("two streams", buffers.r, expected, RTOL, ATOL)
  out:timing("individual", "\nTwo streams:   ", individual)
  buffers.r:fill(0.0)
  local replay = bench.run(main_stream, function(s) p:graph(s) end,
                           { iters = options.iters, warmup = WARMUP, name = "graph" })
  local graph = p:graph(main_stream)
  main_stream:sync()
  out:field("graph_nodes", graph.node_count)
  checks:buffers("graph replay", buffers.r, expected, RTOL, ATOL)
  out:timing("graph", "Graph replay:  ", replay)
  out:speedup("Graph speedup: ", individual, replay)
  out:say(("Graph: %d nodes (%s)"):format(graph.node_count, node_kinds(graph)))
  if options.profile then print_profile(out, graph, main_stream) end

  -- A new alpha, set in the graph in place.
  local alpha2 = alpha * 3
  p:set("alpha", alpha2)
  p:graph(main_stream)
  main_stream:sync()
  local expected2 <close> = gpurun.array(reference(a_host, b_host, alpha2, beta), "float32")
  if checks:buffers("graph with alpha set in place", buffers.r, expected2, RTOL, ATOL) then
    out:say(("\nGraph's scale node set in place by the pipeline: alpha %g -> %g, verified"):format(
      alpha, alpha2))
  end
  -- Another buffer of a's shape: the pipeline captures again and updates the graph.
  local halves = {}
  for i = 1, n do halves[i] = a_host[i] / 2 end
  local a2 <close> = gpurun.array(halves, "float32")
  local captures = p.captures
  p:set("a", a2)
  local same = p:graph(main_stream) == graph
  main_stream:sync()
  local expected3 <close> = gpurun.array(reference(halves, b_host, alpha2, beta), "float32")
  if checks:buffers("graph updated for another buffer", buffers.r, expected3, RTOL, ATOL)
      and checks:condition("the same graph, updated in place", same and p.captures == captures,
                           ("%d captures"):format(p.captures)) then
    out:say("Graph updated in place for a new buffer of a's shape (graph:update), verified")
  end
  -- Drawn here: the graph is the pipeline's, closed with it.
  local problem = draw(graph, device)
  p:set("a", buffers.a)
  return problem
end

--   branch 1:  x = alpha * a                       (kernel scale)
--   branch 2:  b_copy <- b, y = b_copy + beta      (a copy node, kernel shift)
--   join:      r = x + y                           (kernel combine)
--
-- It runs as individual launches on two streams (the join is an event wait)
-- and as one graph captured from a builder split in two (gpurun.join brings
-- the branches back), checks both against a host reference, then changes
-- alpha in the graph without building a new one, twice: by capturing the
-- pipeline again and updating the graph from it (graph:update), and by
-- setting the scale node's arguments alone (graph:set_args). b_copy is a
-- temporary: a second graph makes it inside, an allocation node before the
-- copy and a free node after shift, and the script prints that graph's peak
-- memory beside the bytes the hand-allocated b_copy holds for the whole run.
-- With --dot or --svg it draws the graph (graph:to_dot; SVG through
-- Graphviz's dot).
local function main()
  local device, out, checks = cli:open_run(options)
  local n, alpha, beta = options.elements, options.alpha, options.beta
  out:field("elements", n)
  out:field("iters", options.iters)

  local main_stream <close> = device:create_stream()
  local side_stream <close> = device:create_stream()
  gpurun.set_current_stream(main_stream)
  local code <close> = gpurun.Program(KERNELS, "c++",
    gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch }):compile("cubin")
  local scale <close> = code:get_kernel("scale")
  local shift <close> = code:get_kernel("shift")
  local combine <close> = code:get_kernel("combine")

  local rng <close> = gpurun.default_rng(7)
  local a <close> = rng:random(n, "float32")
  local b <close> = rng:random(n, "float32")
  local b_copy <close> = gpurun.empty(n, "float32")
  local x <close> = gpurun.empty(n, "float32")
  local y <close> = gpurun.empty(n, "float32")
  local r <close> = gpurun.empty(n, "float32")
  local a_host, b_host = a:to_table(), b:to_table()
  local config = gpurun.LaunchConfig{ grid = (n + 255) // 256, block = 256 }
  local launch = gpurun.launch

  if options.declared then
    local problem = main_declared(device, out, checks, main_stream,
      { scale = scale, shift = shift, combine = combine },
      { a = a, b = b, b_copy = b_copy, x = x, y = y, r = r }, config)
    if problem then
      io.stderr:write(cli.name, ": ", problem, "\n")
      return 1
    end
    if options.dot then out:say("Graph drawn: " .. options.dot) end
    if options.svg then out:say("Graph drawn: " .. options.svg) end
    gpurun.set_current_stream(nil)
    if checks:passed() then
      out:say("\nDone")
    end
    return out:finish(checks)
  end

  -- Individual launches: branch 2 on the side stream, joined by a wait.
  local function two_streams(stream)
    b_copy:copy_from(b, side_stream)
    launch(side_stream, config, shift, b_copy, y, beta, n)
    launch(stream, config, scale, a, x, alpha, n)
    stream:wait(side_stream)
    launch(stream, config, combine, x, y, r, n)
  end

  -- The same into a graph: a split builder for branch 2, joined back.
  local function capture(builder, factor)
    local side
    builder, side = builder:split(2)
    b_copy:copy_from(b, side)
    launch(side, config, shift, b_copy, y, beta, n)
    launch(builder, config, scale, a, x, factor, n)
    gpurun.join(builder, side)
    launch(builder, config, combine, x, y, r, n)
  end

  local expected <close> = gpurun.array(reference(a_host, b_host, alpha, beta), "float32")
  local individual = bench.run(main_stream, two_streams,
                               { iters = options.iters, warmup = WARMUP, name = "two streams" })
  side_stream:sync()
  checks:buffers("two streams", r, expected, RTOL, ATOL)
  out:timing("individual", "\nTwo streams:   ", individual)

  local graph <close> = bench.capture(main_stream, function(builder) capture(builder, alpha) end)
  out:field("graph_nodes", graph.node_count)
  r:fill(0.0)
  local replay = bench.run(main_stream, function(s) graph:launch(s) end,
                           { iters = options.iters, warmup = WARMUP, name = "graph" })
  checks:buffers("graph replay", r, expected, RTOL, ATOL)
  out:timing("graph", "Graph replay:  ", replay)
  out:speedup("Graph speedup: ", individual, replay)
  out:say(("Graph: %d nodes (%s)"):format(graph.node_count, node_kinds(graph)))
  if options.profile then print_profile(out, graph, main_stream) end

  -- The same graph with b_copy made and freed inside it, on the side branch.
  local function capture_with_temporary(builder)
    local side
    builder, side = builder:split(2)
    local temporary = gpurun.empty(n, "float32", { stream = side })
    temporary:copy_from(b, side)
    launch(side, config, shift, temporary, y, beta, n)
    temporary:close() -- a free node, after shift
    launch(builder, config, scale, a, x, alpha, n)
    gpurun.join(builder, side)
    launch(builder, config, combine, x, y, r, n)
  end
  local temporary_graph <close> = bench.capture(main_stream, capture_with_temporary)
  r:fill(0.0)
  local temporary_replay = bench.run(main_stream, function(s) temporary_graph:launch(s) end,
                                     { iters = options.iters, warmup = WARMUP, name = "graph, temporary inside" })
  checks:buffers("graph with b_copy inside", r, expected, RTOL, ATOL)
  out:timing("graph_temporary", "Graph, b_copy inside: ", temporary_replay)
  local peak = bench.graph_peak(device, temporary_graph, main_stream)
  out:field("b_copy_bytes", b_copy.nbytes)
  out:field("graph_temporary_peak_bytes", peak)
  out:say(("b_copy: %s held by hand for the whole run; the graph that makes it inside peaks at %s "
           .. "of graph memory"):format(size_text(b_copy.nbytes), size_text(peak)))

  -- A new alpha by a new capture of the same pipeline, updated into the graph.
  local alpha2 = alpha * 3
  do
    local builder <close> = main_stream:create_graph_builder()
    builder:begin_building()
    capture(builder, alpha2)
    builder:end_building()
    graph:update(builder)
  end
  graph:launch(main_stream)
  main_stream:sync()
  local expected2 <close> = gpurun.array(reference(a_host, b_host, alpha2, beta), "float32")
  if checks:buffers("graph updated from a new capture", r, expected2, RTOL, ATOL) then
    out:say(("\nGraph updated in place from a new capture: alpha %g -> %g, verified"):format(
      alpha, alpha2))
  end

  -- And by setting the scale node's arguments alone.
  local alpha3 = alpha / 4
  for _, node in ipairs(graph:nodes()) do
    if node.name == "scale" then graph:set_args(node.index, a, x, alpha3, n) end
  end
  graph:launch(main_stream)
  main_stream:sync()
  local expected3 <close> = gpurun.array(reference(a_host, b_host, alpha3, beta), "float32")
  if checks:buffers("graph with the scale node's arguments set", r, expected3, RTOL, ATOL) then
    out:say(("Graph's scale node set in place: alpha -> %g, verified"):format(alpha3))
  end

  local problem = draw(graph, device)
  if problem then
    io.stderr:write(cli.name, ": ", problem, "\n")
    return 1
  end
  if options.dot then out:say("Graph drawn: " .. options.dot) end
  if options.svg then out:say("Graph drawn: " .. options.svg) end

  gpurun.set_current_stream(nil)
  if checks:passed() then
    out:say("\nDone")
  end
  return out:finish(checks)
end

os.exit(main(), true)
