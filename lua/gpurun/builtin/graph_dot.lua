-- Graph:to_dot([options]) -> a Graphviz DOT text of the graph: one box per
-- node (index, kernel name, a priority other than 0, an allocation's size),
-- one arrow per dependency, a child graph's nodes in a cluster; options
-- { title =, name =, races = true or graph:check()'s list } (each race a red
-- dashed line, labelled with the hazard and the memory). Drawing is policy,
-- so it is Lua, over graph:nodes(). With Graphviz: dot -Tsvg g.dot -o g.svg.
-- GraphBuilder:debug_dot_print(path) writes the driver's own, fuller picture.
return function(internal)
  local COLOURS = {
    kernel = "#cfe2ff", memcpy = "#d1e7dd", memset = "#fff3cd", conditional = "#f8d7da",
    event_record = "#e2e3e5", wait_event = "#e2e3e5", empty = "#ffffff",
    mem_alloc = "#e0cffc", mem_free = "#e0cffc",
  }

  -- "1.00 MiB", as gpurun's messages write sizes.
  local function size_text(bytes)
    if bytes < 1024 then return bytes .. " bytes" end
    local units, scaled, unit = { "KiB", "MiB", "GiB", "TiB" }, bytes / 1024, 1
    while scaled >= 1024 and unit < #units do scaled, unit = scaled / 1024, unit + 1 end
    return ("%.2f %s"):format(scaled, units[unit])
  end

  local function quoted(text)
    return '"' .. tostring(text):gsub('[\\"]', "\\%0"):gsub("\n", "\\n") .. '"'
  end

  local function option(options, key, kind)
    local value = options[key]
    if value ~= nil and type(value) ~= kind then
      internal.raise(("bad argument #1 to 'Graph:to_dot' (%s must be a %s, got %s)")
        :format(key, kind, type(value)))
    end
    return value
  end

  local function to_dot(...)
    local graph, options = ...
    local given = select("#", ...)
    local kind = internal.type_name(given, graph)
    if kind ~= "gpurun.Graph" or type(graph) ~= "userdata" then
      internal.raise(("calling 'Graph:to_dot' on bad self (gpurun.Graph expected, got %s)")
        :format(kind))
    end
    if options ~= nil and type(options) ~= "table" then
      internal.raise(("bad argument #1 to 'Graph:to_dot' (table of options expected, got %s)")
        :format(type(options)))
    end
    options = options or {}
    -- lazy: the module opens without the Lua library's files
    local unknown = require("gpurun.options").unknown(options, { "name", "title", "races" })
    if unknown then internal.raise(("bad argument #1 to 'Graph:to_dot' (%s)"):format(unknown)) end
    local name = option(options, "name", "string") or "gpurun_graph"
    local title = option(options, "title", "string")
    local races = options.races
    if races ~= nil and races ~= false and races ~= true and type(races) ~= "table" then
      internal.raise(("bad argument #1 to 'Graph:to_dot' (races must be a boolean or graph:check()'s "
        .. "list, got %s)"):format(type(races)))
    end
    if races == true then races = graph:check() end
    local nodes = graph:nodes()
    local lines = { "digraph " .. quoted(name) .. " {" }
    lines[#lines + 1] = '  node [shape=box, style="rounded,filled", fontname="Helvetica"];'
    if title then
      lines[#lines + 1] = "  labelloc=t; label=" .. quoted(title) .. ";"
    end
    -- Nodes of a child graph are drawn in a box of their own, named after
    -- the path of indices to them (n3_1: node 1 of child graph node 3).
    local function draw(list, prefix, indent)
      for _, node in ipairs(list) do
        local id = prefix .. node.index
        if node.kind == "graph" then
          lines[#lines + 1] = ("%ssubgraph cluster_%s {"):format(indent, id)
          lines[#lines + 1] = ("%s  label=%s; style=rounded;"):format(indent,
            quoted(("%d: child graph"):format(node.index)))
          -- An empty child still needs a node for the arrows to meet.
          lines[#lines + 1] = ("%s  %s [label=%s, shape=point];"):format(indent, id, quoted(""))
          draw(node.nodes or {}, id .. "_", indent .. "  ")
          lines[#lines + 1] = indent .. "}"
        else
          local label = ("%d: %s"):format(node.index, node.name or node.kind)
          if node.name then label = label .. "\n(" .. node.kind .. ")" end
          if node.bytes then label = label .. "\n" .. size_text(node.bytes) end
          if node.priority and node.priority ~= 0 then label = label .. "\npriority " .. node.priority end
          if node.enabled == false then label = label .. "\ndisabled" end
          lines[#lines + 1] = ("%s%s [label=%s, fillcolor=%s%s];"):format(indent, id, quoted(label),
            quoted(COLOURS[node.kind] or "#f0f0f0"),
            node.enabled == false and ', style="rounded,filled,dashed"' or "")
        end
      end
      for _, node in ipairs(list) do
        for _, from in ipairs(node.dependencies) do
          lines[#lines + 1] = ("%s%s%d -> %s%d;"):format(indent, prefix, from, prefix, node.index)
        end
      end
    end
    draw(nodes, "n", "  ")
    local function not_races()
      internal.raise("bad argument #1 to 'Graph:to_dot' (races must be graph:check()'s list)")
    end
    for _, race in ipairs(type(races) == "table" and races or {}) do
      if type(race) ~= "table" then not_races() end
      local first, second = race.first, race.second
      if type(first) ~= "table" or type(second) ~= "table" or type(race.hazard) ~= "string" then
        not_races()
      end
      local a, b = first.top or first.index, second.top or second.index
      if math.type(a) ~= "integer" or math.type(b) ~= "integer" then not_races() end
      local text = race.hazard .. " " .. tostring(race.label or "memory")
      if a ~= first.index or b ~= second.index then
        text = ("%s (nodes %s and %s)"):format(text, tostring(first.index), tostring(second.index))
      end
      lines[#lines + 1] = ('  n%d -> n%d [color="#d62728", fontcolor="#d62728", style=dashed, '
        .. 'dir=none, constraint=false, label=%s];'):format(a, b, quoted(text))
    end
    lines[#lines + 1] = "}"
    return table.concat(lines, "\n") .. "\n"
  end

  return { methods = { Graph = { to_dot = to_dot } } }
end
