-- What a pipeline stage reads and writes, inferred from its code where the
-- code says: no GPU and no gpurun objects here. pipeline/declare.lua puts
-- what a stage declares in the place of what is inferred.
local access = {}

-- The source with comments, string and character literals blanked (their
-- length kept), so that positions still match.
local function code_only(text)
  local blank = function(s) return (s:gsub("[^\n]", " ")) end
  text = text:gsub("//[^\n]*", blank)
  text = text:gsub("/%*.-%*/", blank)
  text = text:gsub('"[^"\n]*"', blank)
  text = text:gsub("'[^'\n]*'", blank)
  return text
end

-- Splits a parameter list at the commas outside <>, () and [].
local function split_params(list)
  local params, depth, start = {}, 0, 1
  for at = 1, #list do
    local c = list:sub(at, at)
    if c == "<" or c == "(" or c == "[" then
      depth = depth + 1
    elseif c == ">" or c == ")" or c == "]" then
      depth = depth - 1
    elseif c == "," and depth == 0 then
      params[#params + 1] = list:sub(start, at - 1)
      start = at + 1
    end
  end
  local last = list:sub(start)
  if last:match("%S") then
    params[#params + 1] = last
  end
  return params
end

-- One parameter's declaration -> { text, pointer, const }: `const` only
-- for a pointer whose pointee is const (const float *p, float const *p),
-- not for float *const p; a pointer to pointers is not const (the memory
-- it reaches is another's).
local function describe_param(text)
  text = text:gsub("=.*$", ""):match("^%s*(.-)%s*$")
  local plain = text:gsub("<[^<>]*>", "<>")
  local stars = select(2, plain:gsub("%*", ""))
  local param = { text = text, pointer = stars > 0, const = false }
  if stars == 1 then
    local pointee = plain:match("^(.-)%*")
    param.const = pointee:match("%f[%w_]const%f[^%w_]") ~= nil
  end
  return param
end

-- The declaration of kernel `name` (a name expression's template arguments
-- dropped: "scale<float>" finds scale) in `source`: a list of parameters
-- as describe_param gives them, or nil and why.
function access.declaration(source, name)
  if type(source) ~= "string" then
    return nil, "its source is not known"
  end
  local base = name:match("^([%a_][%w_]*)")
  if not base then
    return nil, ("'%s' is not a kernel name"):format(name)
  end
  local code = code_only(source)
  local at = 1
  while true do
    local first, last = code:find("%f[%w_]" .. base .. "%s*%(", at)
    if not first then
      return nil, ("no __global__ declaration of '%s' in its source"):format(base)
    end
    -- What comes before, back to the previous declaration, must say __global__.
    local head = code:sub(1, first - 1)
    local from = math.max(head:match(".*()[;{}]") or 0, 0)
    local prefix = head:sub(from + 1)
    if prefix:find("__global__", 1, true) then
      -- last is the list's "(": %b() finds its ")", nested ones skipped.
      local _, stop = code:find("^%b()", last)
      if not stop then
        return nil, ("the declaration of '%s' does not close its parameter list"):format(base)
      end
      local list = code:sub(last + 1, stop - 1)
      local params = {}
      if not list:match("^%s*void%s*$") then
        for index, text in ipairs(split_params(list)) do
          params[index] = describe_param(text)
        end
      end
      return params
    end
    at = last + 1
  end
end

-- ---- modes --------------------------------------------------------------------------

local MODES = { r = true, w = true, rw = true }
access.MODES = MODES

-- The one conflict rule, shared by the planner (pipeline/schedule.lua) and
-- the race check of hand-built graphs (graph/race_check.lua): two accesses
-- conflict when they share bytes of one address space (the same key, [lo,
-- hi) ranges that intersect; an empty range overlaps nothing) and one of
-- them writes. hazard(earlier, later) names the conflict of an access of
-- mode `earlier` with a later one of mode `later`, as the planner names its
-- edges (a read-and-write after a write reads first: RAW), or nil.
access.HAZARD = { RAW = "read after write", WAR = "write after read", WAW = "write after write" }

function access.overlap(a, b)
  return a.key == b.key and a.lo < b.hi and b.lo < a.hi
end

function access.hazard(earlier, later)
  local earlier_writes, later_writes = earlier ~= "r", later ~= "r"
  if earlier_writes and later ~= "w" then return "RAW" end
  if earlier_writes and later_writes then return "WAW" end
  if later_writes then return "WAR" end
  return nil
end

local function merge(a, b)
  if a == nil then return b end
  if b == nil or a == b then return a end
  return "rw"
end
access.merge = merge

-- The accesses of a raw kernel's arguments: { [argument position] = { mode,
-- how, maybe_read } } for the arguments that are data, from `params` (the
-- declaration, or nil with why_unknown).
--
-- PTX does not carry const (NVRTC writes every pointer as a plain .u64, or
-- .u64 .ptr for sm_100 and up, const or not), so the kernel's C declaration
-- in its Program's source (gpurun.Kernel.source) is read instead: a pointer
-- to const is read, any other pointer may be read and written. Without a
-- declaration (code that did not come from a Program, a kernel generated by
-- a macro) every pointer argument is taken as read and written, and the
-- plan says so. Declared reads and writes override the inference; writing
-- through a pointer to const is refused.
function access.raw(params, data_positions, why_unknown)
  local result = {}
  for _, position in ipairs(data_positions) do
    local param = params and params[position]
    if param and param.pointer and param.const then
      result[position] = { mode = "r", how = "const in the source: " .. param.text, const = true }
    elseif param and param.pointer then
      result[position] = { mode = "rw", maybe_read = true,
                           how = "not const in the source: " .. param.text }
    elseif param then
      result[position] = { mode = "rw", maybe_read = true,
                           how = "the source declares " .. param.text .. ", not a pointer" }
    else
      result[position] = { mode = "rw", maybe_read = true,
                           how = "unknown (" .. (why_unknown or "no declaration") .. "): read and written" }
    end
  end
  return result
end

-- The accesses of a kernel object's arguments, from its params: for objects
-- with `params` (elementwise kernels and pipelines, reductions) an input is
-- read, an output written (read and written when the operation reads it
-- first: param.read).
function access.from_params(params, data_positions)
  local result = {}
  for _, position in ipairs(data_positions) do
    local param = params[position]
    if param.output then
      result[position] = { mode = param.read and "rw" or "w",
                           how = "output " .. param.name .. (param.read and " (read first)" or "") }
    else
      result[position] = { mode = "r", how = "input " .. param.name, const = true }
    end
  end
  return result
end

-- ---- kinds of kernel objects -------------------------------------------------------

-- By their shape, not their metatable: a library loaded again (busted
-- drops package.loaded between files) makes kernels of another metatable.
function access.is_elementwise_kernel(kernel)
  return type(kernel) == "table" and type(kernel.operation) == "string"
    and type(kernel.params) == "table" and type(kernel.source_for) == "function"
end

function access.is_elementwise_pipeline(kernel)
  return type(kernel) == "table" and type(kernel.kernels) == "table"
    and type(kernel.outputs) == "table" and type(kernel.describe) == "function"
end

-- Whether a kernel object keeps temporaries of its own between calls, so
-- that two calls must not overlap: gpurun.reduction's kernels (kind
-- "reduction kernel"), and elementwise pipelines that hold one.
local KEEPS_STATE = { ["reduction kernel"] = true } -- kernel objects' kinds

function access.keeps_state(kernel)
  if KEEPS_STATE[kernel.kind] then
    return true
  end
  if access.is_elementwise_pipeline(kernel) then
    for _, part in ipairs(kernel.kernels) do
      if type(part) == "table" and KEEPS_STATE[part.kind] then
        return true
      end
    end
  end
  return false
end

-- ---- fusion --------------------------------------------------------------------

-- What a fused kernel needs of an elementwise kernel: one output written by
-- a single `out = expression` that does not mention out again, no type
-- variables and no preamble. Returns { output = index, expression } or nil
-- and why not.
function access.fusable(kernel)
  local outputs = {}
  for index, param in ipairs(kernel.params) do
    if param.variable then
      return nil, "it has a type variable"
    end
    if param.output then
      outputs[#outputs + 1] = index
    end
  end
  if #outputs ~= 1 then
    return nil, "it has several outputs"
  end
  if kernel.preamble and kernel.preamble ~= "" then
    return nil, "it has a preamble"
  end
  local out = kernel.params[outputs[1]]
  local text = code_only(kernel.operation)
  local start = text:match("^%s*" .. out.name .. "%s*=%s*()")
  local body = start and text:sub(start):match("^(.-)%s*;?%s*$")
  if not body or body == "" or body:find(";", 1, true) or body:sub(1, 1) == "="
      or body:find("%f[%w_]" .. out.name .. "%f[^%w_]") then
    return nil, "its operation is not one `" .. out.name .. " = expression`"
  end
  local expression = kernel.operation:sub(start, start + #body - 1)
  return { output = outputs[1], expression = expression }
end

-- The expression with each parameter name replaced by names[param name]
-- (not after . or ->, where a name is a member).
function access.rename(expression, names)
  return (expression:gsub("()([%a_][%w_]*)", function(at, word)
    local before = expression:sub(math.max(1, at - 2), at - 1)
    if names[word] and not before:match("%.%s*$") and not before:match("%->$") then
      return names[word]
    end
  end))
end

return access
