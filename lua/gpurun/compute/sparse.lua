-- gpurun.csr, spmv and spmm: cuSPARSE's policy and every check before any
-- library call (the CSR parts' dtypes and lengths, the operands' shapes,
-- dtypes and devices, the options, the stream); cuSPARSE is called from C
-- (src/types/csr_matrix.c), which keeps a matrix's descriptors and work
-- buffers. Indices are 0-based, as cuSPARSE's and SciPy's are.

local common = require("gpurun.common")
local blas = require("gpurun.compute.blas")
local arguments = require("gpurun.compute.arguments")

local core = package.loaded["gpurun.sparse_core"] -- src/types/csr_matrix.c, opened with the module
local type_name, raise, bad_argument = common.type_name, common.raise, common.bad_argument

local sparse = {}

local INT_MAX = 0x7fffffff
local VALUE_DTYPES = { float32 = true, float64 = true }
local PRODUCT_KEYS = { "alpha", "beta", "transpose", "stream" }

local function check_buffer(fname, n, value, what)
  if type_name(value) ~= "gpurun.Buffer" then
    bad_argument(fname, n, "%s must be a gpurun.Buffer, got %s", what, type_name(value))
  end
  return value
end

-- Why a matrix's rows or cols (what names it) is no size cuSPARSE's int32
-- indices take, or nil.
function sparse.size_problem(value, what)
  if math.type(value) ~= "integer" then
    return ("%s must be an integer, got %s"):format(what,
      math.type(value) and common.quoted(value) or type_name(value))
  end
  if value < 1 or value > INT_MAX then
    return ("%s must be 1..%d (int32 indices), got %d"):format(what, INT_MAX, value)
  end
  return nil
end

local function check_size(fname, n, value, what)
  local why = sparse.size_problem(value, what)
  if why then bad_argument(fname, n, "%s", why) end
  return value
end

local function measured(buffer)
  return buffer.dtype, #buffer
end

-- The checks of a CSR matrix's parts that need only their dtypes and
-- lengths (measure(part) gives them) and its rows, so that a declared
-- pipeline makes them before there is memory: nil, or the argument's
-- position (1 to 3, as gpurun.csr takes them) and why.
function sparse.csr_problem(row_offsets, col_indices, values, rows, measure)
  local offsets_dtype, offsets_n = measure(row_offsets)
  local indices_dtype, nnz_indices = measure(col_indices)
  local values_dtype, nnz = measure(values)
  if offsets_dtype ~= "int32" then
    return 1, ("row_offsets must be int32, got %s"):format(offsets_dtype)
  end
  if indices_dtype ~= "int32" then
    return 2, ("col_indices must be int32, got %s"):format(indices_dtype)
  end
  if not VALUE_DTYPES[values_dtype] then
    return 3, ("values must be float32 or float64, got %s"):format(values_dtype)
  end
  if offsets_n ~= rows + 1 then
    return 1, ("row_offsets must hold rows + 1 = %d offsets, got %d"):format(rows + 1, offsets_n)
  end
  if nnz > INT_MAX then
    return 3, ("at most %d values (int32 indices), got %d"):format(INT_MAX, nnz)
  end
  if nnz_indices ~= nnz then
    return 2, ("nnz does not fit: %d col_indices but %d values"):format(nnz_indices, nnz)
  end
  return nil
end

-- csr(row_offsets, col_indices, values, rows, cols) -> gpurun.CsrMatrix:
-- row i's nonzeros are values[row_offsets[i] .. row_offsets[i + 1] - 1],
-- in the columns col_indices gives, all counted from 0.
function sparse.csr(row_offsets, col_indices, values, rows, cols)
  local fname = "gpurun.csr"
  check_buffer(fname, 1, row_offsets, "row_offsets")
  check_buffer(fname, 2, col_indices, "col_indices")
  check_buffer(fname, 3, values, "values")
  rows = check_size(fname, 4, rows, "rows")
  cols = check_size(fname, 5, cols, "cols")
  local position, why = sparse.csr_problem(row_offsets, col_indices, values, rows, measured)
  if position then bad_argument(fname, position, "%s", why) end
  if row_offsets.device ~= values.device or col_indices.device ~= values.device then
    bad_argument(fname, 2, "the three buffers must be on one device: row_offsets on %d, "
                 .. "col_indices on %d, values on %d", row_offsets.device, col_indices.device,
                 values.device)
  end
  return core.csr(row_offsets, col_indices, values, rows, cols)
end

local function check_matrix(fname, a)
  if type_name(a) ~= "gpurun.CsrMatrix" then
    bad_argument(fname, 1, "A must be a gpurun.CsrMatrix (gpurun.csr), got %s", type_name(a))
  end
  return a
end

-- The options every product takes: alpha, beta (numbers in A's dtype),
-- transpose and the stream.
local function product_options(fname, n, a, options)
  arguments.check_options(fname, n, options, PRODUCT_KEYS)
  local alpha = blas.number_option(fname, n, options, "alpha", 1)
  local beta = blas.number_option(fname, n, options, "beta", 0)
  blas.check_scalar(fname, n, "options.alpha", alpha, a.dtype)
  blas.check_scalar(fname, n, "options.beta", beta, a.dtype)
  local transpose = blas.boolean_option(fname, n, options, "transpose")
  local target = arguments.stream_option(fname, n, options)
  local device = target.device
  if type_name(target) == "gpurun.GraphBuilder" then device = target.stream.device end
  if device ~= a.device then
    bad_argument(fname, n, "A is on device %d but the stream on device %d", a.device, device)
  end
  return alpha, beta, transpose, target
end

-- cuSPARSE opens on the first product, after the checks.
local function loaded(fname)
  local why = core.load()
  if why then raise(fname .. ": " .. why) end
end

local function check_dense_dtype(fname, n, what, dtype, a)
  if dtype ~= a.dtype then
    bad_argument(fname, n, "%s has dtype %s but A %s: both must be of one dtype", what, dtype,
                 a.dtype)
  end
end

local function check_device(fname, n, what, buffer, a)
  if buffer.device ~= a.device then
    bad_argument(fname, n, "%s is on device %d but A on device %d", what, buffer.device, a.device)
  end
end

-- The checks of y = alpha op(A) x + beta y that need only dtypes and
-- lengths (measure(x) gives x's), for a matrix of `dtype`, rows and cols:
-- nil, or the argument's position (2: x, 3: y) and why.
function sparse.shape_problem(dtype, rows, cols, x, y, transpose, measure)
  local m, k = rows, cols
  if transpose then m, k = k, m end
  local x_dtype, x_n = measure(x)
  local y_dtype, y_n = measure(y)
  if x_dtype ~= dtype then
    return 2, ("x has dtype %s but A %s: both must be of one dtype"):format(x_dtype, dtype)
  end
  if y_dtype ~= dtype then
    return 3, ("y has dtype %s but A %s: both must be of one dtype"):format(y_dtype, dtype)
  end
  if x_n ~= k then
    return 2, ("x must hold %d elements (the %s of A), got %d"):format(k,
      transpose and "rows" or "cols", x_n)
  end
  if y_n ~= m then
    return 3, ("y must hold %d elements (the %s of A), got %d"):format(m,
      transpose and "cols" or "rows", y_n)
  end
  return nil
end

-- spmv(A, x, y [, { alpha =, beta =, transpose =, stream = }]) -> y:
-- y = alpha op(A) x + beta y, op(A) A or its transpose.
function sparse.spmv(a, x, y, options)
  local fname = "gpurun.spmv"
  check_matrix(fname, a)
  check_buffer(fname, 2, x, "x")
  check_buffer(fname, 3, y, "y")
  local alpha, beta, transpose, target = product_options(fname, 4, a, options)
  local position, why = sparse.shape_problem(a.dtype, a.rows, a.cols, x, y, transpose, measured)
  if position then bad_argument(fname, position, "%s", why) end
  check_device(fname, 2, "x", x, a)
  check_device(fname, 3, "y", y, a)
  loaded(fname)
  core.spmv(target, a, x, y, alpha, beta, transpose)
  return y
end

-- A dense operand: a 2-D view (gpurun.matrix) of one matrix, in A's dtype.
local function dense_view(fname, n, view, what, a)
  local buffer, rows, cols, ld, batch = blas.view_fields(view, what)
  if not buffer then bad_argument(fname, n, "%s", rows) end
  if batch ~= 1 then
    bad_argument(fname, n, "%s must be one matrix, got a batch of %d", what, batch)
  end
  check_dense_dtype(fname, n, what, buffer.dtype, a)
  check_device(fname, n, what, buffer, a)
  return buffer, rows, cols, ld
end

-- spmm(A, B, C [, { alpha =, beta =, transpose =, stream = }]) -> C:
-- C = alpha op(A) B + beta C, B and C 2-D views (row-major, ld apart).
function sparse.spmm(a, b, c, options)
  local fname = "gpurun.spmm"
  check_matrix(fname, a)
  local alpha, beta, transpose, target = product_options(fname, 4, a, options)
  local b_buffer, b_rows, b_cols, b_ld = dense_view(fname, 2, b, "B", a)
  local c_buffer, c_rows, c_cols, c_ld = dense_view(fname, 3, c, "C", a)
  local m, k = a.rows, a.cols
  if transpose then m, k = k, m end
  if b_rows ~= k then
    bad_argument(fname, 2, "k does not fit: %sA is %d x %d, so k is %d, but B has %d rows",
                 transpose and "transposed " or "", m, k, k, b_rows)
  end
  if c_rows ~= m then
    bad_argument(fname, 3, "m does not fit: C has %d rows, %sA gives %d", c_rows,
                 transpose and "transposed " or "", m)
  end
  if c_cols ~= b_cols then
    bad_argument(fname, 3, "n does not fit: C has %d cols, B %d", c_cols, b_cols)
  end
  loaded(fname)
  core.spmm(target, a, b_buffer, b_ld, c_buffer, c_ld, b_cols, alpha, beta, transpose)
  return c
end

return sparse
