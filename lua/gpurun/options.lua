-- The one rule for option tables in Lua (C's is gpurun_check_options in
-- src/runtime/value.c, with the same words): every key must be one the
-- function knows, or the call is refused naming the key and the known ones,
-- so that a misspelt option (`iter = 10`) never passes for a default.
--
--   local options = require("gpurun.options")
--   options.check("bench.run", opts, { "iters", "warmup" })  -- raises on an unknown key
--   local why = options.unknown(opts, { "iters", "warmup" })  -- or nil
local options = {}

-- unknown(given, known) -> nil when every key of the table `given` is in the
-- sequence `known`, else "unknown option 'x' (known: a, b)". Keys are read
-- with next, so a proxy's __index never counts.
function options.unknown(given, known)
  for key in next, given do
    local found = false
    for _, name in ipairs(known) do
      if key == name then found = true; break end
    end
    if not found then
      local list = table.concat(known, ", ")
      if type(key) == "string" then return ("unknown option '%s' (known: %s)"):format(key, list) end
      return ("unknown option: a %s key (known: %s)"):format(type(key), list)
    end
  end
  return nil
end

-- check(caller, given, known [, level]) -> given: raises "caller: unknown
-- option ..." at `level` (default 3: the caller of the function that
-- checks). given may be nil; anything else but a table is refused too.
-- The library raises with check; the module's own Lua parts raise through
-- their internal.raise (which ends captures) with options.unknown's
-- message.
function options.check(caller, given, known, level)
  level = level or 3
  if given == nil then return given end
  if type(given) ~= "table" then
    error(("%s: options must be a table, got %s"):format(caller, type(given)), level)
  end
  local why = options.unknown(given, known)
  if why then error(caller .. ": " .. why, level) end
  return given
end

return options
