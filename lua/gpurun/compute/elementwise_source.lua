-- CUDA C source for gpurun.elementwise: parameter lists in CuPy's shape,
-- the operation's use of its outputs, and the kernels generated for one
-- signature (each parameter's dtype, and whether it is a buffer or a
-- scalar). No GPU and no gpurun objects (only gpurun.dtypes, the one table
-- of element types): lua/gpurun/compute/elementwise.lua compiles and
-- launches what this writes.

local common = require("gpurun.common")

local source = {}

local DTYPES = common.DTYPES
local raise = common.raise

source.VECTOR_BYTES = 16

-- 16-byte moves with the evict-first hint (ld.global.cs, st.global.cs):
-- for data read or written once, so that it does not push out what the
-- caches hold for others.
source.STREAMING = [[
#ifndef GPURUN_STREAMING_VEC
#define GPURUN_STREAMING_VEC
template <typename V>
__device__ __forceinline__ V _ew_load_cs(const V *p)
{
    static_assert(sizeof(V) == 16, "16-byte vectors");
    const int4 bits = __ldcs(reinterpret_cast<const int4 *>(p));
    V value;
    memcpy(&value, &bits, sizeof value);
    return value;
}
template <typename V>
__device__ __forceinline__ void _ew_store_cs(V *p, const V &value)
{
    static_assert(sizeof(V) == 16, "16-byte vectors");
    int4 bits;
    memcpy(&bits, &value, sizeof bits);
    __stcs(reinterpret_cast<int4 *>(p), bits);
}
#endif]]

-- The first lines of every generated kernel (elementwise, reductions,
-- scans): on sm_90 and up, wait for the kernels this one was launched
-- after with programmatic stream serialization (PDL) to finish and flush
-- their memory, then let the kernel after this one start launching (its
-- blocks start once every block of this one has passed here, and wait the
-- same way). Without that launch attribute the wait returns at once; older
-- archs compile neither instruction.
source.GRID_DEPENDENCY = {
  "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900",
  '    asm volatile("griddepcontrol.wait;" ::: "memory");',
  '    asm volatile("griddepcontrol.launch_dependents;" :::);',
  "#endif",
}

function source.add_grid_dependency(add)
  for _, line in ipairs(source.GRID_DEPENDENCY) do
    add(line)
  end
end

-- Names the generated code uses itself, and C++ words a parameter cannot be.
local RESERVED = {}
for word in ([[i n alignas alignof asm auto bool break case catch char class const constexpr
  continue default delete do double else enum explicit extern false float for friend goto if
  inline int long mutable namespace new operator private protected public register return short
  signed sizeof static struct switch template this throw true try typedef typename union
  unsigned using virtual void volatile while]]):gmatch("%S+") do
  RESERVED[word] = true
end

-- Whether `name` can name a parameter: an identifier, not a C++ word, not
-- starting with '_', not i or n (the operation's index and size).
function source.is_parameter_name(name)
  return common.is_identifier(name) and not RESERVED[name] and name:sub(1, 1) ~= "_"
end

-- "float32 a, T b" -> { { type = "float32", name = "a" }, { type = "T", name = "b",
-- variable = true } }, or nil and why. A type that is not a dtype and starts
-- with a capital letter is a type variable, bound at the call from the
-- arguments (CuPy's "T x").
function source.parse_params(text, what)
  if type(text) ~= "string" then
    return nil, ("%s: a string such as \"float32 a, float32 b\" expected, got %s"):format(what, type(text))
  end
  local params = {}
  if text:match("^%s*$") then
    return params
  end
  for item in (text .. ","):gmatch("([^,]*),") do
    local dtype, name = item:match("^%s*([%w_]+)%s+([%w_]+)%s*$")
    if not dtype then
      return nil, ("%s: '%s' is not \"<dtype> <name>\""):format(what, item:match("^%s*(.-)%s*$"))
    end
    if not source.is_parameter_name(name) then
      return nil, ("%s: '%s' cannot name a parameter (a C++ word, a name starting with '_', "
                   .. "or i and n, which the operation sees as the index and the size)"):format(what, name)
    end
    local variable = not DTYPES[dtype]
    if variable and (not dtype:match("^%u[%w_]*$") or RESERVED[dtype]) then
      return nil, ("%s: unknown dtype '%s' for %s (dtypes: %s; a type variable starts with a "
                   .. "capital letter, as T)"):format(what, dtype, name, common.REAL_DTYPE_NAMES)
    end
    if DTYPES[dtype] and DTYPES[dtype].kind == "complex" then
      return nil, ("%s: dtype %s for %s: generated kernels take real dtypes, not complex ones")
        :format(what, dtype, name)
    end
    params[#params + 1] = { type = dtype, name = name, variable = variable or nil }
  end
  return params
end

-- The operation with comments and string literals blanked, so that names
-- inside them are not taken for uses.
local function code_only(text)
  return (text:gsub('"[^"\n]*"', '""'):gsub("//[^\n]*", ""):gsub("/%*.-%*/", " "))
end

-- The operation as a statement: CuPy's operations may leave off the last ';'.
function source.statement(operation)
  local code = code_only(operation):match("^(.-)%s*$")
  local last = code:sub(-1)
  if last == ";" or last == "}" or code == "" then
    return operation
  end
  local text = operation:match("^(.-)%s*$")
  local final_line = text:match("([^\n]*)$")
  if final_line:find("//", 1, true) then
    return text .. "\n;"
  end
  return text .. ";"
end

-- How the code first mentions each name: { [name] = { mentioned = bool,
-- read_first = bool } }. Only a statement of its own, `name = ...;`, at the
-- top level and not mentioning name again, writes before reading; anything
-- else (`r += x`, `if (c) r = x;`, `r = r * 2;`) reads the old value first.
function source.uses(code, names)
  local uses = {}
  for _, name in ipairs(names) do
    uses[name] = { mentioned = false, read_first = false }
  end
  local text = code_only(code)
  local depth, previous, before_previous = 0, nil, nil
  local at = 1
  while at <= #text do
    local word = text:match("^[%a_][%w_]*", at)
    local number = not word and text:match("^%d[%w_%.]*", at)
    local c = text:sub(at, at)
    if word then
      local use = uses[word]
      local member = previous == "." or (previous == ">" and before_previous == "-")
      if use and not use.mentioned and not member then
        use.mentioned = true
        local assigns = text:match("^%s*=[^=]", at + #word) ~= nil
        local statement = depth == 0 and (previous == nil or previous == ";" or previous == "}")
        local rest = text:sub(at + #word):match("^[^;]*") or ""
        local again = rest:find("%f[%w_]" .. word .. "%f[^%w_]") ~= nil
        use.read_first = not (assigns and statement and not again)
      end
      before_previous, previous = previous, "word"
      at = at + #word
    elseif number then
      before_previous, previous = previous, "word"
      at = at + #number
    elseif c:match("%s") then
      at = at + 1
    else
      if c == "(" or c == "{" or c == "[" then
        depth = depth + 1
      elseif (c == ")" or c == "}" or c == "]") and depth > 0 then
        depth = depth - 1
      end
      before_previous, previous = previous, c
      at = at + 1
    end
  end
  return uses
end

-- A kernel's name and parameter lists, checked as every generator checks
-- them: -> name, what ("<kind> '<name>'", for messages), inputs, outputs.
-- `kind` is "elementwise" or "reduction"; the name defaults to default.
function source.parse_kernel(kind, name, default, in_params, out_params)
  name = name or default
  if not common.is_identifier(name) or name:sub(1, 1) == "_" then
    raise(("%s: the name must be a C identifier not starting with '_', got %s"):format(
                 kind, common.quoted(name)))
  end
  local what = ("%s kernel '%s'"):format(kind, name)
  local inputs, in_error = source.parse_params(in_params, what .. " in_params")
  if not inputs then
    raise(in_error)
  end
  local outputs, out_error = source.parse_params(out_params, what .. " out_params")
  if not outputs then
    raise(out_error)
  end
  if #outputs == 0 then
    raise(what .. ": out_params names no output")
  end
  return name, what, inputs, outputs
end

-- ---- generation -------------------------------------------------------------

-- The operation sees each element in its dtype's compute type: the dtype
-- itself, or float for float16 and bfloat16 (whose operators cuda_fp16.h and
-- cuda_bf16.h give only on some architectures), converted on load and
-- rounded to nearest even on store. The reductions' and scans' generators
-- write their elements by the same rules, through these.

-- A list of lines, and a function that adds one (formatted when given
-- values).
function source.lines()
  local out = {}
  return out, function(fmt, ...)
    out[#out + 1] = select("#", ...) > 0 and fmt:format(...) or fmt
  end
end

-- The C type of parameter `index`'s elements as stored, and as the code
-- sees them.
function source.c_type(signature, index)
  return DTYPES[signature.dtypes[index]].c
end

function source.compute_type(signature, index)
  return DTYPES[signature.dtypes[index]].compute
end

-- An element as stored, as the code sees it.
function source.loaded(signature, index, value)
  local dtype = DTYPES[signature.dtypes[index]]
  return dtype.compute == dtype.c and value or ("static_cast<%s>(%s)"):format(dtype.compute, value)
end

-- The code's value, as an element is stored.
function source.stored(signature, index, value)
  local dtype = DTYPES[signature.dtypes[index]]
  return dtype.compute == dtype.c and value or ("static_cast<%s>(%s)"):format(dtype.c, value)
end

local lines, c_type, compute_type = source.lines, source.c_type, source.compute_type
local loaded, stored = source.loaded, source.stored

-- The C declaration of each of a kernel's parameters, after `first` ones
-- of the generator's own (a list): a scalar by value, an input as a const
-- pointer, an output as a pointer. Every generated kernel declares them so.
function source.parameter_declarations(kernel, signature, first)
  local list = first or {}
  for index, param in ipairs(kernel.params) do
    local dtype = DTYPES[signature.dtypes[index]]
    if signature.scalar[index] then
      list[#list + 1] = ("%s _in_%s"):format(dtype.c, param.name)
    elseif param.output then
      list[#list + 1] = ("%s *__restrict__ _out_%s"):format(dtype.c, param.name)
    else
      list[#list + 1] = ("const %s *__restrict__ _in_%s"):format(dtype.c, param.name)
    end
  end
  return table.concat(list, ", ")
end

-- Kernel parameters: n, then one per parameter.
local function parameter_list(kernel, signature)
  return source.parameter_declarations(kernel, signature, { "unsigned long long n" })
end

-- The operation for one element, its inputs in locals named as the
-- parameters. value(index, param) is how the element of a buffer is read.
local function element_body(add, kernel, signature, indent, value)
  for index, param in ipairs(kernel.params) do
    local ctype = compute_type(signature, index)
    if signature.scalar[index] then
      add("%sconst %s %s = (%s)_in_%s;", indent, ctype, param.name, ctype, param.name)
    elseif not param.output then
      add("%sconst %s %s = %s;", indent, ctype, param.name, loaded(signature, index, value(index, param)))
    elseif param.read then
      add("%s%s %s = %s;", indent, ctype, param.name, loaded(signature, index, value(index, param)))
    else
      add("%s%s %s;", indent, ctype, param.name)
    end
  end
  add("%s{", indent)
  for line in (source.statement(kernel.operation) .. "\n"):gmatch("([^\n]*)\n") do
    add("%s    %s", indent, line)
  end
  add("%s}", indent)
end

local function type_aliases(add, kernel, signature, indent)
  for _, variable in ipairs(kernel.type_variables) do
    add("%stypedef %s %s;", indent, DTYPES[signature.bindings[variable]].compute, variable)
  end
end

local function scalar_loop(add, kernel, signature, indent, start)
  add("%sfor (unsigned long long i = %s; i < n; i += stride) {", indent, start)
  element_body(add, kernel, signature, indent .. "    ", function(_, param)
    return ("_%s_%s[i]"):format(param.output and "out" or "in", param.name)
  end)
  for index, param in ipairs(kernel.params) do
    if param.output then
      add("%s    _out_%s[i] = %s;", indent, param.name, stored(signature, index, param.name))
    end
  end
  add("%s}", indent)
end

local function kernel_head(add, kernel, signature, suffix)
  add('extern "C" __global__ void __launch_bounds__(%d) %s_%s(%s)', kernel.block,
      kernel.name, suffix, parameter_list(kernel, signature))
  add("{")
  source.add_grid_dependency(add)
  type_aliases(add, kernel, signature, "    ")
  add("    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;")
  add("    const unsigned long long first = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;")
end

local function scalar_kernel(add, kernel, signature)
  kernel_head(add, kernel, signature, "scalar")
  scalar_loop(add, kernel, signature, "    ", "first")
  add("}")
end

-- A vector kernel's step loads `count` vectors of `width` elements a
-- thread from each array that space_of(index, param) names ("in" or "out";
-- nil: none), vector u at element-vector at(u), into _l_<name>_<u>.
function source.add_vector_loads(add, kernel, signature, width, count, at, space_of)
  local streaming = kernel.cache == "streaming"
  for index, param in ipairs(kernel.params) do
    local space = space_of(index, param)
    if space then
      local vec = ("_vec<%s, %d>"):format(c_type(signature, index), width)
      for u = 0, count - 1 do
        if streaming then
          add("        const %s _l_%s_%d = _ew_load_cs(reinterpret_cast<const %s *>(_%s_%s) + (%s));",
              vec, param.name, u, vec, space, param.name, at(u))
        else
          add("        const %s _l_%s_%d = reinterpret_cast<const %s *>(_%s_%s)[%s];",
              vec, param.name, u, vec, space, param.name, at(u))
        end
      end
    end
  end
end

-- The vectors _s_<name>_<u> a step computes, of each output that
-- stores(param) picks; then (add_vector_stores) each stored to vector
-- at(u) of its output.
function source.add_output_vectors(add, kernel, signature, width, count, stores)
  for index, param in ipairs(kernel.params) do
    if stores(param) then
      for u = 0, count - 1 do
        add("        _vec<%s, %d> _s_%s_%d;", c_type(signature, index), width, param.name, u)
      end
    end
  end
end

function source.add_vector_stores(add, kernel, signature, width, count, at, stores)
  local store = kernel.cache == "streaming"
    and "        _ew_store_cs(reinterpret_cast<_vec<%s, %d> *>(_out_%s) + (%s), _s_%s_%d);"
    or "        reinterpret_cast<_vec<%s, %d> *>(_out_%s)[%s] = _s_%s_%d;"
  for index, param in ipairs(kernel.params) do
    if stores(param) then
      for u = 0, count - 1 do
        add(store, c_type(signature, index), width, param.name, at(u), param.name, u)
      end
    end
  end
end

local function is_output(param)
  return param.output
end

-- `unroll` vectors per thread per step, all loaded before any is computed,
-- then a step of one vector for what is left, then the scalar tail.
local function vector_kernel(add, kernel, signature, width)
  local unroll = kernel.unroll
  local function at(u)
    return u == 0 and "v" or ("v + %d * stride"):format(u)
  end
  kernel_head(add, kernel, signature, "vec")
  add("    const unsigned long long vectors = n / %d;", width)
  add("    unsigned long long v = first;")
  local function step(count, condition, advance)
    add("    for (; %s; v += %s) {", condition, advance)
    source.add_vector_loads(add, kernel, signature, width, count, at, function(index, param)
      if not signature.scalar[index] and (not param.output or param.read) then
        return param.output and "out" or "in"
      end
    end)
    source.add_output_vectors(add, kernel, signature, width, count, is_output)
    for u = 0, count - 1 do
      add("#pragma unroll")
      add("        for (int _k = 0; _k < %d; _k++) {", width)
      add("            const unsigned long long i = (%s) * %d + _k;", at(u), width)
      element_body(add, kernel, signature, "            ", function(_, param)
        return ("_l_%s_%d.v[_k]"):format(param.name, u)
      end)
      for index, param in ipairs(kernel.params) do
        if param.output then
          add("            _s_%s_%d.v[_k] = %s;", param.name, u, stored(signature, index, param.name))
        end
      end
      add("            (void)i;")
      add("        }")
    end
    source.add_vector_stores(add, kernel, signature, width, count, at, is_output)
    add("    }")
  end
  if unroll > 1 then
    step(unroll, ("v + %d * stride < vectors"):format(unroll - 1), ("%d * stride"):format(unroll))
  end
  step(1, "v < vectors", "stride")
  add("    // the tail: the n %% %d elements past the last whole vector", width)
  scalar_loop(add, kernel, signature, "    ", ("vectors * %d + first"):format(width))
  add("}")
end

-- The vector width for a signature: 16 bytes of the one element size all
-- its buffers share, or nil when they differ.
function source.vector_width(kernel, signature)
  local size
  for index in ipairs(kernel.params) do
    if not signature.scalar[index] then
      local bytes = DTYPES[signature.dtypes[index]].size
      if size and bytes ~= size then
        return nil
      end
      size = bytes
    end
  end
  return size and source.VECTOR_BYTES // size
end

local function describe_params(kernel, signature, outputs)
  local list = {}
  for index, param in ipairs(kernel.params) do
    if (param.output or false) == outputs then
      list[#list + 1] = ("%s %s%s"):format(signature.dtypes[index], param.name,
                                          signature.scalar[index] and " (scalar)" or "")
    end
  end
  return #list > 0 and table.concat(list, ", ") or "none"
end

-- The program for one signature: { dtypes = { [index] = dtype },
-- scalar = { [index] = true }, bindings = { T = dtype } }. Returns the
-- source and the vector width (nil: no vector kernel). The program has up
-- to two kernels:
--   <name>_scalar  a grid-stride loop, one element per step, any alignment;
--   <name>_vec     the same loop over 16-byte vectors (4 float32, 2 float64,
--                  16 int8...), for when every buffer shares one element size
--                  and is 16-byte aligned, then a scalar tail for the
--                  n % width elements past the last whole vector.
-- Both take (n, parameters in order): n first, so that a launch can pass the
-- caller's arguments on unchanged after it.
function source.generate(kernel, signature)
  local out, add = lines()
  local width = source.vector_width(kernel, signature)
  add("// gpurun.elementwise kernel '%s'", kernel.name)
  add("//   in:  %s", describe_params(kernel, signature, false))
  add("//   out: %s", describe_params(kernel, signature, true))
  for line in (kernel.operation .. "\n"):gmatch("([^\n]*)\n") do
    add("//   %s", line)
  end
  local included = {}
  for index in ipairs(kernel.params) do
    local header = DTYPES[signature.dtypes[index]].header
    if header and not included[header] then
      included[header] = true
      add("#include <%s>", header)
    end
  end
  if width then
    add("// %s_vec: %d elements per %d-byte access, for 16-byte-aligned buffers; %s_scalar: any alignment.",
        kernel.name, width, source.VECTOR_BYTES, kernel.name)
    add("#ifndef GPURUN_ELEMENTWISE_VEC") -- once in a pipeline's several programs joined
    add("#define GPURUN_ELEMENTWISE_VEC")
    add("template <typename T, int N> struct alignas(sizeof(T) * N) _vec { T v[N]; };")
    add("#endif")
    if kernel.cache == "streaming" then
      add(source.STREAMING)
    end
  else
    add("// %s_scalar only: its buffers' element sizes differ, so no vector kernel.", kernel.name)
  end
  if kernel.preamble ~= "" then
    add(kernel.preamble)
  end
  add("")
  scalar_kernel(add, kernel, signature)
  if width then
    add("")
    vector_kernel(add, kernel, signature, width)
  end
  return table.concat(out, "\n") .. "\n", width
end

return source
