-- Finding nodes in a gpurun.Graph, for the graph specs.
local graph_nodes = {}

-- The node graph:nodes() lists for the kernel `name` (the only one).
function graph_nodes.node_named(graph, name)
  for _, node in ipairs(graph:nodes()) do
    if node.name == name then return node end
  end
  error("no node named " .. name)
end

return graph_nodes
