-- Conditional nodes decided on the device by kernels gpurun writes: a
-- condition given as an expression over named buffers (condition_parse,
-- condition_source), and the cancel check every cancellable while loop
-- gets. What GraphBuilder's while_loop, if_then and if_else run
-- (builtin/loops.lua) over src/types/graph_builder.c's nodes.

-- A while loop is cancellable unless { cancellable = false }: after each
-- pass, a kernel checks the graph's cancel flag (set by graph:cancel() or
-- Ctrl-C; read at most once per condition_source's CANCEL_PERIOD_NS) and
-- clears the condition once it is set. An
-- expression's decision kernel reads the flag itself, so its loops get no
-- second kernel. bench/while_cancel.lua measures what the check costs.

local gpurun = require("gpurun")
local common = require("gpurun.common")
local arguments = require("gpurun.compute.arguments")
local parse = require("gpurun.compute.condition_parse")
local cs = require("gpurun.compute.condition_source")

local core = package.loaded["gpurun.graph_core"] -- src/types/graph_builder.c, opened with the module
local type_name, quoted = common.type_name, common.quoted

local conditions = {}

local LOOP_OPTIONS = { "cancellable" }
local ONE = gpurun.LaunchConfig{ grid = 1, block = 1 }
local BLOCK = gpurun.LaunchConfig{ grid = 1, block = cs.BLOCK }
local MAX_PROGRAMS = 256

-- Programs compiled so far: source .. device -> { code, kernel }; started
-- again past MAX_PROGRAMS (a graph keeps the kernels it captured).
local programs, program_count = {}, 0

local function kernel_of(source, name, device_id)
  local key = device_id .. "\0" .. source
  local found = programs[key]
  if found then return found.kernel end
  if program_count >= MAX_PROGRAMS then programs, program_count = {}, 0 end
  local device = gpurun.Device(device_id)
  local options = gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch }
  local code = gpurun.Program(source, "c++", options):compile("cubin", { name = name .. ".cu" })
  found = { code = code, kernel = code:get_kernel(name) }
  programs[key] = found
  program_count = program_count + 1
  return found.kernel
end

-- The options of a while loop, checked: whether it is cancellable.
function conditions.loop_options(fname, n, options)
  options = arguments.check_options(fname, n, options, LOOP_OPTIONS)
  local cancellable = rawget(options, "cancellable")
  if cancellable == nil then return true end
  if type(cancellable) ~= "boolean" then
    common.bad_argument(fname, n, "options.cancellable must be a boolean, got %s", quoted(cancellable))
  end
  return cancellable
end

-- The expression at argument n parsed, its names bound to the buffers of
-- the table at n + 1: the tree and { name -> buffer }. bindings_type names
-- that argument as the caller saw it ("no value" when absent).
function conditions.bind(fname, n, expression, bindings, bindings_type)
  local tree, why = parse.parse(expression)
  if not tree then
    common.bad_argument(fname, n, "bad condition expression: %s", why)
  end
  if not common.is_plain_table(bindings) then
    common.bad_argument(fname, n + 1, "a table of the expression's buffers by name expected, got %s",
                        bindings_type or type_name(bindings))
  end
  local names, buffers = parse.names(tree), {}
  for _, name in ipairs(names) do
    local buffer = rawget(bindings, name)
    if buffer == nil then
      common.bad_argument(fname, n + 1, "the expression reads '%s', which the table does not bind", name)
    end
    arguments.check_buffer(fname, n + 1, buffer, "'" .. name .. "'", "conditions")
    buffers[name] = buffer
  end
  for key in next, bindings do
    if buffers[key] == nil then
      common.bad_argument(fname, n + 1, "%s is bound but the expression never reads it", quoted(key))
    end
  end
  parse.each_call(tree, function(call)
    local a, b = call.args[1], call.args[2]
    if b and #buffers[a] ~= #buffers[b] then
      common.bad_argument(fname, n + 1, "%s(%s, %s): '%s' has %d elements and '%s' %d", call.name,
                          a, b, a, #buffers[a], b, #buffers[b])
    end
  end)
  return tree, buffers
end

local function device_of(builder)
  return builder.stream.device
end

-- Launches the decision of `tree` on `builder`: it sets `condition`, and
-- with a cancel address also reads that flag.
local function decide(builder, tree, buffers, condition, cancel)
  local dtypes = {}
  for name, buffer in pairs(buffers) do dtypes[name] = buffer.dtype end
  local source, name, order = cs.decision(tree, dtypes)
  local kernel = kernel_of(source, name, device_of(builder))
  local args = { condition, gpurun.u64(cancel or 0) }
  for _, buffer_name in ipairs(order) do
    local buffer = buffers[buffer_name]
    args[#args + 1] = buffer
    args[#args + 1] = gpurun.u64(#buffer)
  end
  gpurun.launch(builder, BLOCK, kernel, table.unpack(args))
end

local function check_cancel(builder, condition, cancel)
  local kernel = kernel_of(cs.CANCEL, cs.CANCEL_NAME, device_of(builder))
  gpurun.launch(builder, ONE, kernel, condition, gpurun.u64(cancel))
end

-- while_loop(builder, condition, options_at, options) -> body: the user's
-- condition, with the cancel check after each pass (a cancel made before
-- the loop starts ends it after its first pass). The node comes first, so
-- that a bad condition gets the node's own message.
function conditions.while_loop(builder, condition, fname, n, options)
  local body = core.while_loop(builder, condition)
  if conditions.loop_options(fname, n, options) then
    local cancel = core.cancel_address(builder)
    core.set_closing(body, function(b) check_cancel(b, condition, cancel) end)
  end
  return body
end

-- while_loop from an expression: decided before the loop and after each
-- pass, by one kernel that also reads the cancel flag when cancellable.
function conditions.expression_loop(builder, tree, buffers, cancellable)
  local condition = builder:create_condition(0)
  local cancel = cancellable and core.cancel_address(builder) or nil
  decide(builder, tree, buffers, condition, cancel)
  local body = core.while_loop(builder, condition)
  core.set_closing(body, function(b) decide(b, tree, buffers, condition, cancel) end)
  return body
end

-- if_then / if_else from an expression: decided once, before the node.
function conditions.expression_if(builder, method, tree, buffers)
  local condition = builder:create_condition(0)
  decide(builder, tree, buffers, condition, nil)
  return core[method](builder, condition)
end

gpurun.guard(conditions)

return conditions
