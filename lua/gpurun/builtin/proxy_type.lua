-- The types that gpurun's Lua parts make (gpurun.FftPlan,
-- gpurun.DeviceGenerator, gpurun.ProgramOptions): each object an empty table whose record lives
-- here, with one wording for a bad self and for a closed object. Every
-- part gets it as internal.proxy_type (module/lua_parts.c).
return function(internal)
  local raise, type_name = internal.raise, internal.type_name

  -- proxy_type(name) -> { metatable = { __name = name, methods = methods },
  --   methods = {}, new(record) -> object, owns(value) -> boolean,
  --   record_of(method, count, self), open_record(method, count, self) }:
  --   record_of and open_record take a method's name, its select("#", ...)
  --   and self, and raise as gpurun's C types do; open_record also refuses
  --   a closed record.
  local function proxy_type(name)
    local short = name:match("^gpurun%.(.+)$") or name
    local records = setmetatable({}, { __mode = "k" })
    local methods = {}
    local metatable = { __name = name, methods = methods }
    local proxy = { metatable = metatable, methods = methods }

    function proxy.record_of(method, count, self)
      local record = records[self]
      if record == nil then
        local got = type_name(count, self)
        if method:sub(1, 2) == "__" then
          raise(("bad argument #1 to '%s.%s' (%s expected, got %s)"):format(short, method, name, got))
        end
        raise(("calling '%s:%s' on bad self (%s expected, got %s)"):format(short, method, name, got))
      end
      return record
    end

    function proxy.open_record(method, count, self)
      local record = proxy.record_of(method, count, self)
      if record.closed then raise("attempt to use a closed " .. name) end
      return record
    end

    -- Whether value is an object this type made (a table given its
    -- metatable by hand is not).
    function proxy.owns(value)
      return records[value] ~= nil
    end

    function proxy.new(record)
      local object = setmetatable({}, metatable)
      records[object] = record
      return object
    end

    return proxy
  end

  return { proxy_type = proxy_type }
end
