-- Objects that pretend: the fuzzer's object-faking strategies. Each is a
-- plain table whose metatable lies or bites, passed where gpurun expects
-- one of its objects (or anything else): gpurun must refuse it with its own
-- one-line message, never run into it (index it, concatenate what it
-- holds, call its __tostring) and fail inside.
--
--   local fakes = require("spec.support.fake_objects")
--   for _, strategy in ipairs(fakes.STRATEGIES) do
--     local value = strategy.make("Buffer") -- pretends to be a gpurun.Buffer
--   end
local fakes = {}

local function raising()
  error("fake object: its __index raised", 2)
end

local function table_string()
  return {}
end

-- { name, make(type_name) -> value }: type_name is the gpurun type the
-- value claims to be ("Buffer"), or nil for one that claims nothing.
fakes.STRATEGIES = {
  { name = "lying __name", make = function(type_name)
      return setmetatable({}, { __name = "gpurun." .. (type_name or "Buffer") })
    end },
  { name = "raising __index", make = function()
      return setmetatable({}, { __index = raising })
    end },
  { name = "lying __name, raising __index", make = function(type_name)
      return setmetatable({}, { __name = "gpurun." .. (type_name or "Buffer"), __index = raising })
    end },
  { name = "__tostring returning a table", make = function()
      return setmetatable({}, { __tostring = table_string })
    end },
  { name = "lying __name, __tostring returning a table", make = function(type_name)
      return setmetatable({}, { __name = "gpurun." .. (type_name or "Buffer"), __tostring = table_string })
    end },
  { name = "all three", make = function(type_name)
      return setmetatable({}, { __name = "gpurun." .. (type_name or "Buffer"), __index = raising,
                                __tostring = table_string, __len = raising })
    end },
  { name = "__name not a string", make = function()
      return setmetatable({}, { __name = {}, __tostring = table_string })
    end },
}

-- Lua's own errors from inside gpurun, or the fake's own error let
-- through: { pattern, what it means }.
fakes.INTERNAL = {
  { "attempt to ", "an internal Lua error" },
  { "stack overflow", "a stack overflow" },
  { "'__tostring' must return a string", "the fake's __tostring called" },
  { "'__index' chain too long", "an __index loop" },
  { "table index is ", "a nil or NaN table key" },
  { "fake object: its __index raised", "the fake indexed" },
}

-- What else a gpurun message is not: { pattern, what it means }.
fakes.NOT_A_MESSAGE = {
  { "bad argument #%d+ to '%?'", "an argument error that names no function" },
  { "gpurun/[%w_/]+%.lua:%d+:", "an error raised at a line inside gpurun's Lua code" },
  { "%(null%)", "a NULL string" },
}

local function first_match(message, list)
  for _, entry in ipairs(list) do
    if message:find(entry[1]) then return entry[2] end
  end
  return nil
end

-- nil when `message` is not one of Lua's own errors from inside gpurun,
-- else which.
function fakes.internal(message)
  if type(message) ~= "string" then return "raised a " .. type(message) .. " instead of a message" end
  -- gpurun's own word for a closed object, not one of Lua's "attempt to".
  if message:find("attempt to use a closed gpurun%.%a+") then return nil end
  return first_match(message, fakes.INTERNAL)
end

-- nil when `message` is a one-line gpurun message, else why not.
function fakes.problem(message)
  local internal = fakes.internal(message)
  if internal then return internal end
  if message == "" then return "raised an empty message" end
  -- An NVRTC failure carries the compile log, line by line (DESIGN.md's
  -- errors); every other message is one line.
  if message:find("\n", 1, true) and not message:find("^NVRTC compile of ") then
    return "a message of more than one line"
  end
  return first_match(message, fakes.NOT_A_MESSAGE)
end

-- The type names the kinds of api_catalog.lua's arguments stand for: what
-- a fake in that position claims to be.
fakes.CLAIMS = {
  device = "Device", stream = "Stream", event = "Event", buffer = "Buffer", config = "LaunchConfig",
  kernel = "Kernel", launch_target = "Stream", buffer_or_table = "Buffer", buffer_or_number = "Buffer",
  kernel_arg = "Buffer", builder = "GraphBuilder", condition = "Condition", event_or_builder = "Event",
  event_or_stream = "Stream", options = "ProgramOptions", pool = "MemoryPool", copy_source = "Buffer",
  copy_destination = "PinnedBuffer", host_source = "PinnedBuffer",
  pipeline_buffer = "Buffer", pipeline_data = "Buffer", pipeline_arg = "Buffer",
}

return fakes
