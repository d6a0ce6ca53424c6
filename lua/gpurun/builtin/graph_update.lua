-- Graph:update(builder): the C side (types/graph_update.c, in
-- package.loaded["gpurun.graph_core"]) updates the graph in place, or
-- hands back what the driver refused with and both graphs' nodes; the one
-- line that says which node differs and how is policy, worded by
-- gpurun.graph.update_explain.
return function(internal)
  local core = package.loaded["gpurun.graph_core"]

  -- The arguments pass as given, so that a missing one reads as missing.
  local function update(...)
    local graph = ...
    local result = core.update(...)
    if rawequal(result, graph) then return graph end
    -- lazy: the module opens without the Lua library's files
    local explain = require("gpurun.graph.update_explain")
    internal.raise("Graph:update: " .. explain.message(result) .. "; the graph replays as before")
  end

  return { methods = { Graph = { update = update } } }
end
