-- gpurun.load(path) and Buffer:save(path [, shape]): buffers in and out of
-- NumPy .npy files. The header is gpurun.npy's (policy, in Lua); the data
-- moves between the file and the buffer in C, through page-locked staging
-- in chunks (Buffer:copy_from(file), Buffer:copy_to(file)), so a file of
-- any size is never a Lua string.
--
-- A part of the `gpurun` module (see program_options.lua for the protocol):
-- it adds gpurun.load, and Buffer:save through `methods`.

return function(internal)
  local raise = internal.raise
  -- The header logic is the Lua library's, loaded on first use (lazy:
  -- the module opens without the Lua library's files).
  local npy_module
  local function npy()
    npy_module = npy_module or require("gpurun.io.npy") -- lazy: see above
    return npy_module
  end

  local type_name = internal.type_name

  local function check_path(caller, arg, count, path)
    if type(path) ~= "string" then
      raise(("bad argument #%d to '%s' (path string expected, got %s)")
        :format(arg, caller, type_name(count, path)))
    end
    if path:find("\0", 1, true) then
      raise(("bad argument #%d to '%s' (path contains a NUL byte)"):format(arg, caller))
    end
  end

  local function copy(shape)
    local result = {}
    for i, n in ipairs(shape) do result[i] = n end
    return result
  end

  -- load(path) -> Buffer, shape: the array of a .npy file, on the current
  -- device; shape is the file's (a sequence of dimensions, {} for a scalar).
  -- A file that cannot seek (a pipe, a FIFO, /dev/stdin) is read as a
  -- stream: its header, then the array's bytes.
  local function load(...)
    local path = ...
    check_path("gpurun.load", 1, select("#", ...), path)
    local file <close>, why = io.open(path, "rb")
    if not file then raise("gpurun.load: cannot open " .. why) end
    local info, problem = npy().read_header(file)
    if not info then raise(("gpurun.load: %s: %s"):format(path, problem)) end
    if info.count == 0 then
      raise(("gpurun.load: %s holds no elements (shape %s): a gpurun.Buffer holds at least one")
        :format(path, "{" .. table.concat(info.shape, ", ") .. "}"))
    end
    local data_start = file:seek()
    if data_start then -- a file it can seek in: its size is known before allocating
      local data_bytes = file:seek("end") - data_start
      local short = npy().data_problem(info, data_bytes)
      if short then raise(("gpurun.load: %s is %s"):format(path, short)) end
      file:seek("set", data_start)
    end
    local gpurun = require("gpurun") -- lazy: the module is opening when its parts load
    local buffer = gpurun.empty(info.count, info.dtype)
    local ok, err = pcall(buffer.copy_from, buffer, file)
    if not ok then
      buffer:close()
      local got = tostring(err):match("it ended after (%d+) of %d+ bytes")
      if got then -- a stream shorter than its header says
        raise(("gpurun.load: %s is %s"):format(path, npy().data_problem(info, math.tointeger(got))))
      end
      error(err, 0) -- raised as gpurun raises (the captures ended)
    end
    return buffer, copy(info.shape)
  end

  local buffer_metatable = debug.getregistry()["gpurun.Buffer"]

  -- buffer:save(path [, shape]) -> self: writes the buffer as a .npy file
  -- (shape: its dimensions, C order, default { #buffer }).
  local function save(...)
    local buffer, path, shape = ...
    local count = select("#", ...)
    if getmetatable(buffer) ~= buffer_metatable then
      raise(("calling 'Buffer:save' on bad self (gpurun.Buffer expected, got %s)")
        :format(type_name(count, buffer)))
    end
    local size, dtype = buffer.size, buffer.dtype -- a closed buffer raises here
    check_path("Buffer:save", 1, count - 1, path)
    if shape == nil then
      shape = { size }
    elseif type(shape) ~= "table" then
      raise(("bad argument #2 to 'Buffer:save' (shape table expected, got %s)"):format(type_name(1, shape)))
    end
    local elements, bad = npy().count(shape)
    if not elements then raise(("bad argument #2 to 'Buffer:save' (%s)"):format(bad)) end
    if elements ~= size then
      raise(("bad argument #2 to 'Buffer:save' (shape {%s} holds %d elements, the buffer %d)")
        :format(table.concat(shape, ", "), elements, size))
    end
    local no_descr = select(2, npy().descr(dtype))
    if no_descr then raise("Buffer:save: " .. no_descr) end -- a dtype NumPy lacks
    local header, too_long = npy().header(dtype, shape)
    if not header then raise(("bad argument #2 to 'Buffer:save' (%s)"):format(too_long)) end
    local file, why = io.open(path, "wb")
    if not file then raise("Buffer:save: cannot open " .. why) end
    local written, err = pcall(function()
      local ok, failure = file:write(header)
      if not ok then raise(("Buffer:save: writing %s failed: %s"):format(path, failure)) end
      buffer:copy_to(file)
    end)
    file:close()
    if not written then
      os.remove(path) -- no half-written file left behind
      error(err, 0) -- already raised as gpurun raises (the captures ended)
    end
    return buffer
  end

  return { load = load, methods = { Buffer = { save = save } } }
end
