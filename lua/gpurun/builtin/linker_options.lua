-- gpurun.LinkerOptions: a read-only, validated set of nvJitLink options
-- with cuda.core's field names, and the options a link actually passes
-- (the current device's arch when none is named, -ptx for a link to PTX).
-- The object and its checks are ProgramOptions' (program_options.lua's
-- options_type); nvJitLink itself is called from C (Linker:link).
--
-- A part of the `gpurun` module, opened after program_options (see that
-- file for what the module opener gives it and takes from it).

return function(internal)
  local raise = internal.raise
  local from = debug.getregistry()["gpurun.ProgramOptions"].builtin
  local PREFIX = "gpurun.LinkerOptions: "
  local checks = from.helpers(PREFIX)
  local bad, flag, string_list = checks.bad, checks.flag, checks.string_list

  -- cuda.core's LinkerOptions fields, in the order their options are
  -- listed (name is only the linked ObjectCode's name).
  local KEYS = { "name", "arch", "max_register_count", "time", "verbose", "link_time_optimization",
                 "optimization_level", "debug", "lineinfo", "ftz", "prec_div", "prec_sqrt", "fma",
                 "kernels_used", "variables_used", "optimize_unused_variables", "ptxas_options",
                 "split_compile", "no_cache" }

  local readers = {}

  function readers.name(value)
    if type(value) ~= "string" or value == "" or value:find("\0", 1, true) then
      bad("name", "a non-empty string without NUL bytes", value)
    end
    return value
  end

  function readers.arch(value, list)
    local arch = from.read_arch(bad, value)
    list[#list + 1] = "-arch=" .. arch
    return arch
  end

  local integer = checks.integer
  readers.max_register_count = integer("max_register_count", "-maxrregcount=", 1, 255)
  readers.split_compile = integer("split_compile", "-split-compile=", 0, 1024)

  function readers.optimization_level(value, list)
    if value ~= 0 and value ~= 3 then bad("optimization_level", "0 or 3 (what nvJitLink accepts)", value) end
    list[#list + 1] = "-O" .. math.tointeger(value)
    return math.tointeger(value)
  end

  -- Each key's nvJitLink option, by how its value becomes one: a flag
  -- passes its option when true; a switch says true or false ("-ftz=1" /
  -- "-ftz=0"); a list passes its option once per string.
  local FLAGS = { time = "-time", verbose = "-verbose", link_time_optimization = "-lto", debug = "-g",
                  lineinfo = "-lineinfo", optimize_unused_variables = "-optimize-unused-variables",
                  no_cache = "-no-cache" }
  local SWITCHES = { ftz = "-ftz=", prec_div = "-prec-div=", prec_sqrt = "-prec-sqrt=", fma = "-fma=" }
  local LISTS = { kernels_used = "-kernels-used=", variables_used = "-variables-used=",
                  ptxas_options = "-Xptxas=" }

  local function switch(key, option)
    return function(value, list)
      if type(value) ~= "boolean" then bad(key, "a boolean", value) end
      list[#list + 1] = option .. (value and "1" or "0")
      return value
    end
  end

  for key, option in pairs(FLAGS) do readers[key] = flag(key, option) end
  for key, option in pairs(SWITCHES) do readers[key] = switch(key, option) end
  for key, option in pairs(LISTS) do readers[key] = string_list(key, option) end

  local new, LinkerOptions, open_state, coerce = from.options_type("LinkerOptions", KEYS, readers)
  local builtin = LinkerOptions.builtin
  builtin.coerce = coerce

  -- The options a link to `target` ("cubin" or "ptx") passes: the
  -- LinkerOptions' own, with -arch=sm_<device_arch> when they name none,
  -- and -ptx for PTX, which nvJitLink makes only with link-time
  -- optimization. Also the linked code's name (the options' `name`, else
  -- `default_name`).
  function builtin.link_options(options, target, device_arch, default_name)
    local held = open_state(options)
    local list = {}
    for i, option in ipairs(held.list) do list[i] = option end
    if not held.fields.arch then
      if not device_arch then
        raise("a link needs an arch: give LinkerOptions{arch=...} or make a device current")
      end
      table.insert(list, 1, "-arch=sm_" .. device_arch)
    end
    local arch = held.fields.arch
    if target == "cubin" and arch and arch:find("compute_", 1, true) then
      raise(("a cubin needs a real architecture: %s makes only PTX; use sm_XX"):format(arch))
    end
    if target == "ptx" then
      if not held.fields.link_time_optimization then
        raise('link("ptx") needs link_time_optimization = true: nvJitLink makes PTX only from a '
          .. "link-time optimized link")
      end
      list[#list + 1] = "-ptx"
    end
    return list, held.fields.name or default_name
  end

  return { LinkerOptions = new, metatable = LinkerOptions }
end
