-- The stage kind "fft": one transform of a gpurun.fft plan from declared
-- data into declared data, declared by p:fft. The input is read and the
-- output written; in place (c2c, output the input) the data is read and
-- written, and so is a c2r's input, which cuFFT may overwrite. The plan's
-- shape, kind and batch, the operands and the direction are checked as
-- declared, by gpurun.fft's own checks; the plan is made before a capture
-- (and kept with the stage, one per device), so that a graph captures
-- the transform alone.
local common = require("gpurun.common")
local fft = require("gpurun.compute.fft")
local declare = require("gpurun.pipeline.declare")
local launch_arguments = require("gpurun.pipeline.launch_arguments")

local raise = common.raise

local kind = { name = "fft", method = "fft" }

local OPTIONS = { "name", "reads", "writes", "shape", "kind", "batch", "direction" }
local OPTIONS_SHAPE = "{ shape =, kind =, batch =, direction =, name =, reads =, writes = }"

local function measured(data)
  return data.dtype, data.count
end

-- The shape when none is given: the whole of the full-length side (the
-- output of a c2r, else the input), over the batch, in one dimension.
local function default_shape(transform, batch, input, output)
  local count = transform == "c2r" and output.count or input.count
  if math.type(batch) == "integer" and batch > 1 then return count // batch end
  return count
end

-- fft(input, output [, { shape =, kind =, batch =, direction =, name =,
-- reads =, writes = }]): output = the transform of input, as a plan of
-- gpurun.fft.plan(shape, { kind =, batch = }) in the input's precision runs it.
function kind.declare(p, input, output, options)
  options = declare.check_options_table(("pipeline '%s': fft"):format(p.name), options, OPTIONS,
                                        OPTIONS_SHAPE)
  local x = declare.resolve_data(p, input, "fft input")
  local y = declare.resolve_data(p, output, "fft output")
  local name = options.name or ("fft %s = %s"):format(y.name, x.name)
  if type(name) ~= "string" or name == "" then
    raise(("pipeline '%s': fft: name must be a non-empty string"):format(p.name))
  end
  local function refuse(why)
    raise(("pipeline '%s': stage '%s': %s"):format(p.name, name, why))
  end
  local why = declare.not_device_buffer(x, "input", "gpurun.fft")
    or declare.not_device_buffer(y, "output", "gpurun.fft")
  if why then refuse(why) end
  if not fft.takes_dtype(x.dtype) then
    refuse(("input has dtype %s; gpurun.fft takes complex64, complex128, float32 or float64")
           :format(x.dtype))
  end
  local transform = options.kind or "c2c"
  local shape = options.shape
  if shape == nil then shape = default_shape(transform, options.batch, x, y) end
  local record, position
  record, position, why = fft.record_problem(shape, transform, x.dtype, options.batch)
  if not record then refuse(position == 1 and "options." .. why or why) end
  local direction
  direction, why = fft.direction_code(record, options.direction)
  if not direction then refuse(why) end
  position, why = fft.shape_problem(record, x, y, x == y, measured)
  if position then refuse(why) end

  local stage = { name = name, input = x, output = y, shape = record.shape, transform = record.kind,
                  dtype = record.dtype, batch = record.batch, direction = options.direction,
                  plans = {} }
  local inferred
  if x == y then
    inferred = { { data = x, mode = "rw", how = "fft, in place" } }
  else
    local overwritten = stage.transform == "c2r"
    inferred = {
      { data = x, mode = overwritten and "rw" or "r", const = not overwritten,
        how = overwritten and "fft input, which cuFFT's c2r may overwrite" or "fft input" },
      { data = y, mode = "w", how = "fft output" },
    }
  end
  stage.accesses, stage.declared = declare.accesses_of(p, name, inferred,
    declare.read_overrides(p, options, ("stage '%s'"):format(name)))
  return stage
end

-- The stage's plan on the compiled device, made on its first need (on
-- `target`, a stream before a capture); the plans outlive a compile.
local function plan_on(stage, state, target)
  local device = state.device
  local record = stage.plans[device]
  if record == nil then
    record = fft.plan(stage.shape, { kind = stage.transform, dtype = stage.dtype,
                                     batch = stage.batch, stream = target })
    stage.plans[device] = record
  end
  return record
end

-- The options table execute takes is made once; each refresh points the
-- operands at the buffers behind the data, each launch sets the target.
function kind.compile(stage, runnable, state)
  local call = { direction = stage.direction }
  local buffer_of = launch_arguments.buffer_of
  local input, output
  runnable.refresh = function()
    input = buffer_of(state, stage.input)
    output = buffer_of(state, stage.output)
  end
  runnable.prepare = function(stream)
    plan_on(stage, state, stream)
  end
  runnable.launch = function(target)
    local record = stage.plans[state.device] or plan_on(stage, state, target)
    call.stream = target
    fft.execute(record, input, output, call)
  end
end

return kind
