-- The options every generated kernel takes (elementwise kernels and
-- pipelines, reductions) and their one check.
local common = require("gpurun.common")
local options = require("gpurun.options")

local raise = common.raise
local quoted = common.quoted

local kernel_options = {}

-- Their names (reductions add their own to `known`, the list of the keys
-- they take).
kernel_options.NAMES = { "block", "unroll", "blocks_per_sm", "preamble", "cache" }

-- check(options, what [, defaults [, known]]) -> { block, unroll,
-- blocks_per_sm, preamble, cache }, checked, unknown keys refused (`known`:
-- the keys the caller takes, default NAMES); `defaults` may change
-- unroll's (reductions unroll more). Messages start with `what`.
function kernel_options.check(given, what, defaults, known)
  given = given or {}
  if type(given) ~= "table" then
    raise(what .. ": options must be a table, got " .. type(given))
  end
  local unknown = options.unknown(given, known or kernel_options.NAMES)
  if unknown then raise(what .. ": " .. unknown) end
  local function integer(key, low, high, default)
    local value = rawget(given, key)
    if value == nil then
      return default
    end
    if math.type(value) ~= "integer" or value < low or value > high then
      raise(("%s: options.%s must be an integer from %d to %d, got %s"):format(
            what, key, low, high, quoted(value)))
    end
    return value
  end
  local block = integer("block", 32, 1024, 256)
  if block % 32 ~= 0 then
    raise(("%s: options.block must be a multiple of 32, got %d"):format(what, block))
  end
  local preamble = rawget(given, "preamble") or ""
  if type(preamble) ~= "string" then
    raise(what .. ": options.preamble must be a string")
  end
  local cache = rawget(given, "cache") or "default"
  if cache ~= "default" and cache ~= "streaming" then
    raise(("%s: options.cache must be \"default\" or \"streaming\", got %s"):format(what, quoted(cache)))
  end
  return {
    block = block,
    unroll = integer("unroll", 1, 8, defaults and defaults.unroll or 1),
    blocks_per_sm = integer("blocks_per_sm", 1, 64, nil),
    preamble = preamble,
    cache = cache,
  }
end

return kernel_options
