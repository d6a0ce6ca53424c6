-- gpurun.guard: the capture rule for Lua code outside the module. The
-- module guards its own Lua parts (lua_parts.c: every function a part
-- exports, every method it adds); Lua libraries that scripts call while a
-- builder captures (gpurun.dist, gpurun.bench, a script's own) use this.
-- A part of the `gpurun` module (see program_options.lua for the protocol).
return function(internal)
  --   guard(f) -> f guarded: an error raised by f (any error, a plain error()
  --     or one Lua raises) ends every capture in progress on its way out,
  --     message and position unchanged, as every gpurun error does;
  --   guard(t) -> t, every Lua function of t guarded in place (C functions
  --     are left as they are: they raise through the rule already).
  local function guard(...)
    local target = ...
    if type(target) ~= "function" and type(target) ~= "table" then
      internal.raise(("bad argument #1 to 'gpurun.guard' (function or table expected, got %s)")
        :format(internal.type_name(select("#", ...), target)))
    end
    return internal.guard(target)
  end
  return { guard = guard }
end
