-- GraphBuilder's while_loop, if_then (if_cond) and if_else: a Condition as
-- before, or an expression over named buffers that a kernel gpurun writes
-- decides; while loops are cancellable (graph:cancel(), Ctrl-C) unless
-- told otherwise. The nodes are src/types/graph_builder.c's; the kernels
-- and checks lua/gpurun/compute/conditions.lua's, loaded on first use.
-- A part of the `gpurun` module (see program_options.lua for the protocol).
return function(internal)
  local type_name = internal.type_name
  local core = package.loaded["gpurun.graph_core"] -- src/types/graph_builder.c, opened with the module

  local loaded
  local function conditions()
    -- lazy: the module opens without the Lua library's files
    loaded = loaded or require("gpurun.compute.conditions")
    return loaded
  end

  local function is_expression(value)
    return type(value) == "string"
  end

  -- As the nodes' own check, before the expression is read.
  local function check_building(builder, fname)
    if not builder.is_building then
      internal.raise(("%s: not building (it is %s)"):format(fname, builder.state))
    end
  end

  -- while_loop(condition [, { cancellable = true }]) -> body, or
  -- while_loop(expression, buffers [, { cancellable = true }]) -> body
  local function while_loop(...)
    local builder, condition, second, third = ...
    local fname = "GraphBuilder:while_loop"
    if type_name(select("#", ...), builder) ~= "gpurun.GraphBuilder" then
      return core.while_loop(...) -- its own message for a bad self
    end
    if is_expression(condition) then
      check_building(builder, fname)
      local tree, buffers = conditions().bind(fname, 1, condition, second,
                                              type_name(select("#", ...) - 2, second))
      return conditions().expression_loop(builder, tree, buffers,
                                          conditions().loop_options(fname, 3, third))
    end
    if type_name(select("#", ...) - 1, condition) ~= "gpurun.Condition" then
      return core.while_loop(...) -- the C check's message
    end
    return conditions().while_loop(builder, condition, fname, 2, second)
  end

  local function conditional(method)
    local fname = "GraphBuilder:" .. method
    return function(...)
      local builder, condition, bindings = ...
      if type_name(select("#", ...), builder) == "gpurun.GraphBuilder" and is_expression(condition) then
        check_building(builder, fname)
        local tree, buffers = conditions().bind(fname, 1, condition, bindings,
                                                type_name(select("#", ...) - 2, bindings))
        return conditions().expression_if(builder, method, tree, buffers)
      end
      return core[method](...)
    end
  end

  return {
    methods = {
      GraphBuilder = {
        while_loop = while_loop,
        if_then = conditional("if_then"),
        if_cond = conditional("if_cond"),
        if_else = conditional("if_else"),
      },
    },
  }
end
