-- Graph:check(), GraphBuilder:check(): the races of a graph built by hand,
-- pairs of nodes no path of edges orders that touch the same memory, one
-- writing (lua/gpurun/graph/: the facts of the nodes become accesses, the
-- check itself needs no GPU). Kernel:set_access narrows what a kernel is
-- taken to write; GraphBuilder:complete{ check = true }, or
-- GPURUN_GRAPH_CHECK=1 in the environment, checks before completing and
-- raises on a race.
return function(internal)
  local core = package.loaded["gpurun.graph_core"] -- src/types/graph_facts.c, opened with the module
  local complete_graph = core.complete

  local function bad_self(method, given, self, expected)
    local kind = internal.type_name(given, self)
    if kind ~= expected or type(self) ~= "userdata" then
      internal.raise(("calling '%s' on bad self (%s expected, got %s)"):format(method, expected, kind))
    end
  end

  -- The options table at #1: nil, or a table of known keys, boolean values.
  local function boolean_options(method, options, keys)
    if options == nil then return {} end
    if type(options) ~= "table" then
      internal.raise(("bad argument #1 to '%s' (table of options expected, got %s)")
        :format(method, internal.type_name(1, options)))
    end
    -- lazy: the module opens without the Lua library's files
    local unknown = require("gpurun.options").unknown(options, keys)
    if unknown then internal.raise(("bad argument #1 to '%s' (%s)"):format(method, unknown)) end
    for _, key in ipairs(keys) do
      local value = options[key]
      if value ~= nil and type(value) ~= "boolean" then
        internal.raise(("bad argument #1 to '%s' (option '%s' must be a boolean, got %s)")
          :format(method, key, internal.type_name(1, value)))
      end
    end
    return options
  end

  local function modes_of(kernel)
    -- lazy: the module opens without the Lua library's files
    return require("gpurun.graph.kernel_access").of(kernel, core.kernel_code)
  end

  -- The races of a Graph or a built GraphBuilder, each with its message.
  local function races_of(object)
    -- lazy: the module opens without the Lua library's files
    local accesses = require("gpurun.graph.accesses")
    -- lazy: as above
    local race_check = require("gpurun.graph.race_check")
    local races, unchecked = accesses.check(core.facts(object), modes_of)
    for _, race in ipairs(races) do
      race.key = nil
      race.bytes = race.hi - race.lo
      race.message = race_check.describe(race)
    end
    return races, unchecked
  end

  -- One line however racy the graph: the first REPORTED races, then how
  -- many more check() lists.
  local REPORTED = 8
  local function report(method, races)
    local lines = {}
    for k = 1, math.min(#races, REPORTED) do lines[k] = races[k].message end
    if #races > REPORTED then
      lines[#lines + 1] = ("and %d more (check() lists them all)"):format(#races - REPORTED)
    end
    return ("%s: %d race%s: %s"):format(method, #races, #races == 1 and "" or "s",
      table.concat(lines, "; "))
  end

  local function check_method(method, expected)
    return function(...)
      local self, options = ...
      bad_self(method, select("#", ...), self, expected)
      options = boolean_options(method, options, { "raise" })
      local races, unchecked = races_of(self)
      if options.raise and #races > 0 then internal.raise(report(method, races)) end
      return races, unchecked
    end
  end

  -- Whether complete() checks first: its option, else the environment.
  local function wants_check(option)
    if option ~= nil then return option end
    local value = os.getenv("GPURUN_GRAPH_CHECK")
    return value ~= nil and value ~= "" and value ~= "0"
  end

  local function complete(...)
    local builder, options = ...
    local given = select("#", ...)
    if given == 0 then return complete_graph() end -- its own message for no self
    local check
    if type(options) == "table" and rawget(options, "check") ~= nil then
      check = options.check
      if type(check) ~= "boolean" then
        internal.raise(("bad argument #1 to 'GraphBuilder:complete' (option 'check' must be a "
          .. "boolean, got %s)"):format(internal.type_name(1, check)))
      end
      local rest = {}
      for k, v in pairs(options) do
        if k ~= "check" then rest[k] = v end
      end
      options = rest
    end
    if wants_check(check) and internal.type_name(given, builder) == "gpurun.GraphBuilder"
        and builder.state == "built" and builder.kind == "origin" then
      local races = races_of(builder)
      if #races > 0 then
        internal.raise(report("GraphBuilder:complete", races) .. " (checked because "
          .. (check and "of { check = true }" or "GPURUN_GRAPH_CHECK is set") .. ")")
      end
    end
    if given >= 2 then return complete_graph(builder, options) end
    return complete_graph(builder)
  end

  local function set_access(...)
    local kernel, modes = ...
    bad_self("Kernel:set_access", select("#", ...), kernel, "gpurun.Kernel")
    -- lazy: as above
    local kernel_access = require("gpurun.graph.kernel_access")
    local num_params = kernel.num_params -- raises when it or its code is closed
    if select("#", ...) < 2 then
      internal.raise("bad argument #1 to 'Kernel:set_access' (table of access modes expected, got no value)")
    end
    kernel_access.declare(kernel, kernel_access.check_declaration(modes, num_params,
      "Kernel:set_access"))
    return kernel
  end

  local function kernel_access_method(...)
    local kernel = ...
    bad_self("Kernel:access", select("#", ...), kernel, "gpurun.Kernel")
    local _ = kernel.num_params -- raises when it or its code is closed
    local result = {}
    for p, m in pairs(modes_of(kernel)) do result[p] = { mode = m.mode, how = m.how } end
    return result
  end

  return { methods = {
    Graph = { check = check_method("Graph:check", "gpurun.Graph") },
    GraphBuilder = { check = check_method("GraphBuilder:check", "gpurun.GraphBuilder"),
                     complete = complete },
    Kernel = { set_access = set_access, access = kernel_access_method },
  } }
end
