-- Pipelines of elementwise stages for gpurun.elementwise, fused where their
-- intermediates are not wanted: the stages read, grouped into kernels, made
-- with elementwise.lua's constructor (reduction stages with
-- reduction_stages.lua's), and launched with their temporaries.

local gpurun = require("gpurun")
local common = require("gpurun.common")
local options_rule = require("gpurun.options")
local launch_plans = require("gpurun.compute.launch_plans")
local reductions = require("gpurun.compute.reduction_stages")
local source = require("gpurun.compute.elementwise_source")


local raise = common.raise

local ElementwisePipeline = {}
ElementwisePipeline.__index = ElementwisePipeline


local FUSE_MODES = { auto = true, always = true, never = true }


local function parse_stage(text, what, index)
  if type(text) ~= "string" then
    raise(("%s: stage %d must be a string \"<dtype> <name> = <expression>\", got %s"):format(
          what, index, type(text)))
  end
  local stage = reductions.parse_stage(text, what, index)
  if stage then
    return stage
  end
  local dtype, name, expression = text:match("^%s*([%w_]+)%s+([%w_]+)%s*=%s*(.-)%s*;?%s*$")
  if not dtype or expression == "" or expression:sub(1, 1) == "=" then
    raise(("%s: stage %d, '%s', is not \"<dtype> <name> = <expression>\""):format(what, index, text))
  end
  local params, why = source.parse_params(dtype .. " " .. name, ("%s stage %d"):format(what, index))
  if not params then
    raise(why)
  end
  return { type = dtype, name = name, expression = expression, variable = params[1].variable }
end

-- What a message says of a list refused for its metatable.
local PLAIN_LIST = "must be a plain list (no metatable) of "
local WITH_METATABLE = ", got a table with a metatable"

local function name_list(value, what)
  local names = {}
  if type(value) == "table" and not common.is_plain_table(value) then
    raise(("%s: outputs %sstage names%s"):format(what, PLAIN_LIST, WITH_METATABLE))
  end
  if type(value) == "string" then
    for name in value:gmatch("[^,%s]+") do
      names[#names + 1] = name
    end
  elseif type(value) == "table" then
    for index, name in ipairs(value) do
      names[index] = name
    end
  else
    raise(("%s: outputs must be a string such as \"r3\" or a list of stage names, got %s"):format(
          what, type(value)))
  end
  if #names == 0 then
    raise(what .. ": outputs names no stage")
  end
  return names
end

-- Stages, checked: unique names, known types, reads of inputs and earlier
-- stages only. Returns the stages and a map name -> stage index.
local function read_stages(stages, inputs, what)
  if type(stages) == "table" and not common.is_plain_table(stages) then
    raise(("%s: stages %s\"<dtype> <name> = <expression>\"%s"):format(what, PLAIN_LIST, WITH_METATABLE))
  end
  if type(stages) ~= "table" or #stages == 0 then
    raise(what .. ": stages must be a non-empty list of \"<dtype> <name> = <expression>\"")
  end
  local input_index, input_variables, stage_index, list = {}, {}, {}, {}
  for index, param in ipairs(inputs) do
    input_index[param.name] = index
    if param.variable then
      input_variables[param.type] = true
    end
  end
  for index, text in ipairs(stages) do
    local stage = parse_stage(text, what, index)
    if input_index[stage.name] or stage_index[stage.name] then
      raise(("%s: stage %d: the name '%s' is taken already"):format(what, index, stage.name))
    end
    if stage.variable and not input_variables[stage.type] then
      raise(("%s: stage '%s' has type %s, which no input has"):format(what, stage.name, stage.type))
    end
    stage.index = index
    stage_index[stage.name] = index
    list[index] = stage
  end
  for _, stage in ipairs(list) do
    stage.reads = {}
    for word in stage.expression:gmatch("[%a_][%w_]*") do
      local read = stage_index[word]
      if read and list[read].reduce then
        raise(("%s: stage '%s' reads '%s', a reduction: it has one value per call, not one per "
               .. "element"):format(what, stage.name, word))
      end
      if read == stage.index then
        raise(("%s: stage '%s' reads itself"):format(what, stage.name))
      elseif read and read > stage.index then
        raise(("%s: stage '%s' reads '%s', which comes after it"):format(what, stage.name, word))
      elseif read or input_index[word] then
        stage.reads[word] = true
      end
    end
  end
  reductions.check_order(list, what)
  return list, stage_index
end

-- Which stages go in which kernel: a list of groups, each a list of stage
-- indexes, cut after every wanted stage that a later stage reads (auto),
-- after every stage (never), or nowhere (always); and, for never, the
-- stages a later kernel reads that nobody wants (temporaries). As
-- pipe.kernels and pipe:describe() show it:
--   auto    a kernel ends after each wanted stage that a later stage reads;
--           otherwise values stay in registers. r3 alone: one fused kernel;
--           r1, r2, r3: three kernels, one per stage. A value a later kernel
--           needs but nobody wants as an output is computed again there.
--   always  one kernel, writing every wanted stage on the way.
--   never   one kernel per stage; a stage a later one reads that is not an
--           output goes through a temporary buffer, made at each call and
--           closed after its last reader: on a GraphBuilder an allocation
--           and a free node of the graph, on a stream from the device's
--           memory pool in that stream's order.
local function group_stages(stages, wanted, mode, what)
  local read_later = {}
  for _, stage in ipairs(stages) do
    for name in pairs(stage.reads) do
      read_later[name] = true
    end
  end
  local live = {}
  for name in pairs(wanted) do
    live[name] = true
  end
  for index = #stages, 1, -1 do
    local stage = stages[index]
    if not live[stage.name] then
      raise(("%s: stage '%s' feeds no output"):format(what, stage.name))
    end
    for name in pairs(stage.reads) do
      live[name] = true
    end
  end
  local groups, current, temporaries = {}, {}, {}
  for index, stage in ipairs(stages) do
    current[#current + 1] = index
    if mode == "never" and read_later[stage.name] and not wanted[stage.name] then
      if stage.variable then
        raise(("%s: fuse = \"never\" keeps stage '%s' in a temporary buffer, which needs a dtype, "
               .. "not the type variable %s"):format(what, stage.name, stage.type))
      end
      temporaries[#temporaries + 1] = stage
    end
    local cut = mode == "never" or (mode == "auto" and wanted[stage.name] and read_later[stage.name])
    if cut or index == #stages then
      groups[#groups + 1] = current
      current = {}
    end
  end
  return groups, temporaries
end

-- The type a stage kept in registers has: its dtype's compute type (float
-- for float16 and bfloat16, rounded only where a kernel stores it).
local function c_type_of(stage)
  return stage.variable and stage.type or common.DTYPES[stage.type].compute
end

-- One group's kernel: its parameters (inputs, earlier wanted stages, its
-- wanted stages) as argument indexes of the pipeline, and the operation,
-- with unwanted stages it needs (its own or earlier ones) as locals.
local function group_kernel(pipe, group, stages, wanted, stage_index, inputs)
  local in_group, needed = {}, {}
  for _, index in ipairs(group) do
    in_group[index] = true
  end
  local function need(stage)
    for name in pairs(stage.reads) do
      local index = stage_index[name]
      if index and not needed[index] and (in_group[index] or not wanted[name]) then
        needed[index] = true
        need(stages[index])
      end
    end
  end
  for _, index in ipairs(group) do
    needed[index] = true
    need(stages[index])
  end
  local reads = {}
  for index in pairs(needed) do
    for name in pairs(stages[index].reads) do
      reads[name] = true
    end
  end
  local in_params, out_params, arguments, body, locals = {}, {}, {}, {}, {}
  for index, param in ipairs(inputs) do
    if reads[param.name] then
      in_params[#in_params + 1] = param.type .. " " .. param.name
      arguments[#arguments + 1] = index
    end
  end
  for index, stage in ipairs(stages) do
    if reads[stage.name] and not in_group[index] and wanted[stage.name] then
      in_params[#in_params + 1] = stage.type .. " " .. stage.name
      arguments[#arguments + 1] = pipe.output_argument[stage.name]
    end
  end
  for index, stage in ipairs(stages) do
    -- A reduced stage is not computed per element: reduction_stages.lua's part.
    if needed[index] and (in_group[index] or not wanted[stage.name]) and not stage.reduce then
      if in_group[index] and wanted[stage.name] then
        body[#body + 1] = ("%s = %s;"):format(stage.name, stage.expression)
      else
        body[#body + 1] = ("const %s %s = %s;"):format(c_type_of(stage), stage.name, stage.expression)
        locals[#locals + 1] = stage.name
      end
    end
  end
  local written, reduces = {}, nil
  for _, name in ipairs(pipe.stored) do
    local index = stage_index[name]
    if in_group[index] and not stages[index].reduce then
      out_params[#out_params + 1] = stages[index].type .. " " .. name
      arguments[#arguments + 1] = pipe.output_argument[name]
      written[#written + 1] = name
    end
  end
  -- a reduction kernel's results come after its per-element outputs
  for _, name in ipairs(pipe.outputs) do
    local index = stage_index[name]
    if in_group[index] and stages[index].reduce then
      reduces = reduces or {}
      reduces[#reduces + 1] = index
      arguments[#arguments + 1] = pipe.output_argument[name]
      written[#written + 1] = name
    end
  end
  local last = stages[group[#group]].name
  return {
    in_params = table.concat(in_params, ", "), out_params = table.concat(out_params, ", "),
    operation = table.concat(body, "\n"), arguments = arguments, written = written,
    locals = locals, name = #pipe.groups == 1 and pipe.name or pipe.name .. "_" .. last,
    reduces = reduces,
  }
end

local function check_type_variables(kernel_spec, stages, stage_index, what)
  local bound = {}
  for item in (kernel_spec.in_params .. ", " .. kernel_spec.out_params):gmatch("([%w_]+)%s+[%w_]+") do
    bound[item] = true
  end
  for _, name in ipairs(kernel_spec.locals) do
    local stage = stages[stage_index[name]]
    if stage.variable and not bound[stage.type] then
      raise(("%s: kernel '%s' computes '%s' of type %s, but none of its parameters says what %s is")
            :format(what, kernel_spec.name, name, stage.type, stage.type))
    end
  end
end

-- elementwise: the kernel constructor; kernel_option_names: the options
-- its kernels take (elementwise.KERNEL_OPTIONS), which a pipeline passes on.
-- Returns the pipeline constructor:
--
--   pipeline(in_params, stages, outputs [, name [, options]])
--     in_params  "float32 a, float32 b, float32 c"
--     stages     { "float32 r1 = a + b", "float32 r2 = r1 * c", "float32 r3 = r2 - a" }:
--                each "<dtype> <name> = <expression>", reading inputs and earlier stages;
--                the last ones may be reductions, "<op> <dtype> <name> = <expression>"
--                (op: sum, prod, min, max, argmin, argmax, any, all, mean, norm): the
--                expression reduced over every element into a 1-element output
--                (lua/gpurun/compute/reduction_stages.lua)
--     outputs    "r3" (or "r1, r3", or a list): the stages the caller passes buffers for
--     options    fuse = "auto" (default), "always" or "never", accumulate (the dtype
--                sums, products, means and norms are combined in), and elementwise()'s options
local function constructor(elementwise, kernel_option_names)
  local known = { "fuse", "accumulate" }
  for _, key in ipairs(kernel_option_names) do
    known[#known + 1] = key
  end
  return function(in_params, stages, outputs, name, options)
    name = name or "pipeline"
    if not common.is_identifier(name) or name:sub(1, 1) == "_" then
      raise(("elementwise pipeline: the name must be a C identifier not starting with '_', got %s")
            :format(common.quoted(name)))
    end
    local what = ("elementwise pipeline '%s'"):format(name)
    if type(options) == "table" and not common.is_plain_table(options) then
      raise(what .. ": options must be a plain table (no metatable)" .. WITH_METATABLE)
    end
    if options ~= nil and type(options) ~= "table" then
      raise(what .. ": options must be a table, got " .. type(options))
    end
    local unknown = options_rule.unknown(options or {}, known)
    if unknown then raise(what .. ": " .. unknown) end
    local kernel_options = {}
    for key, value in pairs(options or {}) do
      kernel_options[key] = value
    end
    local mode = kernel_options.fuse or "auto"
    local accumulate = kernel_options.accumulate
    kernel_options.fuse, kernel_options.accumulate = nil, nil
    if not FUSE_MODES[mode] then
      raise(("%s: options.fuse must be \"auto\", \"always\" or \"never\", got %s"):format(
            what, common.quoted(mode)))
    end
    local inputs, why = source.parse_params(in_params, what .. " in_params")
    if not inputs then
      raise(why)
    end
    local stage_list, stage_index = read_stages(stages, inputs, what)
    local pipe = setmetatable({ name = name, in_params = in_params, input_count = #inputs,
                                outputs = name_list(outputs, what), output_argument = {},
                                mode = mode, kernels = {}, arguments = {} }, ElementwisePipeline)
    local wanted = {}
    for position, output in ipairs(pipe.outputs) do
      if not stage_index[output] then
        raise(("%s: output '%s' is not a stage"):format(what, output))
      end
      if wanted[output] then
        raise(("%s: output '%s' is listed twice"):format(what, output))
      end
      wanted[output] = true
      pipe.output_argument[output] = #inputs + position
    end
    pipe.arity = #inputs + #pipe.outputs
    pipe.reduced = {} -- the outputs that are reductions
    for _, output in ipairs(pipe.outputs) do
      pipe.reduced[output] = stage_list[stage_index[output]].reduce ~= nil or nil
    end
    -- As a kernel's: what each argument is (gpurun.pipeline reads them).
    pipe.params = {}
    for index, param in ipairs(inputs) do
      pipe.params[index] = param
    end
    for position, output in ipairs(pipe.outputs) do
      local stage = stage_list[stage_index[output]]
      pipe.params[#inputs + position] = { type = stage.type, name = output, output = true,
                                          variable = stage.variable,
                                          result = stage.reduce ~= nil or nil }
    end
    local temporaries
    pipe.groups, temporaries = group_stages(stage_list, wanted, mode, what)
    -- Temporaries are stored as outputs are, in arguments after the caller's.
    pipe.stored, pipe.temporaries = table.move(pipe.outputs, 1, #pipe.outputs, 1, {}), {}
    for position, stage in ipairs(temporaries) do
      wanted[stage.name] = true
      pipe.output_argument[stage.name] = pipe.arity + position
      pipe.stored[#pipe.stored + 1] = stage.name
      pipe.temporaries[position] = { name = stage.name, dtype = stage.type, last_reader = 0 }
    end
    pipe.fused = #pipe.groups == 1
    local sources = {}
    for position, group in ipairs(pipe.groups) do
      local spec = group_kernel(pipe, group, stage_list, wanted, stage_index, inputs)
      check_type_variables(spec, stage_list, stage_index, what)
      local kernel
      if spec.reduces then
        kernel = reductions.kernel(spec, stage_list, kernel_options, accumulate, what)
        pipe.reduces = true
      else
        kernel = elementwise(spec.in_params, spec.out_params, spec.operation, spec.name,
                             kernel_options)
      end
      kernel.pipeline_arguments, kernel.writes, kernel.in_registers = spec.arguments, spec.written,
                                                                       spec.locals
      pipe.kernels[position] = kernel
      sources[position] = kernel.source
      for _, argument in ipairs(spec.arguments) do
        local temporary = pipe.temporaries[argument - pipe.arity]
        if temporary then temporary.last_reader = position end
      end
    end
    if #sources == #pipe.kernels then
      pipe.source = table.concat(sources, "\n")
    end
    return pipe
  end
end

local function check_count(pipe, count)
  if count ~= pipe.arity and not (pipe.reduces and count == pipe.arity + 1) then
    raise(("elementwise pipeline '%s' takes %d arguments after the stream or builder "
           .. "(%d inputs, then the outputs %s%s), got %d"):format(pipe.name, pipe.arity,
           pipe.input_count, table.concat(pipe.outputs, ", "),
           pipe.reduces and ", then a shape table if any" or "", count))
  end
end

-- The shape table a call passes after the outputs, or nil.
local function shape_of(pipe, ...)
  if select("#", ...) > pipe.arity then
    return (select(pipe.arity + 1, ...))
  end
  return nil
end

-- The arguments of one kernel, picked from the pipeline's (inputs,
-- outputs, then temporaries), in a reused table; a reduction kernel gets
-- the shape table, if any, after them.
local function pick(pipe, kernel, shape, ...)
  local arguments = pipe.arguments
  local indexes = kernel.pipeline_arguments
  for position = 1, #indexes do
    arguments[position] = select(indexes[position], ...)
  end
  if kernel.result_count and shape ~= nil then
    arguments[#indexes + 1] = shape
    return table.unpack(arguments, 1, #indexes + 1)
  end
  return table.unpack(arguments, 1, #indexes)
end

-- The elements of a temporary: those of the first buffer among the inputs
-- and the per-element outputs (a reduction's output has one per segment).
local function temporary_size(pipe, arguments)
  for index = 1, pipe.arity do
    local output = index > pipe.input_count and pipe.outputs[index - pipe.input_count]
    local value = arguments[index]
    if not (output and pipe.reduced[output]) and getmetatable(value) ~= nil
       and getmetatable(value).__name == "gpurun.Buffer" then
      return #value
    end
  end
  raise(("elementwise pipeline '%s': fuse = \"never\" keeps a stage in a temporary buffer, "
         .. "sized as the first buffer among the inputs and the per-element outputs, but none "
         .. "is passed"):format(pipe.name))
end

-- The caller's inputs and outputs, then a new buffer per temporary, made
-- with `options` (nil: cuMemAlloc, outside any graph).
local function with_temporaries(pipe, options, ...)
  local arguments = table.pack(...)
  local size = #pipe.temporaries > 0 and temporary_size(pipe, arguments)
  for position, temporary in ipairs(pipe.temporaries) do
    arguments[pipe.arity + position] = gpurun.empty(size, temporary.dtype, options)
  end
  return arguments
end

local function close_temporaries(pipe, arguments)
  for position = 1, #pipe.temporaries do
    arguments[pipe.arity + position]:close()
  end
end

-- pipe(target, inputs..., outputs... [, shape]) or pipe:launch(...), with
-- the outputs in the order `outputs` lists them. Returns the outputs. A
-- kernel with reductions is one reduction kernel (the stages before them
-- run in its registers), and the shape table, if any, goes to it (rows,
-- cols, axis or offsets). Temporaries (fuse = "never") are made on the
-- target, so that on a builder their memory is the graph's, made and freed
-- inside each replay.
--
-- Without temporaries, each elementwise kernel after the first follows a
-- kernel of the pipeline on the same target, and is launched as such
-- (launch_after_kernel: programmatic stream serialization on devices that
-- take it); with them, allocations and frees come between.
local function launch(self, after_kernel, target, ...)
  check_count(self, select("#", ...))
  local shape = shape_of(self, ...)
  if #self.temporaries == 0 then
    local kernels = self.kernels
    for position = 1, #kernels do
      local kernel = kernels[position]
      if kernel.launch_after_kernel and (after_kernel or position > 1) then
        kernel:launch_after_kernel(target, pick(self, kernel, shape, ...))
      else
        kernel:launch(target, pick(self, kernel, shape, ...))
      end
    end
    return select(self.input_count + 1, ...)
  end
  local arguments = with_temporaries(self, { stream = target }, ...)
  local count = #self.stored + self.input_count
  for position, kernel in ipairs(self.kernels) do
    kernel:launch(target, pick(self, kernel, shape, table.unpack(arguments, 1, count)))
    for _, temporary in ipairs(self.temporaries) do
      if temporary.last_reader == position then
        arguments[self.output_argument[temporary.name]]:close()
      end
    end
  end
  return select(self.input_count + 1, ...)
end

function ElementwisePipeline:launch(target, ...)
  return launch(self, false, target, ...)
end
ElementwisePipeline.__call = ElementwisePipeline.launch

-- pipe:launch_after_kernel(target, ...): pipe:launch(target, ...) where the
-- node before it on the target is a kernel, so that its first kernel is
-- launched as such too.
function ElementwisePipeline:launch_after_kernel(target, ...)
  return launch(self, true, target, ...)
end

-- pipe:prepare(inputs..., outputs... [, shape]): every kernel compiled and
-- loaded for these arguments (needed before a capture's first call).
-- Returns pipe.
function ElementwisePipeline:prepare(...)
  check_count(self, select("#", ...))
  local shape = shape_of(self, ...)
  local arguments = with_temporaries(self, nil, ...)
  for _, kernel in ipairs(self.kernels) do
    kernel:prepare(pick(self, kernel, shape, table.unpack(arguments, 1, #self.stored + self.input_count)))
  end
  close_temporaries(self, arguments)
  return self
end

-- pipe:node_arguments(inputs..., outputs...) -> each kernel's launch, as
-- kernel:node_arguments gives it, in launch order; nil when the pipeline
-- makes temporaries at each call (their buffers are not known ahead) or a
-- kernel of it cannot say.
function ElementwisePipeline:node_arguments(...)
  check_count(self, select("#", ...))
  if #self.temporaries > 0 then
    return nil
  end
  local shape = shape_of(self, ...)
  local list = {}
  for position, kernel in ipairs(self.kernels) do
    if not kernel.node_arguments then
      return nil
    end
    list[position] = kernel:node_arguments(pick(self, kernel, shape, ...))[1]
  end
  return list
end

-- pipe:bind(inputs..., outputs... [, shape]) -> plans with :launch(target)
-- and :close(). A plan's temporaries are made here (cuMemAlloc) and closed
-- with the plans.
function ElementwisePipeline:bind(...)
  check_count(self, select("#", ...))
  local shape = shape_of(self, ...)
  local arguments = with_temporaries(self, nil, ...)
  local plans = launch_plans.new(table.move(arguments, self.arity + 1,
                                            self.arity + #self.temporaries, 1, {}))
  for position, kernel in ipairs(self.kernels) do
    plans[position] = kernel:bind(pick(self, kernel, shape, table.unpack(arguments, 1,
                                                                         #self.stored + self.input_count)))
  end
  return plans
end

-- One line per kernel: what it writes and what it keeps in registers.
function ElementwisePipeline:describe()
  local lines = {}
  local temporary = {}
  for _, entry in ipairs(self.temporaries) do temporary[entry.name] = true end
  for position, kernel in ipairs(self.kernels) do
    local writes = {}
    for index, name in ipairs(kernel.writes) do
      writes[index] = temporary[name] and name .. " (a temporary)" or name
    end
    local line = ("%s: writes %s"):format(kernel.name, table.concat(writes, ", "))
    if #kernel.in_registers > 0 then
      line = line .. "; " .. table.concat(kernel.in_registers, ", ") .. " in registers"
    end
    lines[position] = line
  end
  return table.concat(lines, "\n")
end

function ElementwisePipeline:__tostring()
  return ("gpurun.elementwise pipeline '%s' (%d kernel%s)"):format(self.name, #self.kernels,
                                                                    #self.kernels == 1 and "" or "s")
end

-- A pipeline's methods run while a builder captures: their errors end the
-- capture as gpurun's own do.
gpurun.guard(ElementwisePipeline)

return { constructor = constructor, ElementwisePipeline = ElementwisePipeline }
