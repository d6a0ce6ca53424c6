-- Graph:profile(stream [, { replays = 20 }]) -> each node's median time:
-- an instrumented twin of the graph (an event record node before and after
-- each node, types/graph_profile.c) replayed `replays` times, and the
-- graph itself as many, for comparison. What the times become (medians,
-- shares, the critical path) is gpurun.graph.profile's.
-- A part of the `gpurun` module (see program_options.lua for the protocol).
return function(internal)
  local function profile(...)
    local graph, stream, options = ...
    local kind = internal.type_name(select("#", ...), graph)
    if kind ~= "gpurun.Graph" or type(graph) ~= "userdata" then
      internal.raise(("calling 'Graph:profile' on bad self (gpurun.Graph expected, got %s)")
        :format(kind))
    end
    local _ = graph.node_count -- a closed graph is refused as such, first
    local stream_kind = internal.type_name(select("#", ...) - 1, stream)
    if stream_kind ~= "gpurun.Stream" or type(stream) ~= "userdata" then
      internal.raise(("bad argument #1 to 'Graph:profile' (gpurun.Stream expected, got %s)")
        :format(stream_kind))
    end
    -- lazy: the module opens without the Lua library's files
    local policy = require("gpurun.graph.profile")
    local replays, why = policy.check_options(options)
    if not replays then
      internal.raise(("bad argument #2 to 'Graph:profile' (%s)"):format(why))
    end
    local nodes = graph:nodes()
    local record = package.loaded["gpurun.graph_profile_core"].record(graph, stream, replays)
    -- The plain graph back to back, an event between replays: its replay
    -- time as a loop of launches sees it. The events are made first.
    local events = {}
    for r = 0, replays do events[r] = stream:record() end
    graph:launch(stream)
    stream:record(events[0])
    for r = 1, replays do
      graph:launch(stream)
      stream:record(events[r])
    end
    stream:sync()
    local plain = {}
    for r = 1, replays do plain[r] = events[r]:elapsed_ms(events[r - 1]) * 1000 end
    for r = 0, replays do events[r]:close() end
    return policy.summarize(nodes, record, plain)
  end

  return { methods = { Graph = { profile = profile } } }
end
