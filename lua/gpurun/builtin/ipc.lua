-- gpurun.ipc: one message between two processes over a Unix-domain
-- socket, carrying strings (descriptors of buffers and events, or any
-- bytes) and memory pools, whose handles are file descriptors and travel
-- as SCM_RIGHTS. The receiver listens at the path; the sender connects,
-- sends and waits for the receiver's confirmation. Every wait ends at the
-- timeout. The socket itself is C's (types/ipc.c, base/ipc_socket.c);
-- here are the checks, the message's layout and the import of pools.
--
-- A part of the `gpurun` module (see program_options.lua for the protocol).
return function(internal)
  local core = package.loaded["gpurun.ipc_core"] -- types/ipc.c, opened before the Lua parts
  local raise, type_name = internal.raise, internal.type_name

  local MAGIC, VERSION = "gpurunMS", 1
  local DEFAULT_TIMEOUT = 30          -- seconds
  local MAX_TIMEOUT = 24 * 3600
  local DEFAULT_MAX_BYTES = 16 << 20  -- a message's largest size that receive takes
  local MAX_VALUES = 4096

  local function tagged(value, name)
    local meta = getmetatable(value)
    return type(value) == "userdata" and meta ~= nil and meta.__name == name
  end

  local function check_path(name, path)
    if type(path) ~= "string" or path == "" then
      raise(("bad argument #1 to '%s' (socket path (a non-empty string) expected, got %s)")
        :format(name, path == "" and "an empty string" or type_name(1, path)))
    end
    if path:find("\0", 1, true) then
      raise(("bad argument #1 to '%s' (socket path contains a NUL byte)"):format(name))
    end
  end

  -- The options table at position: timeout (seconds) and the keys in known.
  local function check_options(name, position, options, known)
    if options == nil then return {} end
    if type(options) ~= "table" then
      raise(("bad argument #%d to '%s' (options table expected, got %s)")
        :format(position, name, type_name(1, options)))
    end
    for key in next, options do
      if not known[key] then
        local names = {}
        for k in pairs(known) do names[#names + 1] = k end
        table.sort(names)
        raise(("bad argument #%d to '%s' (unknown option '%s' (known: %s))")
          :format(position, name, tostring(key), table.concat(names, ", ")))
      end
    end
    local timeout = rawget(options, "timeout")
    if timeout ~= nil and (type(timeout) ~= "number" or timeout ~= timeout or timeout <= 0
        or timeout > MAX_TIMEOUT) then
      raise(("bad argument #%d to '%s' (option 'timeout' must be a number of seconds above 0 "
        .. "and at most %d, got %s)"):format(position, name, MAX_TIMEOUT,
          type(timeout) == "number" and tostring(timeout) or type_name(1, timeout)))
    end
    return options
  end

  local ipc = {}

  -- send(socket_path, values [, { timeout = 30 }]): values is a sequence of
  -- strings, gpurun.MemoryPool objects made with ipc = true (exported here)
  -- and gpurun.IPCAllocationHandle objects.
  function ipc.send(socket_path, values, options)
    local name = "gpurun.ipc.send"
    check_path(name, socket_path)
    if type(values) ~= "table" then
      raise(("bad argument #2 to '%s' (sequence of strings, pools and allocation handles "
        .. "expected, got %s)"):format(name, type_name(1, values)))
    end
    options = check_options(name, 3, options, { timeout = true })
    local count = rawlen(values)
    if count > MAX_VALUES then
      raise(("bad argument #2 to '%s' (at most %d values a message, got %d)")
        :format(name, MAX_VALUES, count))
    end
    local parts, handles, exported = { MAGIC, string.pack("<I2I4", VERSION, count) }, {}, {}
    local ok, why = pcall(function()
      for i = 1, count do
        local value = rawget(values, i)
        if type(value) == "string" then
          parts[#parts + 1] = "S" .. string.pack("<s4", value)
        elseif tagged(value, "gpurun.MemoryPool") or tagged(value, "gpurun.IPCAllocationHandle") then
          local handle = value
          if tagged(value, "gpurun.MemoryPool") then
            handle = value:get_allocation_handle()
            exported[#exported + 1] = handle
          end
          local descriptor = handle.descriptor
          if type(descriptor) ~= "string" then
            error(("bad argument #2 to '%s' (value %d: the allocation handle carries no "
              .. "descriptor)"):format(name, i), 0)
          end
          handles[#handles + 1] = handle
          parts[#parts + 1] = "P" .. string.pack("<s4", descriptor)
        else
          error(("bad argument #2 to '%s' (value %d: string, gpurun.MemoryPool or "
            .. "gpurun.IPCAllocationHandle expected, got %s)"):format(name, i,
              type_name(1, value)), 0)
        end
      end
      core.send(socket_path, table.concat(parts), rawget(options, "timeout") or DEFAULT_TIMEOUT, handles)
    end)
    for _, handle in ipairs(exported) do handle:close() end
    if not ok then raise(tostring(why)) end
  end

  -- Reads the message's values: strings, and for each pool its descriptor
  -- with the next handle. Raises for anything that is not such a message.
  local function parse(bytes, handles)
    local function bad(why)
      error("gpurun.ipc.receive: not a gpurun.ipc message: " .. why, 0)
    end
    if #bytes < 14 or bytes:sub(1, 8) ~= MAGIC then bad("no magic") end
    local version, count = string.unpack("<I2I4", bytes, 9)
    if version ~= VERSION then
      bad(("version %d, this gpurun reads version %d"):format(version, VERSION))
    end
    if count > MAX_VALUES then bad(("%d values"):format(count)) end
    local values, position, next_handle = {}, 15, 1
    for i = 1, count do
      if position + 4 > #bytes then bad(("truncated at value %d"):format(i)) end
      local kind = bytes:sub(position, position)
      local length = string.unpack("<I4", bytes, position + 1)
      if length > #bytes - position - 4 then bad(("value %d runs past the end"):format(i)) end
      local value = bytes:sub(position + 5, position + 4 + length)
      position = position + 5 + length
      if kind == "S" then
        values[i] = value
      elseif kind == "P" then
        local handle = handles[next_handle]
        if handle == nil then bad(("value %d is a pool with no file descriptor"):format(i)) end
        next_handle = next_handle + 1
        values[i] = { handle = handle, descriptor = value }
      else
        bad(("value %d has kind %q"):format(i, kind))
      end
    end
    if position ~= #bytes + 1 then bad("trailing bytes") end
    if next_handle ~= #handles + 1 then
      bad(("%d file descriptor(s) for %d pool(s)"):format(#handles, next_handle - 1))
    end
    return values, count
  end

  -- receive(socket_path [, { timeout = 30, import = true, max_bytes = 16 MiB }])
  -- -> the sequence sent: strings as they were, pools imported as
  -- gpurun.MemoryPool (with import = false, gpurun.IPCAllocationHandle
  -- objects, whose descriptor field holds the pool's descriptor).
  function ipc.receive(socket_path, options)
    local name = "gpurun.ipc.receive"
    check_path(name, socket_path)
    options = check_options(name, 2, options, { timeout = true, import = true, max_bytes = true })
    local import = rawget(options, "import")
    if import ~= nil and type(import) ~= "boolean" then
      raise(("bad argument #2 to '%s' (option 'import' must be a boolean, got %s)")
        :format(name, type_name(1, import)))
    end
    local max_bytes = rawget(options, "max_bytes") or DEFAULT_MAX_BYTES
    if math.type(max_bytes) ~= "integer" or max_bytes < 14 or max_bytes > 0xffffffff then
      raise(("bad argument #2 to '%s' (option 'max_bytes' must be an integer from 14 to "
        .. "4294967295, got %s)"):format(name, tostring(max_bytes)))
    end
    local bytes, handles = core.receive(socket_path, rawget(options, "timeout") or DEFAULT_TIMEOUT, max_bytes)
    local ok, values, count = pcall(parse, bytes, handles)
    if not ok then
      for _, handle in ipairs(handles) do handle:close() end
      raise(tostring(values))
    end
    local gpurun = package.loaded.gpurun
    local imported, why = pcall(function()
      for i = 1, count do
        local value = values[i]
        if type(value) == "table" then
          if import == false then
            values[i] = gpurun.IPCAllocationHandle(value.handle.fd, value.descriptor)
          else
            values[i] = gpurun.MemoryPool.from_allocation_handle(value.handle, value.descriptor)
          end
        end
      end
    end)
    for _, handle in ipairs(handles) do handle:close() end
    if not imported then raise(tostring(why)) end
    return values
  end

  return { ipc = internal.guard(ipc) }
end
