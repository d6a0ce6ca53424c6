-- gpurun.ProgramOptions: a read-only, validated set of NVRTC options, and
-- the options a compile actually passes (the default arch). Validation is
-- policy, so it is Lua; NVRTC itself is called from C (Program:compile),
-- which takes the finished list of option strings from here.
--
-- A part of the `gpurun` module: the opener calls the function it returns,
-- once per Lua state, with the internals (raise, which ends any capture in
-- progress as every gpurun error does; type_name(count, value); guard;
-- proxy_type, proxy_type.lua's), and installs what it returns.

return function(internal)
  local raise = internal.raise

  -- The keys, in the order their NVRTC options appear in as_list(). The
  -- option strings are built once, in this fixed order, so that equal
  -- options always give the same list, and so the same kernel cache key.
  local KEYS = { "std", "arch", "defines", "include_paths", "line_info", "debug",
                 "use_fast_math", "max_register_count", "relocatable_device_code",
                 "link_time_optimization", "extra" }

  local PREFIX = "gpurun.ProgramOptions: "

  -- The checks every options type's readers share, raising with `prefix`
  -- ("gpurun.ProgramOptions: "): bad(key, expected, value),
  -- refuse_nul(value, what), and makers of readers for flags and for
  -- strings or lists of strings.
  local function helpers(prefix)
    -- The value a message shows: strings quoted, everything else by its type.
    local function shown(value)
      if type(value) == "string" then return '"' .. value .. '"' end
      return type(value)
    end

    local function bad(key, expected, value)
      raise(("%s'%s' must be %s, got %s"):format(prefix, key, expected, shown(value)))
    end

    local function is_name(value)
      return type(value) == "string" and value ~= ""
    end

    -- NVRTC and nvJitLink take C strings: a NUL would silently cut the
    -- option short.
    local function refuse_nul(value, what)
      if type(value) == "string" and value:find("\0", 1, true) then
        raise(("%s%s contains a NUL byte, which would cut the option short"):format(prefix, what))
      end
    end

    -- A string or a list of strings, each becoming prefix .. string.
    local function string_list(key, option_prefix)
      return function(value, list)
        if type(value) == "string" then value = { value } end
        if type(value) ~= "table" then bad(key, "a string or a list of strings", value) end
        local copy = {}
        for i = 1, #value do
          local item = rawget(value, i)
          if not is_name(item) then
            raise(("%s'%s[%d]' must be a non-empty string, got %s")
              :format(prefix, key, i, type(item)))
          end
          refuse_nul(item, ("'%s[%d]'"):format(key, i))
          list[#list + 1] = option_prefix .. item
          copy[i] = item
        end
        return copy
      end
    end

    local function flag(key, option)
      return function(value, list)
        if type(value) ~= "boolean" then bad(key, "a boolean", value) end
        if value then list[#list + 1] = option end
        return value
      end
    end

    -- An integer from low to high, becoming option .. value.
    local function integer(key, option, low, high)
      return function(value, list)
        if math.type(value) ~= "integer" or value < low or value > high then
          bad(key, ("an integer from %d to %d"):format(low, high), value)
        end
        list[#list + 1] = option .. value
        return value
      end
    end

    return { bad = bad, is_name = is_name, refuse_nul = refuse_nul, string_list = string_list, flag = flag,
             integer = integer }
  end
  local checks = helpers(PREFIX)
  local bad, is_name, refuse_nul = checks.bad, checks.is_name, checks.refuse_nul
  local string_list, flag = checks.string_list, checks.flag

  -- Each reader takes the input value, appends options to `list` and returns
  -- the field's normalised value.
  local readers = {}

  function readers.std(value, list)
    if type(value) ~= "string" or not value:match("^c%+%+%d%d$") then
      bad("std", 'a C++ standard such as "c++17"', value)
    end
    list[#list + 1] = "--std=" .. value
    return value
  end

  -- "sm_90", "90" (meaning sm_90), "compute_90"; a letter suffix ("sm_90a") is
  -- kept. An integer 90 is read as "90". nil for anything else.
  local function parse_arch(value)
    if math.type(value) == "integer" then value = tostring(value) end
    local text = type(value) == "string" and value or ""
    local prefix, digits = text:match("^(sm_)(%d%d+%l?)$")
    if not prefix then prefix, digits = text:match("^(compute_)(%d%d+%l?)$") end
    if not prefix and text:match("^%d%d+%l?$") then prefix, digits = "sm_", text end
    return prefix and prefix .. digits
  end
  -- The arch `value` names, or bad("arch", ...) (a type's own `bad`).
  local function read_arch(type_bad, value)
    local arch = parse_arch(value)
    if not arch then
      if math.type(value) == "integer" then value = tostring(value) end
      type_bad("arch", 'an architecture such as "sm_90", "90" or "compute_90"', value)
    end
    return arch
  end

  function readers.arch(value, list)
    local arch = read_arch(bad, value)
    list[#list + 1] = "--gpu-architecture=" .. arch
    return arch
  end

  -- {"NAME", "NAME=1", ...} and/or {NAME = "value" | number | true}: the list
  -- first, in order, then the named ones sorted, so that the options never
  -- depend on table iteration order.
  function readers.defines(value, list)
    if type(value) ~= "table" then
      bad("defines", "a table of macro names or NAME = value pairs", value)
    end
    local copy, names = {}, {}
    local length = #value
    for i = 1, length do
      local name = rawget(value, i)
      if not is_name(name) then
        raise(("%s'defines[%d]' must be a macro name (a non-empty string), got %s")
          :format(PREFIX, i, type(name)))
      end
      refuse_nul(name, ("'defines[%d]'"):format(i))
      list[#list + 1] = "-D" .. name
      copy[i] = name
    end
    for key in next, value do
      if type(key) == "string" then
        names[#names + 1] = key
      elseif not (math.type(key) == "integer" and key >= 1 and key <= length) then
        raise(("%s'defines' keys must be macro names or list positions, got %s key")
          :format(PREFIX, type(key)))
      end
    end
    table.sort(names)
    for _, name in ipairs(names) do
      refuse_nul(name, "a name in 'defines'")
      if name == "" or name:find("=", 1, true) then
        raise(("%s'defines' has a bad macro name '%s'"):format(PREFIX, name))
      end
      local setting = rawget(value, name)
      refuse_nul(setting, ("'defines.%s'"):format(name))
      if setting == true then
        list[#list + 1] = "-D" .. name
      elseif type(setting) == "string" or type(setting) == "number" then
        list[#list + 1] = "-D" .. name .. "=" .. tostring(setting)
      else
        raise(("%s'defines.%s' must be a string, a number or true, got %s")
          :format(PREFIX, name, type(setting)))
      end
      copy[name] = setting
    end
    return copy
  end

  readers.include_paths = string_list("include_paths", "--include-path=")
  readers.extra = string_list("extra", "")

  readers.line_info = flag("line_info", "--generate-line-info")
  readers.debug = flag("debug", "--device-debug")
  readers.use_fast_math = flag("use_fast_math", "--use_fast_math")
  readers.relocatable_device_code = flag("relocatable_device_code",
                                         "--relocatable-device-code=true")
  local LTO_OPTION = "--dlink-time-opt"
  readers.link_time_optimization = flag("link_time_optimization", LTO_OPTION)

  readers.max_register_count = checks.integer("max_register_count", "--maxrregcount=", 1, 255)

  -- What a message calls a value: its type's __name, or its Lua type.
  local type_name = internal.type_name

  local function copy(t)
    local result = {}
    for key, value in next, t do result[key] = value end
    return result
  end

  -- A read-only options type written in Lua ("ProgramOptions",
  -- "LinkerOptions"): Type{...} checks a table against `keys` (in the order
  -- their option strings are listed) with readers[key](value, list), which
  -- appends the key's option strings to `list` and returns the field's
  -- value. Returns new, the metatable (its `builtin` table for C and the
  -- module's other parts to fill), open_state(options) -> what it holds,
  -- and coerce(value, arg, caller): nil, a table or an open object of the
  -- type, as a constructor's argument `arg` takes them.
  local function options_type(short, keys, type_readers)
    local full = "gpurun." .. short
    local prefix = full .. ": "
    -- The object is an empty proxy; what it holds lives in the type, out of reach.
    local proxy = internal.proxy_type(full)
    local metatable, methods = proxy.metatable, proxy.methods

    local function open_state(options)
      return proxy.open_record("__index", 1, options)
    end

    -- as_list() -> the option strings, in order (a fresh table).
    function methods.as_list(...)
      return copy(proxy.open_record("as_list", select("#", ...), ...).list)
    end

    function methods.close(...)
      proxy.record_of("close", select("#", ...), ...).closed = true
    end

    function metatable.__index(...)
      local options, key = ...
      local method = methods[key]
      if method then return method end
      local value = proxy.open_record("__index", select("#", ...), options).fields[key]
      if type(value) == "table" then return copy(value) end -- fields are read-only
      return value
    end

    function metatable.__newindex()
      raise(full .. " is read-only: make a new one with the options you want")
    end

    function metatable.__tostring(...)
      local held = proxy.record_of("__tostring", select("#", ...), ...)
      if held.closed then return full .. "(closed)" end
      return full .. "(" .. table.concat(held.list, " ") .. ")"
    end

    function metatable.__close(...)
      proxy.record_of("__close", select("#", ...), ...).closed = true
    end
    metatable.builtin = {}

    local function new(input)
      if input == nil then input = {} end
      if type(input) ~= "table" or getmetatable(input) == metatable then
        raise(("bad argument #1 to '%s' (table expected, got %s)"):format(full, type_name(1, input)))
      end
      -- lazy: the module opens without the Lua library's files
      local unknown = require("gpurun.options").unknown(input, keys)
      if unknown then raise(prefix .. unknown) end
      local list, fields = {}, {}
      for _, key in ipairs(keys) do
        local value = rawget(input, key)
        if value ~= nil then fields[key] = type_readers[key](value, list) end
      end
      return proxy.new({ list = list, fields = fields, closed = false })
    end

    -- An object of another gpurun type (a ProgramOptions for a
    -- LinkerOptions) is not a table of options, whatever it holds.
    local function foreign(value)
      local other = getmetatable(value)
      local name = type(other) == "table" and rawget(other, "__name")
      return other ~= metatable and type(name) == "string" and name:find("^gpurun%.") ~= nil
    end

    local function coerce(value, arg, caller)
      if value == nil or (type(value) == "table" and getmetatable(value) ~= metatable
          and not foreign(value)) then
        return new(value)
      end
      if getmetatable(value) ~= metatable then
        raise(("bad argument #%d to '%s' (%s or table expected, got %s)")
          :format(arg, caller, full, type_name(1, value)))
      end
      if not proxy.owns(value) then
        raise(("bad argument #%d to '%s' (%s expected, got a table given its metatable)")
          :format(arg, caller, full))
      end
      open_state(value)
      return value
    end

    return new, metatable, open_state, coerce
  end

  -- ProgramOptions{...} -> a read-only set of NVRTC options.
  local new, ProgramOptions, open_state, coerce = options_type("ProgramOptions", KEYS, readers)

  -- What Program() accepts as options: nil, a table of them, or a
  -- ProgramOptions (open); anything else is argument `arg` of `caller`.
  local builtin = ProgramOptions.builtin
  builtin.coerce = coerce

  -- For the module's other options types (linker_options.lua).
  builtin.options_type = options_type
  builtin.helpers = helpers
  builtin.read_arch = read_arch

  local function names_an_arch(option)
    return option:find("^%-%-gpu%-architecture") or option:find("^%-arch")
  end

  -- NVRTC repeats a diagnostic's whole source line with it, so a long line
  -- with a diagnostic every few bytes (nested "/*") grows the log with the
  -- square of its length: gigabytes and minutes for a 100 KB line. Past
  -- this length a line is no help to a reader anyway.
  local LONGEST_ECHOED_LINE = 512

  -- By the newlines' positions: no string per line, as every compile asks.
  local function has_long_line(source)
    local start = 1
    repeat
      local newline = source:find("\n", start, true)
      local stop = newline or #source + 1
      if stop - start > LONGEST_ECHOED_LINE then return true end
      start = stop + 1
    until not newline
    return false
  end

  -- The options a compile for `target` ("ptx", "cubin" or "ltoir") passes:
  -- the ProgramOptions' own, with the current device's arch ("90") added
  -- when they name none, -dlto for "ltoir" (and link_time_optimization
  -- refused for the others, where NVRTC would make nothing), --brief-diagnostics=true when the source has a line
  -- too long to repeat with each diagnostic (unless the options say
  -- otherwise), and the CUDA toolkit's include folder last, so that
  -- <cuda_device_runtime_api.h> (cudaGraphSetConditional,
  -- cudaGridDependencySynchronize) and the toolkit's other headers are found.
  function builtin.compile_options(options, target, device_arch, cuda_include_dir, source)
    local list = copy(open_state(options).list)
    local arch, brief, lto
    for _, option in ipairs(list) do
      if names_an_arch(option) then arch = option end
      if option:find("^%-%-?brief%-diag") then brief = option end
      if option == LTO_OPTION or option == "-dlto" then lto = option end
    end
    if lto and target ~= "ltoir" then
      raise(("link_time_optimization makes LTO-IR, not %s: compile(\"ltoir\") and link it with "
        .. "gpurun.Linker"):format(target))
    elseif target == "ltoir" and not lto then
      list[#list + 1] = LTO_OPTION
    end
    if not brief and source and has_long_line(source) then
      list[#list + 1] = "--brief-diagnostics=true"
    end
    if not arch and device_arch then
      list[#list + 1] = "--gpu-architecture=sm_" .. device_arch
    elseif not arch and target ~= "ptx" then
      raise(("%s needs an arch: give ProgramOptions{arch=...} or make a device current"):format(target))
    elseif arch and target ~= "ptx" and arch:find("compute_", 1, true) then
      raise(("%s needs a real architecture: %s makes only PTX; use sm_XX")
        :format(target, arch:match("=(.*)$") or arch))
    end
    if cuda_include_dir then
      list[#list + 1] = "--include-path=" .. cuda_include_dir
    end
    return list
  end

  -- The file name NVRTC's messages give a program compiled without a
  -- `name`: its first kernel's, "vec_add.cu", so that "vec_add.cu(3): error"
  -- points at code the user recognises; "gpurun_program.cu" when the source
  -- has no __global__ function. Attributes written like calls
  -- (__launch_bounds__(64)) are stepped over.
  function builtin.default_name(source)
    local start = source:find("__global__", 1, true)
    local rest = start and source:sub(start + #"__global__")
    while rest do
      local name, open = rest:match("^[^(;{]-([%a_][%w_]*)%s*()%(")
      if not name then break end
      if not name:match("^__.*__$") then return name .. ".cu" end
      local after = rest:match("^%b()()", open)
      rest = after and rest:sub(after)
    end
    return "gpurun_program.cu"
  end

  builtin.new = new
  return { ProgramOptions = new, metatable = ProgramOptions }
end
