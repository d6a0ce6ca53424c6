-- Why the driver refused Graph:update(builder), in one line, from what
-- cuGraphExecUpdate said (its result, the node it blamed and, for an edge,
-- the dependency) and both graphs' nodes as Graph:nodes() lists them
-- ("old": the Graph's, "new": the builder's). The driver's node is used
-- where it named one; else the first node that differs. A function of
-- plain tables, so that every refusal is checked on recorded lists with no
-- GPU (spec/graph_update_explain_spec.lua).
local explain = {}

-- Each CUgraphExecUpdateResult the driver documents (cuda.h), in words,
-- and by its name.
local RESULTS = {
  error = { "the driver refused it for a reason it did not name", "CU_GRAPH_EXEC_UPDATE_ERROR" },
  topology_changed = { "the topology changed", "CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED" },
  node_type_changed = { "a node's kind changed", "CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED" },
  function_changed = { "a kernel node's kernel changed, which drivers before CUDA 11.2 cannot update",
    "CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED" },
  parameters_changed = { "a node's parameters changed in a way an update cannot carry (such as memory "
    .. "of another device or context)", "CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED" },
  not_supported = { "the driver cannot update something about this node",
    "CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED" },
  unsupported_function_change = { "a kernel node's kernel changed in a way an update cannot carry "
    .. "(another context, or a kernel that launches work from the device where the old one did not)",
    "CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE" },
  attributes_changed = { "a node's attributes changed in a way an update cannot carry (a priority, "
    .. "in a graph completed with use_node_priority, or a cooperative launch)",
    "CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED" },
}

-- Which difference each result is about, first: a node can differ in more
-- than one way.
local LOOK_FIRST = {
  topology_changed = "dependencies", node_type_changed = "kind", function_changed = "kernel",
  unsupported_function_change = "kernel", parameters_changed = "args",
  attributes_changed = "priority",
}

-- An argument's value: a pointer-sized number as an address, bytes as hex.
local function value_text(value)
  if math.type(value) == "integer" then
    if value < 0 or value >= 1 << 32 then return ("0x%x"):format(value) end
    return tostring(value)
  elseif type(value) == "number" then
    return ("%.9g"):format(value)
  elseif type(value) == "string" then
    local shown = value:sub(1, 16):gsub(".", function(c) return ("%02x"):format(c:byte()) end)
    return "<" .. shown .. (#value > 16 and "..." or "") .. ">"
  end
  return tostring(value)
end

local function list_text(values)
  local parts = {}
  for i, value in ipairs(values or {}) do parts[i] = value_text(value) end
  return "{" .. table.concat(parts, ", ") .. "}"
end

local function sorted_text(indices)
  local copy = {}
  for i, index in ipairs(indices or {}) do copy[i] = index end
  table.sort(copy, function(a, b) return tostring(a) < tostring(b) end)
  return list_text(copy)
end

-- "kernel 'scale_shift'", "memset", "child graph".
local function label(node)
  if node.kind == "kernel" then
    return node.name and ("kernel '" .. node.name .. "'") or "kernel"
  elseif node.kind == "graph" then
    return "child graph"
  end
  return tostring(node.kind)
end

-- "a kernel node ('scale_shift')", "a memset node".
local function kind_text(node)
  local text = (node.kind == "graph" and "a child graph" or "a " .. tostring(node.kind)) .. " node"
  if node.kind == "kernel" and node.name then text = text .. " ('" .. node.name .. "')" end
  return text
end

local function same_list(a, b)
  a, b = a or {}, b or {}
  if #a ~= #b then return false end
  for i = 1, #a do
    if a[i] ~= b[i] and not (a[i] ~= a[i] and b[i] ~= b[i]) then return false end
  end
  return true
end

local function same_set(a, b)
  a, b = a or {}, b or {}
  if #a ~= #b then return false end
  local seen = {}
  for _, value in ipairs(a) do seen[value] = (seen[value] or 0) + 1 end
  for _, value in ipairs(b) do
    if not seen[value] or seen[value] == 0 then return false end
    seen[value] = seen[value] - 1
  end
  return true
end

local differences -- forward: a child graph's nodes are compared as the graph's

-- The first node of two lists that differs: its index and its differences.
local function first_difference(old, new)
  for i = 1, math.max(#old, #new) do
    if old[i] and new[i] then
      local found = differences(old[i], new[i])
      if #found > 0 then return i, found end
    end
  end
  return nil
end

-- How node a (this graph's) and node b (the builder's) differ, as
-- { what =, text = } in a fixed order.
function differences(a, b)
  local found = {}
  local function add(what, text) found[#found + 1] = { what = what, text = text } end
  if a.kind ~= b.kind then
    add("kind", ("%s became %s"):format(kind_text(a), kind_text(b)))
    return found
  end
  if not same_set(a.dependencies, b.dependencies) then
    add("dependencies", ("dependencies %s became %s"):format(sorted_text(a.dependencies),
      sorted_text(b.dependencies)))
  end
  if a.kind == "kernel" then
    local kernel_changed = a.name ~= b.name
    if kernel_changed then
      add("kernel", ("kernel '%s' became '%s'"):format(tostring(a.name or "?"), tostring(b.name or "?")))
    end
    if a.args and b.args and not kernel_changed then
      for k = 1, math.max(#a.args, #b.args) do
        if not same_list({ a.args[k] }, { b.args[k] }) then
          add("args", ("argument %d: %s became %s"):format(k, value_text(a.args[k]), value_text(b.args[k])))
          break
        end
      end
    end
    if (a.priority or 0) ~= (b.priority or 0) then
      add("priority", ("priority %s became %s"):format(tostring(a.priority or 0), tostring(b.priority or 0)))
    end
    for _, key in ipairs({ "grid", "block" }) do
      if a[key] and b[key] and not same_list(a[key], b[key]) then
        add("shape", ("%s %s became %s"):format(key, list_text(a[key]), list_text(b[key])))
      end
    end
    if a.shmem_size and b.shmem_size and a.shmem_size ~= b.shmem_size then
      add("shape", ("shmem_size %d became %d"):format(a.shmem_size, b.shmem_size))
    end
  elseif a.kind == "graph" then
    local old, new = a.nodes or {}, b.nodes or {}
    if #old ~= #new then
      add("children", ("its node count %d became %d"):format(#old, #new))
    else
      local i, inner = first_difference(old, new)
      if i then
        add("children", ("its node %d (%s): %s"):format(i, label(new[i]), inner[1].text))
      end
    end
  elseif a.kind == "mem_alloc" and a.bytes ~= b.bytes then
    add("parameters", ("bytes %s became %s"):format(tostring(a.bytes), tostring(b.bytes)))
  end
  return found
end

-- The one difference to name for `result`: the kind it is about, if the
-- node has that one; else the first.
local function chosen(found, result)
  local wanted = LOOK_FIRST[result]
  for _, difference in ipairs(found) do
    if difference.what == wanted then return difference end
  end
  return found[1]
end

-- What differs, for the refusal's table.
local function detail(refusal)
  local old, new = refusal.old or {}, refusal.new or {}
  if #old ~= #new then
    return ("the node count %d became %d"):format(#old, #new)
  end
  local index = refusal.error_node
  local found
  if index and old[index] and new[index] then
    found = differences(old[index], new[index])
  else
    index, found = first_difference(old, new)
  end
  if not index then
    return "no difference gpurun can see in the nodes' kinds, dependencies, kernels or arguments"
  end
  local node = new[index] or old[index]
  local difference = found and chosen(found, refusal.result)
  if difference and difference.what == "kind" then
    return ("node %d: %s"):format(index, difference.text)
  end
  if refusal.result == "topology_changed" and refusal.from_node
      and not (difference and difference.what == "dependencies") then
    return ("node %d (%s): its dependency on node %d does not pair with this graph's"):format(index,
      label(node), refusal.from_node)
  end
  if not difference then
    if refusal.result == "topology_changed" then
      return ("node %d (%s): the graphs' last nodes differ"):format(index, label(node))
    end
    return ("node %d (%s), in a way gpurun does not list"):format(index, label(node))
  end
  return ("node %d (%s): %s"):format(index, label(node), difference.text)
end

-- The message, after "Graph:update: ".
function explain.message(refusal)
  local result = RESULTS[refusal.result]
  local why
  if result then
    why = result[1] .. ": " .. result[2]
  else
    why = "the driver's update result " .. tostring(refusal.code)
  end
  local status = refusal.status
  if status and status ~= "CUDA_SUCCESS" and status ~= "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE" then
    why = why .. ", " .. status
  end
  return ("the builder's graph cannot update this one: %s (%s)"):format(detail(refusal), why)
end

return explain
