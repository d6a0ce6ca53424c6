-- gpurun.matrix, matmul, axpy, dot, nrm2 and scal: cuBLAS's policy and
-- every check before any library call (views, shapes, dtypes, the compute
-- dtype, the stream, an epilogue and its bias, which go to cuBLASLt);
-- cuBLAS and cuBLASLt are called from C (src/types/blas.c).
--
-- gpurun's matrices are row-major (element (i, j) of a view at
-- i * ld + j) and cuBLAS's column-major: read column-major, a row-major
-- matrix is its transpose, so C = A B is computed as C^T = B^T A^T, the
-- operands swapped, with no copy.

local gpurun = require("gpurun")
local common = require("gpurun.common")
local options_rule = require("gpurun.options")
local arguments = require("gpurun.compute.arguments")

local core = package.loaded["gpurun.blas_core"] -- src/types/blas.c, opened with the module
local DTYPES, type_name, raise = common.DTYPES, common.type_name, common.raise
local check_options, target_of = arguments.check_options, arguments.stream_option

local blas = {}

local INT_MAX = 0x7fffffff

-- dtype -> the dtype cuBLAS computes it in: the dtype table's compute
-- type (float32 accumulation for float16 and bfloat16).
local COMPUTE = {}
for name, info in pairs(DTYPES) do
  if info.float then
    for other, candidate in pairs(DTYPES) do
      if candidate.c == info.compute and candidate.float then COMPUTE[name] = other end
    end
  end
end
local BLAS_DTYPES = "float32, float64, float16 or bfloat16"

local VIEW_KEYS = { "ld", "batch", "stride" }
local MATRIX_KEYS = { "buffer", "rows", "cols", "ld", "batch", "stride" }
local MATMUL_KEYS = { "out", "alpha", "beta", "transa", "transb", "stream", "epilogue", "bias" }
local VECTOR_KEYS = { "stream" }
local RESULT_KEYS = { "out", "stream" }
local SINGLE_NAMES = { "a", "b", "options.out" }
local FLOAT32_LARGEST = DTYPES.float32.max

-- cuBLASLt's epilogues, name -> CUBLASLT_EPILOGUE_* (from C), and the
-- names as a message lists them.
local EPILOGUES = core.EPILOGUES
local EPILOGUE_NAMES = {}
for name in pairs(EPILOGUES) do EPILOGUE_NAMES[#EPILOGUE_NAMES + 1] = name end
table.sort(EPILOGUE_NAMES)
EPILOGUE_NAMES = table.concat(EPILOGUE_NAMES, ", ")

local function bad_argument(fname, n, fmt, ...)
  common.bad_argument(fname, n, fmt, ...)
end

local function shown(value)
  return common.quoted(value)
end

-- A whole number in minimum..INT_MAX (cuBLAS takes 32-bit sizes), or
-- why not; what .. field names it (formatted only on the way out).
local function dimension(value, what, field, minimum)
  if math.type(value) ~= "integer" then
    return ("%s%s must be an integer, got %s"):format(what, field, math.type(value) and shown(value)
      or type_name(value))
  end
  if value < minimum or value > INT_MAX then
    return ("%s%s must be %d..%d (cuBLAS takes 32-bit sizes), got %d"):format(what, field, minimum,
      INT_MAX, value)
  end
  return nil
end

local function dtype_problem(dtype, what, field)
  if not COMPUTE[dtype] then
    return ("%s%s has dtype %s; cuBLAS takes %s"):format(what, field or "", tostring(dtype),
      BLAS_DTYPES)
  end
  return nil
end

local function buffer_problem(value, what, field)
  if type_name(value) ~= "gpurun.Buffer" then
    return ("%s%s must be a gpurun.Buffer, got %s"):format(what, field, type_name(value))
  end
  return dtype_problem(value.dtype, what, field)
end

-- A view's buffer as the shape checks see it: its dtype and length, or nil
-- and why not (what .. field names it, joined only for a message). A
-- declared pipeline's matmul stage passes its own, for data that has no
-- memory yet.
local function buffer_measure(buffer, what, field)
  local why = buffer_problem(buffer, what, field or "")
  if why then return nil, why end
  return buffer.dtype, #buffer
end

-- The fields of a view, checked: buffer, rows, cols, ld, batch, stride
-- (stride 0 for a single matrix), or nil and why not. A view is a plain
-- table (gpurun.matrix makes one); its fields are read raw.
local function view_fields(view, what, measure)
  if not common.is_plain_table(view) then
    return nil, ("%s must be a 2-D view (gpurun.matrix(buffer, rows, cols)), got %s"):format(what,
      type_name(view))
  end
  local why = options_rule.unknown(view, MATRIX_KEYS)
  if why then return nil, what .. ": " .. why end
  local buffer = rawget(view, "buffer")
  local dtype, length = (measure or buffer_measure)(buffer, what, ".buffer")
  if not dtype then return nil, length end
  why = dtype_problem(dtype, what, ".buffer")
  if why then return nil, why end
  local rows, cols = rawget(view, "rows"), rawget(view, "cols")
  why = dimension(rows, what, ".rows", 1) or dimension(cols, what, ".cols", 1)
  if why then return nil, why end
  local ld, batch = rawget(view, "ld") or cols, rawget(view, "batch") or 1
  why = dimension(ld, what, ".ld", 1) or dimension(batch, what, ".batch", 1)
  if why then return nil, why end
  if ld < cols then
    return nil, ("%s.ld (%d) must be at least its cols (%d): rows are ld elements apart"):format(
      what, ld, cols)
  end
  local stride = rawget(view, "stride") or (batch > 1 and rows * ld or 0)
  if math.type(stride) ~= "integer" or stride < 0 then
    return nil, ("%s.stride must be an integer of 0 or more, got %s"):format(what, shown(stride))
  end
  -- In floats past the first matrix: (batch - 1) * stride can pass 2^63.
  local span = (rows - 1) * ld + cols
  if span > length or (batch > 1 and stride > (length - span) // (batch - 1)) then
    return nil, ("%s: %d x %d (ld %d%s) needs %.0f elements, its buffer has %d"):format(what, rows,
      cols, ld, batch > 1 and (", batch %d, stride %d"):format(batch, stride) or "",
      (batch - 1) * (stride + 0.0) + span, length)
  end
  return buffer, rows, cols, ld, batch, batch > 1 and stride or 0
end

-- matrix(buffer, rows, cols [, { ld =, batch =, stride = }]) -> a 2-D
-- view: a plain table { buffer =, rows =, cols =, ld =, batch =, stride = }.
function blas.matrix(buffer, rows, cols, options)
  local fname = "gpurun.matrix"
  if options ~= nil and not common.is_plain_table(options) then
    bad_argument(fname, 4, "options table expected, got %s", type_name(options))
  end
  options = options or {}
  local why = options_rule.unknown(options, VIEW_KEYS)
  if why then bad_argument(fname, 4, "%s", why) end
  local view = { buffer = buffer, rows = rows, cols = cols, ld = rawget(options, "ld"),
                 batch = rawget(options, "batch"), stride = rawget(options, "stride") }
  local checked, why_or_rows, _, ld, batch, stride = view_fields(view, "matrix")
  if not checked then
    local field = why_or_rows:match("^matrix%.(%a+)")
    local position = ({ buffer = 1, rows = 2, cols = 3, ld = 4, batch = 4, stride = 4 })[field] or 1
    bad_argument(fname, position, "%s", why_or_rows)
  end
  view.ld, view.batch = ld, batch
  view.stride = batch > 1 and stride or nil
  return view
end

-- A scalar computed in float32 must be one: a finite number past
-- float32's range would turn into an infinity on its way to cuBLAS.
-- Why a scalar does not fit the compute dtype (float32's range), or nil.
function blas.scalar_problem(what, value, compute)
  if compute == "float32" and value == value and math.abs(value) ~= math.huge
     and math.abs(value) > FLOAT32_LARGEST then
    return ("%s %s is out of range for float32 (the compute dtype)"):format(what, shown(value))
  end
  return nil
end

local function check_scalar(fname, n, what, value, compute)
  local why = blas.scalar_problem(what, value, compute)
  if why then bad_argument(fname, n, "%s", why) end
end

local function number_option(fname, n, options, key, default)
  local value = options and rawget(options, key)
  if value == nil then return default end
  if type(value) ~= "number" then
    bad_argument(fname, n, "options.%s must be a number, got %s", key, type_name(value))
  end
  return value
end

local function boolean_option(fname, n, options, key)
  local value = options and rawget(options, key)
  if value ~= nil and type(value) ~= "boolean" then
    bad_argument(fname, n, "options.%s must be a boolean, got %s", key, type_name(value))
  end
  return value == true
end

-- What the sparse products (compute/sparse.lua) share with these calls:
-- scalars in the compute dtype, typed options, 2-D views.
blas.check_scalar = check_scalar
blas.number_option, blas.boolean_option = number_option, boolean_option
blas.view_fields = view_fields

-- cuBLAS (and cuBLASLt for an epilogue) opens on the first call that
-- needs it, after the checks.
local function loaded(fname, epilogue)
  local why = core.load() or (epilogue and core.load_lt())
  if why then raise(fname .. ": " .. why) end
end


-- Why a buffer is not on the target's device, or nil.
local function device_problem(what, buffer, target)
  local device = target.device
  if type_name(target) == "gpurun.GraphBuilder" then device = target.stream.device end
  if buffer.device ~= device then
    return ("%s is on device %d but the stream on device %d"):format(what, buffer.device, device)
  end
  return nil
end

local function adds_bias(epilogue)
  return epilogue:find("bias", 1, true) ~= nil
end

-- Why an epilogue (a name or nil) and whether a bias is given do not go
-- together, or nil: the checks that need no buffer.
function blas.epilogue_problem(epilogue, has_bias)
  if epilogue == nil then
    if has_bias then
      return "options.bias is given without options.epilogue: a bias is added by the "
        .. '"bias", "relu_bias" and "gelu_bias" epilogues'
    end
    return nil
  end
  if type(epilogue) ~= "string" or not EPILOGUES[epilogue] then
    return ("options.epilogue must be one of %s (cuBLASLt's epilogues), got %s"):format(
      EPILOGUE_NAMES, type(epilogue) == "string" and shown(epilogue) or type_name(epilogue))
  end
  if adds_bias(epilogue) and not has_bias then
    return ('options.epilogue "%s" adds a bias: options.bias (a buffer of out\'s cols '
      .. "elements) is needed"):format(epilogue)
  end
  if has_bias and not adds_bias(epilogue) then
    return ('options.bias is given but options.epilogue "%s" adds none: use "bias", "relu_bias" '
      .. 'or "gelu_bias"'):format(epilogue)
  end
  return nil
end

-- Why a product of batch matrices, n columns of dtype, cannot take the
-- epilogue's bias (dtype and length as measure gives them), or nil.
function blas.bias_problem(bias, batch, n, dtype, measure)
  if batch > 1 then
    return ("an epilogue takes one matrix, got a batch of %d: run the matrices one by one, or "
      .. "without an epilogue"):format(batch)
  end
  if bias == nil then return nil end
  local bias_dtype, length = (measure or buffer_measure)(bias, "options.bias")
  if not bias_dtype then return length end
  if bias_dtype ~= dtype then
    return ("options.bias has dtype %s but out %s: cuBLASLt adds a bias of out's dtype"):format(
      bias_dtype, dtype)
  end
  if length < n then
    return ("options.bias has %d elements but out has %d cols: one per column is needed"):format(
      length, n)
  end
  return nil
end

-- One product's shape: m, n, k, batch and what each operand passes
-- (buffer, ld, stride); or nil, the argument's position and why not,
-- naming the dimension that does not fit. out_view nil: out is made;
-- target nil: no device to check against; measure: see buffer_measure.
function blas.product_shape(a_view, b_view, out_view, transa, transb, target, names, measure)
  local a_name, b_name, out_name = names[1], names[2], names[3]
  local a, a_rows, a_cols, a_ld, a_batch, a_stride = view_fields(a_view, a_name, measure)
  if not a then return nil, 1, a_rows end
  local b, b_rows, b_cols, b_ld, b_batch, b_stride = view_fields(b_view, b_name, measure)
  if not b then return nil, 2, b_rows end
  if b.dtype ~= a.dtype then
    return nil, 2, ("%s has dtype %s but %s %s: both must be of one dtype"):format(b_name,
      b.dtype, a_name, a.dtype)
  end
  local m, k = a_rows, a_cols
  if transa then m, k = a_cols, a_rows end
  local kb, n = b_rows, b_cols
  if transb then kb, n = b_cols, b_rows end
  if kb ~= k then
    return nil, 2, ("k does not fit: %s%s is %d x %d, so k is %d, but %s has %d %s"):format(
      transa and "transposed " or "", a_name, m, k, k, b_name, kb,
      transb and "cols (transposed)" or "rows")
  end
  if a_batch ~= 1 and b_batch ~= 1 and a_batch ~= b_batch then
    return nil, 2, ("the batches differ: %s has %d matrices, %s %d"):format(a_name, a_batch,
      b_name, b_batch)
  end
  local batch = math.max(a_batch, b_batch)
  local why = target and device_problem(a_name, a, target)
  if why then return nil, 1, why end
  why = target and device_problem(b_name, b, target)
  if why then return nil, 2, why end
  if out_view == nil then
    return m, n, k, batch, a, a_ld, a_stride, b, b_ld, b_stride
  end
  local what = out_name
  local c, c_rows, c_cols, c_ld, c_batch, c_stride = view_fields(out_view, what, measure)
  if not c then return nil, 3, c_rows end
  if c.dtype ~= a.dtype then
    return nil, 3, ("%s has dtype %s but %s %s"):format(what, c.dtype, a_name, a.dtype)
  end
  if c_rows ~= m then
    return nil, 3, ("m does not fit: %s has %d rows, %s%s gives %d"):format(what, c_rows,
      transa and "transposed " or "", a_name, m)
  end
  if c_cols ~= n then
    return nil, 3, ("n does not fit: %s has %d cols, %s%s gives %d"):format(what, c_cols,
      transb and "transposed " or "", b_name, n)
  end
  if c_batch ~= batch then
    return nil, 3, ("the batch does not fit: %s has %d matrices, the product %d"):format(what,
      c_batch, batch)
  end
  if batch > 1 and c_stride < c_rows * c_ld then
    return nil, 3, ("%s.stride (%d) is less than rows * ld (%d): its matrices would overlap")
      :format(what, c_stride, c_rows * c_ld)
  end
  why = target and device_problem(what, c, target)
  if why then return nil, 3, why end
  return m, n, k, batch, a, a_ld, a_stride, b, b_ld, b_stride, c, c_ld, c_stride
end

local function same_device(fname, n, what, buffer, target)
  local why = device_problem(what, buffer, target)
  if why then bad_argument(fname, n, "%s", why) end
end

-- product_shape's results, or its refusal raised as fname's bad argument.
local function checked(fname, m, ...)
  if m == nil then
    local position, why = ...
    bad_argument(fname, position, "%s", why)
  end
  return m, ...
end

local function product(fname, a_view, b_view, out_view, transa, transb, target, names)
  return checked(fname, blas.product_shape(a_view, b_view, out_view, transa, transb, target, names))
end

-- A list of views (the batched form) rather than one view.
local function is_list(value)
  return common.is_plain_table(value) and rawget(value, 1) ~= nil and rawget(value, "buffer") == nil
end

local function new_out(fname, target, m, n, batch, dtype)
  if type_name(target) == "gpurun.GraphBuilder" then
    bad_argument(fname, 3, "options.out is needed on a GraphBuilder: no buffer can be made while "
                 .. "capturing")
  end
  return blas.matrix(gpurun.empty(batch * m * n, dtype), m, n, batch > 1 and { batch = batch } or nil)
end

-- C (m x n) = alpha op(A) op(B) + beta C, in cuBLAS's column-major terms:
-- C^T = op(B)^T op(A)^T, B first.
local function run(target, transa, transb, m, n, k, alpha, a, a_ld, a_stride, b, b_ld, b_stride,
                   beta, c, c_ld, c_stride, batch)
  core.matmul(target, transb, transa, n, m, k, alpha, b, b_ld, b_stride, a, a_ld, a_stride, beta,
              c, c_ld, c_stride, batch, COMPUTE[a.dtype])
end

-- The same product through cuBLASLt, with an epilogue: bias, one per
-- column of the row-major C, is one per row of cuBLAS's C^T.
local function run_lt(target, transa, transb, m, n, k, alpha, a, a_ld, b, b_ld, beta, c, c_ld,
                      epilogue, bias)
  core.matmul_lt(target, transb, transa, n, m, k, alpha, b, b_ld, a, a_ld, beta, c, c_ld,
                 COMPUTE[a.dtype], EPILOGUES[epilogue], bias)
end

-- matmul(a, b [, { out =, alpha =, beta =, transa =, transb =, stream =,
-- epilogue =, bias = }]) -> out: out = alpha op(a) op(b) + beta out, op(x)
-- x or its transpose, then the epilogue (relu, gelu, bias, relu_bias,
-- gelu_bias: cuBLASLt's, fused). a and b are 2-D views (a batch of them,
-- strided) or lists of views; an epilogue takes single matrices.
function blas.matmul(a, b, options)
  local fname = "gpurun.matmul"
  check_options(fname, 3, options, MATMUL_KEYS)
  local epilogue = options and rawget(options, "epilogue")
  local bias = options and rawget(options, "bias")
  local why = blas.epilogue_problem(epilogue, bias ~= nil)
  if why then bad_argument(fname, 3, "%s", why) end
  local out = options and rawget(options, "out")
  local alpha = number_option(fname, 3, options, "alpha", 1)
  local beta = number_option(fname, 3, options, "beta", 0)
  local transa = boolean_option(fname, 3, options, "transa")
  local transb = boolean_option(fname, 3, options, "transb")
  local target = target_of(fname, 3, options)
  if not is_list(a) and not is_list(b) then
    local m, n, k, batch, a_buffer, a_ld, a_stride, b_buffer, b_ld, b_stride, c, c_ld, c_stride =
      product(fname, a, b, out, transa, transb, target, SINGLE_NAMES)
    check_scalar(fname, 3, "options.alpha", alpha, COMPUTE[a_buffer.dtype])
    check_scalar(fname, 3, "options.beta", beta, COMPUTE[a_buffer.dtype])
    if epilogue then
      why = blas.bias_problem(bias, batch, n, a_buffer.dtype)
      if why then bad_argument(fname, 3, "%s", why) end
      if bias then same_device(fname, 3, "options.bias", bias, target) end
    end
    loaded(fname, epilogue)
    if out == nil then
      out = new_out(fname, target, m, n, batch, a_buffer.dtype)
      c, c_ld, c_stride = out.buffer, n, batch > 1 and m * n or 0
    end
    if epilogue then
      run_lt(target, transa, transb, m, n, k, alpha, a_buffer, a_ld, b_buffer, b_ld, beta, c, c_ld,
             epilogue, bias)
      return out
    end
    run(target, transa, transb, m, n, k, alpha, a_buffer, a_ld, a_stride, b_buffer, b_ld, b_stride,
        beta, c, c_ld, c_stride, batch)
    return out
  end
  -- The batched form: lists of one length, each product checked before any runs.
  if not is_list(a) or not is_list(b) then
    bad_argument(fname, is_list(a) and 2 or 1, "a and b must both be views or both be lists of views")
  end
  if epilogue then
    bad_argument(fname, 3, "an epilogue takes one matrix, not lists of views: run the products "
                 .. "one by one")
  end
  if #a ~= #b then
    bad_argument(fname, 2, "the lists differ in length: a has %d views, b %d", #a, #b)
  end
  if out ~= nil and (not is_list(out) or #out ~= #a) then
    bad_argument(fname, 3, "options.out must be a list of %d views, like a and b", #a)
  end
  local shapes = {}
  for i = 1, #a do
    local names = { ("a[%d]"):format(i), ("b[%d]"):format(i), ("options.out[%d]"):format(i) }
    shapes[i] = table.pack(product(fname, a[i], b[i], out and out[i], transa, transb, target, names))
  end
  check_scalar(fname, 3, "options.alpha", alpha, COMPUTE[shapes[1][5].dtype])
  check_scalar(fname, 3, "options.beta", beta, COMPUTE[shapes[1][5].dtype])
  loaded(fname)
  local made = out or {}
  for i, s in ipairs(shapes) do
    local m, n, k, batch = s[1], s[2], s[3], s[4]
    if out == nil then
      made[i] = new_out(fname, target, m, n, batch, s[5].dtype)
      s[11], s[12], s[13] = made[i].buffer, n, batch > 1 and m * n or 0
    end
    run(target, transa, transb, m, n, k, alpha, s[5], s[6], s[7], s[8], s[9], s[10], beta, s[11],
        s[12], s[13], batch)
  end
  return made
end

-- ---- level 1: vectors ----------------------------------------------------------

local function check_vector(fname, n, value, what)
  local why = buffer_problem(value, what, "")
  if why then bad_argument(fname, n, "%s", why) end
  local count = #value
  if count > INT_MAX then
    bad_argument(fname, n, "%s has %d elements; cuBLAS takes at most %d", what, count, INT_MAX)
  end
  return count
end

-- x and y, arguments `first` and first + 1.
local function check_pair(fname, first, x, y)
  local n = check_vector(fname, first, x, "x")
  check_vector(fname, first + 1, y, "y")
  if y.dtype ~= x.dtype then
    bad_argument(fname, first + 1, "y has dtype %s but x %s: both must be of one dtype", y.dtype,
                 x.dtype)
  end
  if #y ~= n then
    bad_argument(fname, first + 1, "n does not fit: x has %d elements, y %d", n, #y)
  end
  return n
end

-- alpha: a number, or a 1-element buffer of the compute dtype (read on the
-- device when the work runs: what a graph replays with new values).
local function check_alpha(fname, x_dtype, alpha, target)
  if type(alpha) == "number" then
    check_scalar(fname, 1, "alpha", alpha, COMPUTE[x_dtype])
    return
  end
  if type_name(alpha) ~= "gpurun.Buffer" then
    bad_argument(fname, 1, "alpha must be a number or a gpurun.Buffer, got %s", type_name(alpha))
  end
  local compute = COMPUTE[x_dtype]
  if alpha.dtype ~= compute or #alpha < 1 then
    bad_argument(fname, 1, "an alpha buffer holds one %s (the compute dtype of %s), got %d %s",
                 compute, x_dtype, #alpha, alpha.dtype)
  end
  same_device(fname, 1, "alpha", alpha, target)
end

-- out: a buffer of x's dtype for one result, or nil (a new one is made).
local function result_out(fname, n, options, dtype, target)
  local out = options and rawget(options, "out")
  if out == nil then
    if type_name(target) == "gpurun.GraphBuilder" then
      bad_argument(fname, n, "options.out is needed on a GraphBuilder: no buffer can be made "
                   .. "while capturing")
    end
    return nil
  end
  if type_name(out) ~= "gpurun.Buffer" then
    bad_argument(fname, n, "options.out must be a gpurun.Buffer, got %s", type_name(out))
  end
  if out.dtype ~= dtype or #out < 1 then
    bad_argument(fname, n, "options.out must hold one %s (x's dtype), got %d %s", dtype, #out,
                 out.dtype)
  end
  same_device(fname, n, "options.out", out, target)
  return out
end

-- axpy(alpha, x, y [, { stream = }]) -> y: y = alpha x + y.
function blas.axpy(alpha, x, y, options)
  local fname = "gpurun.axpy"
  local n = check_pair(fname, 2, x, y)
  check_options(fname, 4, options, VECTOR_KEYS)
  local target = target_of(fname, 4, options)
  check_alpha(fname, x.dtype, alpha, target)
  same_device(fname, 2, "x", x, target)
  same_device(fname, 3, "y", y, target)
  loaded(fname)
  core.axpy(target, n, alpha, x, y, COMPUTE[x.dtype])
  return y
end

-- scal(alpha, x [, { stream = }]) -> x: x = alpha x.
function blas.scal(alpha, x, options)
  local fname = "gpurun.scal"
  local n = check_vector(fname, 2, x, "x")
  check_options(fname, 3, options, VECTOR_KEYS)
  local target = target_of(fname, 3, options)
  check_alpha(fname, x.dtype, alpha, target)
  same_device(fname, 2, "x", x, target)
  loaded(fname)
  core.scal(target, n, alpha, x, COMPUTE[x.dtype])
  return x
end

-- dot(x, y [, { out =, stream = }]) -> out: the dot product into out's
-- first element (a new 1-element buffer without out).
function blas.dot(x, y, options)
  local fname = "gpurun.dot"
  local n = check_pair(fname, 1, x, y)
  check_options(fname, 3, options, RESULT_KEYS)
  local target = target_of(fname, 3, options)
  same_device(fname, 1, "x", x, target)
  same_device(fname, 2, "y", y, target)
  local out = result_out(fname, 3, options, x.dtype, target)
  loaded(fname)
  out = out or gpurun.empty(1, x.dtype)
  core.dot(target, n, x, y, out, COMPUTE[x.dtype])
  return out
end

-- nrm2(x [, { out =, stream = }]) -> out: the Euclidean norm.
function blas.nrm2(x, options)
  local fname = "gpurun.nrm2"
  local n = check_vector(fname, 1, x, "x")
  check_options(fname, 2, options, RESULT_KEYS)
  local target = target_of(fname, 2, options)
  same_device(fname, 1, "x", x, target)
  local out = result_out(fname, 2, options, x.dtype, target)
  loaded(fname)
  out = out or gpurun.empty(1, x.dtype)
  core.nrm2(target, n, x, out, COMPUTE[x.dtype])
  return out
end

return blas
