-- The stage kind "spmv": gpurun.spmv, y = alpha op(A) x + beta y, of a
-- CSR matrix and declared data, declared by p:spmv. A is a
-- gpurun.CsrMatrix (its three buffers become declared data) or a table of
-- declared data { row_offsets =, col_indices =, values =, rows =, cols = };
-- A's parts and x are read, y written (and read where beta is not 0).
-- Dtypes, lengths and scalars are checked as declared, by gpurun.csr's and
-- gpurun.spmv's own checks.
local common = require("gpurun.common")
local blas = require("gpurun.compute.blas")
local sparse = require("gpurun.compute.sparse")
local declare = require("gpurun.pipeline.declare")
local launch_arguments = require("gpurun.pipeline.launch_arguments")

local raise = common.raise
local type_name = common.type_name

local kind = { name = "spmv", method = "spmv" }

local OPTIONS = { "name", "reads", "writes", "alpha", "beta", "transpose" }
local OPTIONS_SHAPE = "{ alpha =, beta =, transpose =, name =, reads =, writes = }"
local PARTS = { "row_offsets", "col_indices", "values" }
local MATRIX_KEYS = { "row_offsets", "col_indices", "values", "rows", "cols" }

local function measured(data)
  return data.dtype, data.count
end

-- A's parts as declared data, its rows and cols, and the CsrMatrix where
-- A is one; or nil and why not.
local function matrix_parts(p, a)
  local parts, rows, cols, matrix = {}, nil, nil, nil
  if type_name(a) == "gpurun.CsrMatrix" then
    local ok, why = pcall(function()
      for _, key in ipairs(PARTS) do
        parts[key] = declare.find_data(p, a[key], key, "spmv A." .. key)
      end
      rows, cols = a.rows, a.cols
    end)
    if not ok then return nil, common.error_text(why) end
    matrix = a
  elseif common.is_plain_table(a) then
    declare.check_options_table(("pipeline '%s': spmv A"):format(p.name), a, MATRIX_KEYS,
                                "{ row_offsets =, col_indices =, values =, rows =, cols = }")
    for _, key in ipairs(PARTS) do
      parts[key] = declare.resolve_data(p, a[key], "spmv A." .. key)
    end
    rows, cols = a.rows, a.cols
    local why = sparse.size_problem(rows, "A.rows") or sparse.size_problem(cols, "A.cols")
    if why then return nil, why end
  else
    return nil, ("A must be a gpurun.CsrMatrix or a table { row_offsets =, col_indices =, values =, "
                 .. "rows =, cols = } of declared data, got %s"):format(type_name(a))
  end
  return parts, rows, cols, matrix
end

local function option(options, key, expected, default)
  local value = options[key]
  if value == nil then return default end
  if type(value) ~= expected then
    return nil, ("options.%s must be a %s, got %s"):format(key, expected, type_name(value))
  end
  return value
end

-- The checks of the product once A's parts are known: nil or why not.
local function product_problem(parts, rows, x, y, alpha, beta, transpose, cols)
  for _, key in ipairs(PARTS) do
    local why = declare.not_device_buffer(parts[key], "A." .. key, "gpurun.spmv")
    if why then return why end
  end
  local why = declare.not_device_buffer(x, "x", "gpurun.spmv")
    or declare.not_device_buffer(y, "y", "gpurun.spmv")
  if why then return why end
  local _
  _, why = sparse.csr_problem(parts.row_offsets, parts.col_indices, parts.values, rows, measured)
  if why then return "A: " .. why end
  local dtype = parts.values.dtype
  why = blas.scalar_problem("options.alpha", alpha, dtype)
    or blas.scalar_problem("options.beta", beta, dtype)
  if why then return why end
  _, why = sparse.shape_problem(dtype, rows, cols, x, y, transpose, measured)
  if why then return why end
  if y == x then return ("x and y are the same data ('%s')"):format(y.name) end
  for _, key in ipairs(PARTS) do
    if parts[key] == y then return ("y is A.%s ('%s')"):format(key, y.name) end
  end
  return nil
end

-- spmv(A, x, y [, { alpha =, beta =, transpose =, name =, reads =,
-- writes = }]): y = alpha op(A) x + beta y.
function kind.declare(p, a, x, y, options)
  options = declare.check_options_table(("pipeline '%s': spmv"):format(p.name), options, OPTIONS,
                                        OPTIONS_SHAPE)
  local parts, rows, cols, matrix = matrix_parts(p, a)
  x = declare.resolve_data(p, x, "spmv x")
  y = declare.resolve_data(p, y, "spmv y")
  local name = options.name or ("spmv %s = A %s"):format(y.name, x.name)
  if type(name) ~= "string" or name == "" then
    raise(("pipeline '%s': spmv: name must be a non-empty string"):format(p.name))
  end
  local function refuse(why)
    raise(("pipeline '%s': stage '%s': %s"):format(p.name, name, why))
  end
  if not parts then refuse(rows) end
  local alpha, why = option(options, "alpha", "number", 1)
  if why then refuse(why) end
  local beta
  beta, why = option(options, "beta", "number", 0)
  if why then refuse(why) end
  local transpose
  transpose, why = option(options, "transpose", "boolean", false)
  if why then refuse(why) end
  why = product_problem(parts, rows, x, y, alpha, beta, transpose, cols)
  if why then refuse(why) end

  local stage = { name = name, parts = parts, rows = rows, cols = cols, matrix = matrix, x = x, y = y,
                  alpha = alpha, beta = beta, transpose = transpose }
  local inferred = {}
  for _, key in ipairs(PARTS) do
    inferred[#inferred + 1] = { data = parts[key], mode = "r", how = "spmv A." .. key, const = true }
  end
  inferred[#inferred + 1] = { data = x, mode = "r", how = "spmv x", const = true }
  inferred[#inferred + 1] = { data = y, mode = beta ~= 0 and "rw" or "w",
                              how = beta ~= 0 and "spmv y, read where beta is not 0" or "spmv y" }
  stage.accesses, stage.declared = declare.accesses_of(p, name, inferred,
    declare.read_overrides(p, options, ("stage '%s'"):format(name)))
  return stage
end

-- A CsrMatrix given is used as it is; one of declared data is made over
-- the buffers behind its parts, again only when they change (a pool's
-- temporaries are new at each run). The options table is made once.
function kind.compile(stage, runnable, state)
  local call = { alpha = stage.alpha, beta = stage.beta, transpose = stage.transpose }
  local buffer_of = launch_arguments.buffer_of
  local matrix, made = stage.matrix, {}
  local x, y
  runnable.refresh = function()
    x = buffer_of(state, stage.x)
    y = buffer_of(state, stage.y)
    if stage.matrix then return end
    local changed = false
    for _, key in ipairs(PARTS) do
      local buffer = buffer_of(state, stage.parts[key])
      changed = changed or made[key] ~= buffer
      made[key] = buffer
    end
    if changed then
      matrix = sparse.csr(made.row_offsets, made.col_indices, made.values, stage.rows, stage.cols)
    end
  end
  runnable.launch = function(target)
    call.stream = target
    sparse.spmv(matrix, x, y, call)
  end
end

return kind
