-- The stage kind "matmul": gpurun.matmul (cuBLAS, or cuBLASLt with an
-- epilogue) of two 2-D views of declared data into a third, declared by
-- p:matmul. a, b and an epilogue's bias are read, out written (and read
-- where beta is not 0); shapes, dtypes, batches, the epilogue and its bias
-- are checked as declared, by blas's own checks.
local common = require("gpurun.common")
local blas = require("gpurun.compute.blas")
local declare = require("gpurun.pipeline.declare")
local launch_arguments = require("gpurun.pipeline.launch_arguments")

local raise = common.raise
local type_name = common.type_name

local kind = { name = "matmul", method = "matmul" }

local OPTIONS = { "name", "reads", "writes", "alpha", "beta", "transa", "transb", "epilogue", "bias" }
local OPTIONS_SHAPE = "{ alpha =, beta =, transa =, transb =, epilogue =, bias =, name =, reads =, "
  .. "writes = }"
local VIEW_KEYS = { "buffer", "rows", "cols", "ld", "batch", "stride" }
local NAMES = { "a", "b", "out" }

-- A view's buffer as blas's checks see it when it is declared data: its
-- dtype and count, or nil and why not.
local function data_measure(data, what, field)
  local why = declare.not_device_buffer(data, what .. (field or ""), "cuBLAS")
  if why then return nil, why end
  return data.dtype, data.count
end

-- The view with its buffer resolved to declared data: a new plain table of
-- the same fields (the caller's is left as it is).
local function declared_view(p, view, what)
  if not common.is_plain_table(view) then
    raise(("pipeline '%s': %s must be a 2-D view { buffer =, rows =, cols = [, ld =, batch =, "
           .. "stride =] }, got %s"):format(p.name, what, type_name(view)))
  end
  local copy = declare.check_options_table(("pipeline '%s': %s"):format(p.name, what), view,
                                           VIEW_KEYS)
  local resolved = {}
  for _, key in ipairs(VIEW_KEYS) do resolved[key] = rawget(copy, key) end
  resolved.buffer = declare.resolve_data(p, rawget(view, "buffer"), what .. ".buffer")
  return resolved
end

local function option(p, name, options, key, expected, default)
  local value = options[key]
  if value == nil then return default end
  if type(value) ~= expected then
    raise(("pipeline '%s': stage '%s': options.%s must be a %s, got %s"):format(p.name, name, key,
          expected, type_name(value)))
  end
  return value
end

-- matmul(a, b, out [, options]): out = alpha op(a) op(b) + beta out, each
-- a 2-D view (gpurun.matrix's fields) whose buffer is declared data.
function kind.declare(p, a, b, out, options)
  options = declare.check_options_table(("pipeline '%s': matmul"):format(p.name), options, OPTIONS,
                                        OPTIONS_SHAPE)
  local views = { declared_view(p, a, "matmul a"), declared_view(p, b, "matmul b"),
                  declared_view(p, out, "matmul out") }
  local a_data, b_data, out_data = views[1].buffer, views[2].buffer, views[3].buffer
  local name = options.name or ("matmul %s = %s %s"):format(out_data.name, a_data.name, b_data.name)
  if type(name) ~= "string" or name == "" then
    raise(("pipeline '%s': matmul: name must be a non-empty string"):format(p.name))
  end
  local alpha = option(p, name, options, "alpha", "number", 1)
  local beta = option(p, name, options, "beta", "number", 0)
  local transa = option(p, name, options, "transa", "boolean", false)
  local transb = option(p, name, options, "transb", "boolean", false)
  local m, n, why, batch = blas.product_shape(views[1], views[2], views[3], transa, transb, nil,
                                              NAMES, data_measure)
  if m == nil then
    raise(("pipeline '%s': stage '%s': %s"):format(p.name, name, why))
  end
  local epilogue, bias = options.epilogue, options.bias
  why = blas.epilogue_problem(epilogue, bias ~= nil)
  if not why and epilogue then
    bias = bias and declare.resolve_data(p, bias, "matmul bias")
    why = blas.bias_problem(bias, batch, n, a_data.dtype, data_measure)
  end
  if why then
    raise(("pipeline '%s': stage '%s': %s"):format(p.name, name, why))
  end
  local stage = { name = name, views = views, alpha = alpha, beta = beta, transa = transa,
                  transb = transb, epilogue = epilogue, bias = bias }
  local out_mode = beta ~= 0 and "rw" or "w"
  local inferred = {
    { data = a_data, mode = "r", how = "matmul a", const = true },
    { data = b_data, mode = "r", how = "matmul b", const = true },
    { data = out_data, mode = out_mode, how = beta ~= 0 and "matmul out, read where beta is not 0"
                                              or "matmul out" },
  }
  if bias then inferred[4] = { data = bias, mode = "r", how = "matmul bias", const = true } end
  stage.accesses, stage.declared = declare.accesses_of(p, name, inferred,
    declare.read_overrides(p, options, ("stage '%s'"):format(name)))
  return stage
end

-- The views gpurun.matmul takes are made once; each refresh points them at
-- the buffers behind the data, and each launch sets the target.
function kind.compile(stage, runnable, state)
  local made = {}
  for i, view in ipairs(stage.views) do
    made[i] = { rows = view.rows, cols = view.cols, ld = view.ld, batch = view.batch,
                stride = view.stride }
  end
  local call = { out = made[3], alpha = stage.alpha, beta = stage.beta, transa = stage.transa,
                 transb = stage.transb, epilogue = stage.epilogue }
  local buffer_of = launch_arguments.buffer_of
  runnable.refresh = function()
    for i, view in ipairs(stage.views) do made[i].buffer = buffer_of(state, view.buffer) end
    if stage.bias then call.bias = buffer_of(state, stage.bias) end
  end
  runnable.launch = function(target)
    call.stream = target
    blas.matmul(made[1], made[2], call)
  end
end

return kind
