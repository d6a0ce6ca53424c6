-- gpurun.device_rng and gpurun.DeviceGenerator: a counter-based generator
-- (Philox4x32-10) whose state lives on the device, so that fills captured
-- into a graph draw new numbers at each replay. The fills and the state's
-- policy are lua/gpurun/compute/random.lua's, loaded on first use so that
-- the module opens without it. A part of the `gpurun` module (see
-- program_options.lua for the protocol).
return function(internal)
  local NAME = "gpurun.DeviceGenerator"

  -- Looked up at each call, not kept: a spec's emulated GPU swaps the
  -- compute modules for its own while it runs (spec/support/emulated_gpu.lua).
  local function library()
    return require("gpurun.compute.random") -- lazy: the module opens without it
  end

  -- The object is an empty proxy; its record (compute/random.lua's) lives in the type.
  local generator_type = internal.proxy_type(NAME)
  local metatable, methods = generator_type.metatable, generator_type.methods
  local record_of, open_record = generator_type.record_of, generator_type.open_record

  -- gen:random(out_or_n [, dtype] [, options]) and the others: see docs/random.md.
  function methods.random(...)
    return library().random(open_record("random", select("#", ...), ...), select(2, ...))
  end
  function methods.uniform(...)
    return library().uniform(open_record("uniform", select("#", ...), ...), select(2, ...))
  end
  function methods.normal(...)
    return library().normal(open_record("normal", select("#", ...), ...), select(2, ...))
  end
  function methods.integers(...)
    return library().integers(open_record("integers", select("#", ...), ...), select(2, ...))
  end
  function methods.set_state(...)
    library().set_state(open_record("set_state", select("#", ...), ...), select(2, ...))
  end
  function methods.get_state(...)
    return library().get_state(open_record("get_state", select("#", ...), ...), select(2, ...))
  end

  -- close() frees the state, refused (as the state buffer's close is)
  -- while a graph that captured a fill uses it.
  local function close(record)
    if not record.closed then
      record.state:close()
      record.closed = true
    end
  end
  function methods.close(...)
    close(record_of("close", select("#", ...), ...))
  end

  metatable.__index = methods
  function metatable.__close(...)
    close(record_of("__close", select("#", ...), ...))
  end
  function metatable.__tostring(...)
    local record = record_of("__tostring", select("#", ...), ...)
    if record.closed then return NAME .. "(closed)" end
    return ("%s(Philox4x32-10, device %d)"):format(NAME, record.device)
  end

  -- device_rng(seed) -> a DeviceGenerator on the current device, at offset 0.
  local function device_rng(...)
    return generator_type.new(library().new(...))
  end

  return { device_rng = device_rng, metatable = metatable }
end
