-- gpurun.fft (plan, fft, ifft, rfft, irfft, clear_cache) and the type
-- gpurun.FftPlan: the module's names for lua/gpurun/compute/fft.lua,
-- loaded on first use so that the module opens without it. A part of the
-- `gpurun` module (see program_options.lua for the protocol); the fft
-- table's functions are guarded here, so that their errors end any
-- capture in progress as every gpurun error does.
return function(internal)
  local NAME = "gpurun.FftPlan"

  local function library()
    return require("gpurun.compute.fft") -- lazy: the module opens without it
  end

  -- The object is an empty proxy; its record (compute/fft.lua's) lives in the type.
  local plan_type = internal.proxy_type(NAME)
  local metatable, methods, record_of = plan_type.metatable, plan_type.methods, plan_type.record_of
  local FIELDS = { kind = true, dtype = true, batch = true, device = true, work_size = true }

  -- plan:execute(input, output [, { direction =, stream = }]) -> output
  function methods.execute(...)
    local record = plan_type.open_record("execute", select("#", ...), ...)
    return library().execute(record, select(2, ...))
  end

  -- close() releases the plan and its work area, refused while a graph
  -- that captured a transform of it lives.
  local function close(record)
    if not record.closed then
      library().close(record)
      record.closed = true
    end
  end
  function methods.close(...)
    close(record_of("close", select("#", ...), ...))
  end

  function metatable.__index(...)
    local record = record_of("__index", select("#", ...), ...)
    local key = select(2, ...)
    local method = methods[key]
    if method then return method end
    if key == "shape" then return table.move(record.shape, 1, #record.shape, 1, {}) end
    if FIELDS[key] then return record[key] end
    return nil
  end
  function metatable.__close(...)
    close(record_of("__close", select("#", ...), ...))
  end
  function metatable.__tostring(...)
    local record = record_of("__tostring", select("#", ...), ...)
    if record.closed then return NAME .. "(closed)" end
    local shape = table.concat(record.shape, ", ")
    return ("%s(%s, %s, shape (%s), batch %d, device %d)"):format(NAME, record.kind, record.dtype,
      shape, record.batch, record.device)
  end

  local fft = {}
  -- plan(shape [, { kind =, dtype =, batch =, stream = }]) -> FftPlan
  function fft.plan(...)
    return plan_type.new(library().plan(...))
  end
  function fft.fft(...) return library().fft(...) end
  function fft.ifft(...) return library().ifft(...) end
  function fft.rfft(...) return library().rfft(...) end
  function fft.irfft(...) return library().irfft(...) end
  function fft.clear_cache(...) return library().clear_cache(...) end
  internal.guard(fft)

  return { fft = fft, metatable = metatable }
end
