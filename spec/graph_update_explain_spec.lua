-- Why Graph:update was refused, worded from recorded node lists (as
-- Graph:nodes() gives them) and the driver's answer, with no GPU: every
-- CUgraphExecUpdateResult the driver documents, the node it blames or the
-- first that differs, and what differs in it.
local explain = require("gpurun.graph.update_explain")

local PREFIX = "the builder's graph cannot update this one: "

local function kernel(index, name, args, extra)
  local node = { index = index, kind = "kernel", name = name, dependencies = {}, args = args,
                 grid = { 16, 1, 1 }, block = { 256, 1, 1 }, shmem_size = 0, priority = 0 }
  for key, value in pairs(extra or {}) do node[key] = value end
  return node
end

local function node(index, kind, dependencies)
  return { index = index, kind = kind, dependencies = dependencies or {} }
end

-- scale_shift(x, 2.0, 1, 4096) then vec_add(a, b, out, 4096) after it.
local X, A, B, OUT = 0x7f0000200000, 0x7f0000400000, 0x7f0000600000, 0x7f0000800000
local function chain()
  return {
    kernel(1, "scale_shift", { X, 2.0, 1, 4096 }),
    kernel(2, "vec_add", { A, B, OUT, 4096 }, { dependencies = { 1 } }),
  }
end

local function message(refusal)
  local text = explain.message(refusal)
  assert.is_nil(text:find("\n", 1, true), text)
  assert.are.equal(PREFIX, text:sub(1, #PREFIX), text)
  return text
end

describe("the explanation of a refused Graph:update", function()
  it("says the node count changed, with the driver's reason", function()
    local new = chain()
    new[3] = kernel(3, "vec_add", { A, B, OUT, 4096 }, { dependencies = { 2 } })
    assert.are.equal(PREFIX .. "the node count 2 became 3 (the topology changed: "
      .. "CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED)",
      message({ result = "topology_changed", code = 2, old = chain(), new = new }))
  end)

  it("names the node whose dependencies changed, where the driver blames it", function()
    local new = chain()
    new[2].dependencies = {}
    assert.are.equal(PREFIX .. "node 2 (kernel 'vec_add'): dependencies {1} became {} (the topology "
      .. "changed: CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED)",
      message({ result = "topology_changed", code = 2, error_node = 2, old = chain(), new = new }))
  end)

  it("finds the first node that differs when the driver blames none", function()
    local old, new = chain(), chain()
    old[3] = node(3, "memset", { 1 })
    new[3] = node(3, "memset", { 2 })
    assert.are.equal(PREFIX .. "node 3 (memset): dependencies {1} became {2} (the topology changed: "
      .. "CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED)",
      message({ result = "topology_changed", code = 2, old = old, new = new }))
  end)

  it("names the dependency the driver could not pair", function()
    assert.are.equal(PREFIX .. "node 2 (kernel 'vec_add'): its dependency on node 1 does not pair "
      .. "with this graph's (the topology changed: CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED)",
      message({ result = "topology_changed", code = 2, error_node = 2, from_node = 1, old = chain(),
                new = chain() }))
  end)

  it("says when the blamed node differs in nothing gpurun lists (another exit node)", function()
    assert.are.equal(PREFIX .. "node 2 (kernel 'vec_add'): the graphs' last nodes differ (the "
      .. "topology changed: CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED)",
      message({ result = "topology_changed", code = 2, error_node = 2, old = chain(), new = chain() }))
  end)

  it("says which kind a node became", function()
    local new = chain()
    new[1] = node(1, "memset")
    assert.are.equal(PREFIX .. "node 1: a kernel node ('scale_shift') became a memset node (a node's "
      .. "kind changed: CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED)",
      message({ result = "node_type_changed", code = 3, error_node = 1, old = chain(), new = new }))
  end)

  it("names both kernels when a node's kernel changed", function()
    local new = chain()
    new[1] = kernel(1, "schedule", { A, 1 })
    for _, case in ipairs({
      { "function_changed", 4, "a kernel node's kernel changed, which drivers before CUDA 11.2 cannot "
        .. "update: CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED" },
      { "unsupported_function_change", 7, "a kernel node's kernel changed in a way an update cannot "
        .. "carry (another context, or a kernel that launches work from the device where the old one "
        .. "did not): CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE" },
    }) do
      assert.are.equal(PREFIX .. "node 1 (kernel 'schedule'): kernel 'scale_shift' became 'schedule' ("
        .. case[3] .. ")",
        message({ result = case[1], code = case[2], error_node = 1, old = chain(), new = new }))
    end
  end)

  it("gives the first argument that differs, old and new, for a kernel's parameters", function()
    local new = chain()
    new[2].args[2] = 0x7f1000000000
    new[2].args[4] = 8192
    assert.are.equal(PREFIX .. "node 2 (kernel 'vec_add'): argument 2: 0x7f0000600000 became "
      .. "0x7f1000000000 (a node's parameters changed in a way an update cannot carry (such as memory "
      .. "of another device or context): CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED)",
      message({ result = "parameters_changed", code = 5, error_node = 2, old = chain(), new = new }))
    new = chain()
    new[1].args[2] = 10.5
    local expect_text = message({ result = "parameters_changed", code = 5, error_node = 1, old = chain(), new = new })
    assert.truthy(expect_text:find("node 1 (kernel 'scale_shift'): argument 2: 2 became 10.5 (", 1, true),
      expect_text)
    -- A struct passed by value is shown as its bytes.
    local old = { kernel(1, "k", { "\1\2\3\4" }) }
    new = { kernel(1, "k", { "\1\2\3\5" }) }
    local text = message({ result = "parameters_changed", code = 5, error_node = 1, old = old, new = new })
    assert.truthy(text:find("argument 1: <01020304> became <01020305>", 1, true), text)
  end)

  it("names the node of a parameter change it cannot see", function()
    local old = { node(1, "memcpy") }
    assert.are.equal(PREFIX .. "node 1 (memcpy), in a way gpurun does not list (a node's parameters "
      .. "changed in a way an update cannot carry (such as memory of another device or context): "
      .. "CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED)",
      message({ result = "parameters_changed", code = 5, error_node = 1, old = old, new = { node(1, "memcpy") } }))
  end)

  it("gives the priority that changed, for attributes", function()
    local new = chain()
    new[2].priority = -2
    new[2].args[4] = 8192 -- also differs, but the driver's reason is the attributes
    assert.are.equal(PREFIX .. "node 2 (kernel 'vec_add'): priority 0 became -2 (a node's attributes "
      .. "changed in a way an update cannot carry (a priority, in a graph completed with "
      .. "use_node_priority, or a cooperative launch): CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED)",
      message({ result = "attributes_changed", code = 8, error_node = 2, old = chain(), new = new }))
  end)

  it("names the node the driver cannot update", function()
    local old = { node(1, "event_record"), node(2, "wait_event", { 1 }) }
    local new = { node(1, "event_record"), node(2, "wait_event", { 1 }) }
    assert.are.equal(PREFIX .. "node 2 (wait_event), in a way gpurun does not list (the driver cannot "
      .. "update something about this node: CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED)",
      message({ result = "not_supported", code = 6, error_node = 2, old = old, new = new }))
  end)

  it("adds the call's own error to an unnamed refusal", function()
    assert.are.equal(PREFIX .. "no difference gpurun can see in the nodes' kinds, dependencies, kernels "
      .. "or arguments (the driver refused it for a reason it did not name: CU_GRAPH_EXEC_UPDATE_ERROR, "
      .. "CUDA_ERROR_INVALID_VALUE)",
      message({ result = "error", code = 1, status = "CUDA_ERROR_INVALID_VALUE", old = chain(), new = chain() }))
  end)

  it("gives the code of a result it does not know", function()
    local text = message({ result = "unknown", code = 42, old = chain(), new = chain() })
    assert.truthy(text:find("(the driver's update result 42)", 1, true), text)
  end)

  it("looks inside a child graph node", function()
    local function with_child(factor, count)
      local child = { index = 2, kind = "graph", dependencies = { 1 }, nodes = {} }
      for i = 1, count do child.nodes[i] = kernel(i, "scale_shift", { X, factor, 0, 4096 }) end
      return { kernel(1, "vec_add", { A, B, OUT, 4096 }), child }
    end
    local text = message({ result = "parameters_changed", code = 5, error_node = 2,
                           old = with_child(2.0, 1), new = with_child(3.0, 1) })
    assert.truthy(text:find("node 2 (child graph): its node 1 (kernel 'scale_shift'): argument 2: 2 "
      .. "became 3 (", 1, true), text)
    text = message({ result = "topology_changed", code = 2, error_node = 2,
                     old = with_child(2.0, 1), new = with_child(2.0, 2) })
    assert.truthy(text:find("node 2 (child graph): its node count 1 became 2 (", 1, true), text)
  end)

  it("takes lists with nothing in them", function()
    local text = message({ result = "topology_changed", code = 2, old = {}, new = { node(1, "empty") } })
    assert.truthy(text:find("the node count 0 became 1", 1, true), text)
    text = message({ result = "error", code = 1 })
    assert.truthy(text:find("no difference gpurun can see", 1, true), text)
  end)
end)
