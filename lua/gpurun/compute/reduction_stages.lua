-- The reduction stages of an elementwise pipeline: "<op> <dtype> <name> =
-- <expression>", op one of sum, prod, min, max, argmin, argmax, any, all,
-- mean, norm. They come after the elementwise stages; each reduces its
-- expression over every element (or each segment, given a shape at the
-- call) into an output of one element per segment. A pipeline's kernel
-- that holds reductions is one gpurun.reduction kernel: the stages before
-- run in its registers, feeding every reduction of it at once, and only
-- the wanted stages are written.

local common = require("gpurun.common")
local source = require("gpurun.compute.elementwise_source")
local reduction = require("gpurun.compute.reduction")

local DTYPES = common.DTYPES
local raise = common.raise

local reduction_stages = {}

-- sum, prod, mean and norm combine in options.accumulate when given (else
-- in their own dtype); argmin and argmax compare their values as float64
-- and write the 1-based position (0 when empty) into an integer output;
-- any and all write 0 or 1.
local STAGE_OPS = {
  sum = { op = "sum", accumulates = true }, prod = { op = "prod", accumulates = true },
  min = { op = "min" }, max = { op = "max" },
  argmin = { op = "argmin", arg = true }, argmax = { op = "argmax", arg = true },
  any = { op = "any", logical = true }, all = { op = "all", logical = true },
  mean = { op = "sum", accumulates = true, post = "%s = a / (%s)count;", float = true },
  norm = { op = "sum", accumulates = true, post = "%s = sqrt(a);", square = true, float = true },
}
reduction_stages.OPS = "sum, prod, min, max, argmin, argmax, any, all, mean, norm"
local INTEGERS = {}
for dtype, info in pairs(DTYPES) do
  INTEGERS[dtype] = not info.float or nil
end

-- A reduction stage, or nil when `text` is not one (an elementwise stage).
function reduction_stages.parse_stage(text, what, index)
  local op, dtype, name, expression =
    text:match("^%s*([%w_]+)%s+([%w_]+)%s+([%w_]+)%s*=%s*(.-)%s*;?%s*$")
  if not op or not STAGE_OPS[op] then
    return nil
  end
  if expression == "" or expression:sub(1, 1) == "=" then
    raise(("%s: stage %d, '%s', is not \"<op> <dtype> <name> = <expression>\""):format(
          what, index, text))
  end
  local params, why = source.parse_params(dtype .. " " .. name, ("%s stage %d"):format(what, index))
  if not params then
    raise(why)
  end
  local spec = STAGE_OPS[op]
  if spec.arg and not INTEGERS[dtype] and not params[1].variable then
    raise(("%s: stage '%s': %s writes a position, so its dtype must be an integer one, got %s"):format(
          what, name, op, dtype))
  end
  if spec.float and not params[1].variable and not DTYPES[dtype].float then
    raise(("%s: stage '%s': %s needs a float dtype, got %s"):format(what, name, op, dtype))
  end
  return { type = dtype, name = name, expression = expression, variable = params[1].variable,
           reduce = op }
end

-- Reductions come after every elementwise stage (nothing reads them).
function reduction_stages.check_order(stages, what)
  local seen
  for _, stage in ipairs(stages) do
    if stage.reduce then
      seen = seen or stage
    elseif seen then
      raise(("%s: reduction stage '%s' must come after the elementwise stages, but '%s' follows it")
            :format(what, seen.name, stage.name))
    end
  end
end

local function params_of(text, what)
  local params, why = source.parse_params(text, what)
  if not params then
    raise(why)
  end
  return params
end

-- The C type values of type_name are computed in (float for float16 and
-- bfloat16), or the type variable itself.
local function c_of(type_name)
  local info = DTYPES[type_name]
  return info and info.compute or type_name
end

-- The reduction kernel of one group (spec from elementwise_pipeline's
-- group_kernel: in_params, out_params, operation, name, reduces = stage
-- indexes). For example
--
--   pipeline("float32 a, float32 b, float32 c",
--            { "float32 r3 = (a + b) * c - a", "sum float32 s = r3 * r3" }, "s", "ss")
--
-- is one kernel reading a, b and c once, writing s.
function reduction_stages.kernel(spec, stages, options, accumulate, what)
  if accumulate ~= nil and not DTYPES[accumulate] then
    raise(("%s: options.accumulate must be a dtype (%s), got %s"):format(what, common.DTYPE_NAMES,
          tostring(accumulate)))
  end
  local results, reductions = {}, {}
  for _, index in ipairs(spec.reduces) do
    local stage = stages[index]
    local op = STAGE_OPS[stage.reduce]
    local acc = stage.type
    if op.logical then
      acc = "bool"
    elseif op.arg then
      acc = "float64"
    elseif op.accumulates and accumulate then
      acc = accumulate
    end
    local map = stage.expression
    if op.square then
      map = ("((%s)(%s)) * ((%s)(%s))"):format(c_of(acc), map, c_of(acc), map)
    end
    local post
    if op.post then
      post = op.post:format(stage.name, c_of(acc))
    elseif op.arg then
      post = stage.name .. " = index + 1;"
    else
      post = stage.name .. " = a;"
    end
    results[#results + 1] = { type = stage.type, name = stage.name, variable = stage.variable }
    reductions[#reductions + 1] = { type = acc, map = map, op = op.op, post = post }
  end
  local kernel_options = {}
  for key, value in pairs(options) do
    kernel_options[key] = value
  end
  return reduction.kernel{
    name = spec.name, what = what,
    inputs = params_of(spec.in_params, what .. " inputs"),
    side_outputs = params_of(spec.out_params, what .. " outputs"),
    outputs = results, body = spec.operation, reductions = reductions, options = kernel_options,
  }
end

return reduction_stages
