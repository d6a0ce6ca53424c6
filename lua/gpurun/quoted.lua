-- How a message shows a value the user gave: the one home for it, so that
-- no message repeats a huge input, breaks its line, or runs the value's
-- metamethods (a __tostring that raises or returns a table).
--
--   local quoted = require("gpurun.quoted")
--   quoted("12abc")                  --> '12abc'
--   quoted("a\nb")                   --> 'a\x0Ab'
--   quoted(("7"):rep(100000))        --> '7777...7777' (100000 bytes)
--   quoted(2.5), quoted(nil)         --> 2.5, nil
--   quoted(setmetatable({}, mt))     --> a table
local MAX_BYTES = 60
local HEAD_BYTES, TAIL_BYTES = 40, 12

-- Bytes that are not printable ASCII, as \xNN: one line, and no cut
-- through a UTF-8 sequence at the cap.
local function escaped(text)
  return (text:gsub("[^\32-\126]", function(c) return ("\\x%02X"):format(c:byte()) end))
end

return function(value)
  local kind = type(value)
  if kind == "string" then
    if #value <= MAX_BYTES then return "'" .. escaped(value) .. "'" end
    return ("'%s...%s' (%d bytes)"):format(escaped(value:sub(1, HEAD_BYTES)),
                                          escaped(value:sub(-TAIL_BYTES)), #value)
  elseif kind == "number" then
    if math.type(value) == "integer" then return ("%d"):format(value) end
    return ("%.14g"):format(value)
  elseif kind == "nil" or kind == "boolean" then
    return kind == "nil" and "nil" or (value and "true" or "false")
  end
  return "a " .. kind
end
