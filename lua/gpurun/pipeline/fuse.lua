-- One fusion group of a pipeline's schedule as one gpurun.elementwise_pipeline:
-- each stage's `out = expression` becomes a stage "<dtype> <version> =
-- <expression>" with its parameters renamed to the group's names (every
-- write of a data a new version, so that a data written twice or read and
-- then written stays right), the data read from outside become its
-- inputs, and the data the schedule writes to memory its outputs. Temporaries
-- that stay in registers are never made. No GPU: the elementwise pipeline
-- compiles on its first call.
local gpurun = require("gpurun")
local access = require("gpurun.pipeline.access")
local source = require("gpurun.compute.elementwise_source")

local fuse = {}

local MAX_NAME = 48

local function identifier(text)
  local name = text:gsub("[^%w_]", "_"):gsub("^_+", "")
  if name == "" or name:match("^%d") then
    name = "v" .. name
  end
  return name:sub(1, MAX_NAME)
end

-- The fused kernel's name: the pipeline's and its stages' names.
local function kernel_name(pipeline_name, group, stages)
  local names = {}
  for _, index in ipairs(group.stages) do
    names[#names + 1] = identifier(stages[index].name)
  end
  local name = identifier(pipeline_name .. "_" .. table.concat(names, "_"))
  if #name >= MAX_NAME then
    name = identifier(("%s_fused_%d"):format(pipeline_name, group.stages[1]))
  end
  return name
end

-- describe(pipeline_name, group, stages) -> { name, in_params,
--   stage_texts, output_names, inputs = { { data | scalar | value, type
--   }... } (type: the input's dtype), outputs = { data... } }: the fused
--   kernel's text, which fuse.kernel makes into an elementwise pipeline.
local function describe(pipeline_name, group, stages)
  local used = { i = true, n = true }
  local function fresh(base)
    local name = identifier(base)
    local k = 1
    while used[name] or not source.is_parameter_name(name) do
      k = k + 1
      name = identifier(base) .. "_" .. k
    end
    used[name] = true
    return name
  end
  local current = {}       -- data -> the name of its value now
  local scalar_input = {}  -- scalar -> input name
  local in_params, inputs = {}, {}
  local texts = {}
  local function input(type_text, base, arg)
    local name = fresh(base)
    in_params[#in_params + 1] = type_text .. " " .. name
    inputs[#inputs + 1] = { data = arg.data, scalar = arg.scalar, value = arg.value,
                            type = type_text }
    return name
  end
  for _, index in ipairs(group.stages) do
    local stage = stages[index]
    local kernel, fusion = stage.kernel, stage.fusion
    local names = {}
    for position, param in ipairs(kernel.params) do
      if not param.output then
        local arg = stage.args[position]
        if arg.data then
          local d = arg.data
          if not current[d] then
            current[d] = input(param.type, d.name, arg)
          end
          names[param.name] = current[d]
        elseif arg.scalar then
          local key = arg.scalar
          if not scalar_input[key] or scalar_input[key].type ~= param.type then
            scalar_input[key] = { name = input(param.type, key.name, arg), type = param.type }
          end
          names[param.name] = scalar_input[key].name
        else
          names[param.name] = input(param.type, param.name, arg)
        end
      end
    end
    local out_param = kernel.params[fusion.output]
    local d = stage.args[fusion.output].data
    local version = fresh(d.name .. "_" .. index)
    texts[#texts + 1] = { type = out_param.type, name = version, data = d,
                          expression = access.rename(fusion.expression, names) }
    current[d] = version
  end
  -- Outputs: the last version of each data the schedule writes to memory.
  local outputs, output_names = {}, {}
  for _, d in ipairs(group.written) do
    outputs[#outputs + 1] = d
    output_names[#output_names + 1] = current[d]
  end
  -- Versions no output needs are dropped (a value overwritten in the group
  -- before anything read it).
  local live = {}
  for _, name in ipairs(output_names) do live[name] = true end
  local kept = {}
  for position = #texts, 1, -1 do
    local text = texts[position]
    if live[text.name] then
      table.insert(kept, 1, ("%s %s = %s"):format(text.type, text.name, text.expression))
      for word in text.expression:gmatch("[%a_][%w_]*") do
        live[word] = true
      end
    end
  end
  local used_inputs, used_params = {}, {}
  for position, param in ipairs(in_params) do
    local name = param:match("([%w_]+)$")
    if live[name] then
      used_params[#used_params + 1] = param
      used_inputs[#used_inputs + 1] = inputs[position]
    end
  end
  return { name = kernel_name(pipeline_name, group, stages), in_params = table.concat(used_params, ", "),
           stage_texts = kept, output_names = output_names, inputs = used_inputs, outputs = outputs }
end

-- The fused kernel's name of one of p's fusion groups (its schedule's),
-- made on first use.
function fuse.kernel_name(p, group)
  group.kernel = group.kernel or kernel_name(p.name, group, p.stages)
  return group.kernel
end

-- What a fusion group's kernel computes (describe, above), worked out on
-- first use: planning alone does not need it.
function fuse.describe(p, group)
  local fused = group.fused
  if not fused then
    fused = describe(p.name, group, p.stages)
    group.fused = fused
  end
  return fused
end

-- The elementwise pipeline of a fusion group, made on first use through
-- the module's own function (its methods are guarded), once per fused
-- kernel's text: a schedule made again (data pointed at another buffer)
-- launches the same compiled kernels, which Graph:update needs.
function fuse.kernel(p, group)
  local fused = fuse.describe(p, group)
  if not fused.pipe then
    local key = table.concat({ fused.name, fused.in_params, table.concat(fused.stage_texts, ";"),
                               table.concat(fused.output_names, ",") }, "|")
    local pipe = p.fused_cache[key]
    if not pipe then
      pipe = gpurun.elementwise_pipeline(fused.in_params, fused.stage_texts, fused.output_names,
                                         fused.name, { fuse = "always" })
      p.fused_cache[key] = pipe
    end
    fused.pipe = pipe
  end
  return fused.pipe
end

return fuse
