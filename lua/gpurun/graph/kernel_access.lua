-- What a gpurun.Kernel does through each parameter, for the race check:
-- "r" (only reads through it) or "rw" (may write), with how that was
-- decided. In order: what the user declared (Kernel:set_access), the
-- const-ness of the parameter in the kernel's C source (Kernel.source,
-- pipeline/access.lua's reading of declarations), a dataflow over its PTX
-- when the code is PTX (graph/ptx_access.lua), else "rw": code known only
-- as a cubin may write through any pointer.
local access = require("gpurun.pipeline.access")
local common = require("gpurun.common")
local ptx_access = require("gpurun.graph.ptx_access")

local raise = common.raise

local kernel_access = {}

local declared = setmetatable({}, { __mode = "k" }) -- kernel -> { [position] = mode }
local inferred = setmetatable({}, { __mode = "k" }) -- kernel -> { [position] = { mode, how } }

-- A set_access table checked against a kernel of `count` parameters:
-- { [position] = "r" | "w" | "rw" }, a position left out (nil, or false)
-- inferred. Returns a copy, or raises naming the method.
function kernel_access.check_declaration(modes, count, method)
  if type(modes) ~= "table" then
    raise(("bad argument #1 to '%s' (table of access modes expected, got %s)")
      :format(method, common.type_name(modes)))
  end
  local copy = {}
  for key, mode in pairs(modes) do
    if math.type(key) ~= "integer" or key < 1 or key > count then
      raise(("bad argument #1 to '%s' (keys are parameter positions 1 to %d, got %s)")
        :format(method, count, common.quoted(key)))
    end
    if mode ~= false and not access.MODES[mode] then
      raise(("bad argument #1 to '%s' (parameter %d: \"r\", \"w\", \"rw\" or false expected, got %s)")
        :format(method, key, common.quoted(mode)))
    end
    copy[key] = mode or nil
  end
  return copy
end

function kernel_access.declare(kernel, modes)
  declared[kernel] = modes
  inferred[kernel] = nil
end

-- The inference from the kernel's code: { [position] = { mode, how } }.
-- code_of(kernel) -> its ObjectCode (the C side's; nil in specs).
local function infer(kernel, count, code_of)
  local result = {}
  local params, why = access.declaration(kernel.source, kernel.name)
  if params and #params ~= count then
    params, why = nil, ("its source declares %d parameters, the kernel takes %d"):format(#params, count)
  end
  if params then
    for p = 1, count do
      local param = params[p]
      if param.pointer and param.const then
        result[p] = { mode = "r", how = "const in the source: " .. param.text }
      elseif param.pointer then
        result[p] = { mode = "rw", how = "not const in the source: " .. param.text }
      else
        result[p] = { mode = "rw", how = "not a pointer in the source: " .. param.text }
      end
    end
    return result
  end
  local code = code_of and code_of(kernel)
  local modes, ptx_why
  if code and code.code_type == "ptx" then
    modes, ptx_why = ptx_access.params(code.code, kernel.name)
  end
  for p = 1, count do
    if modes and modes[p] then
      result[p] = { mode = modes[p], how = ptx_why[p] }
    else
      result[p] = { mode = "rw", how = "unknown (" .. (why or "no source") .. (ptx_why and type(ptx_why)
        == "string" and "; " .. ptx_why or "; no PTX") .. "): may write" }
    end
  end
  return result
end

-- of(kernel, code_of) -> { [position] = { mode, how } } for every parameter.
function kernel_access.of(kernel, code_of)
  local known = inferred[kernel]
  if known then return known end
  local count = kernel.num_params
  local result = infer(kernel, count, code_of)
  for p, mode in pairs(declared[kernel] or {}) do
    result[p] = { mode = mode == "w" and "w" or mode, how = "declared with Kernel:set_access" }
  end
  inferred[kernel] = result
  return result
end

return kernel_access
