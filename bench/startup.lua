-- bench/startup.lua: where a short gpurun run spends its wall time (driver
-- init, compile/cache load, the rest), from fresh processes of `gpurun
-- SCRIPT ARGS`, some with this file loaded first as a probe (install_probe
-- below); docs/benchmark.md says how.
--
--   build/gpurun bench/startup.lua [--reps 7] [--script PATH]
--       [--script-args='--iters 10'] [--json]
--   build/gpurun bench/compare.lua --startup [the same options]

local gpurun = require("gpurun")

-- Replaces methods[name] of the gpurun type `type_name` with a timed wrapper
-- (every gpurun metatable keeps its methods in a `methods` table).
local function wrap_method(type_name, name, wrap)
  local metatable = debug.getregistry()[type_name]
  local methods = type(metatable) == "table" and metatable.methods
  if type(methods) ~= "table" or type(methods[name]) ~= "function" then
    error(("startup probe: %s has no method '%s' to time"):format(type_name, name))
  end
  methods[name] = wrap(methods[name])
end

-- The probe, run inside the measured process before the script. It writes
-- "<kind> <value>" lines to report_path as it goes, so nothing depends on
-- how the script ends.
-- It times, inside the process:
--   driver init          gpurun.device_count() + Device(0):set_current(), made
--                        before the script starts: dlopen of libcuda, cuInit,
--                        the primary context. The script's own calls then
--                        find all of it done.
--   compile/cache load   the script's gpurun.Program(...) and Program:compile(...),
--                        with the kernel cache warm (one unmeasured run first
--                        fills it; gpurun.cache_info() says whether it hit).
--   module load          the script's ObjectCode:get_kernel(...) calls.
local function install_probe(report_path)
  local now = gpurun.perf_counter
  local report = assert(io.open(report_path, "w"))
  local function record(kind, value)
    report:write(kind, " ", ("%.9f"):format(value), "\n")
    report:flush()
  end
  local function cache_counts()
    local ok, info = pcall(gpurun.cache_info)
    if ok and type(info) == "table" and type(info.hits) == "number" then
      return info.hits
    end
    return nil
  end
  local function timed(kind)
    return function(original)
      return function(...)
        local hits_before = kind == "compile" and cache_counts()
        local start = now()
        local function finish(...)
          record(kind, now() - start)
          local hits_after = hits_before and cache_counts()
          if hits_after then
            record("cache_hit", hits_after > hits_before and 1 or 0)
          end
          return ...
        end
        return finish(original(...))
      end
    end
  end

  local start = now()
  gpurun.device_count()
  local device = gpurun.Device(0)
  device:set_current()
  record("driver", now() - start)
  -- The device stays referenced for the whole run, as the script's would.
  debug.getregistry()["gpurun.startup_probe.device"] = device

  gpurun.Program = timed("program")(gpurun.Program)
  wrap_method("gpurun.Program", "compile", timed("compile"))
  wrap_method("gpurun.ObjectCode", "get_kernel", timed("module_load"))
end

local probe_report = rawget(_G, "GPURUN_STARTUP_PROBE")
if probe_report then
  rawset(_G, "GPURUN_STARTUP_PROBE", nil)
  install_probe(probe_report)
  return
end

---------------------------------------------------------------------------
-- the driver: runs the processes and reports

local args = require("gpurun.args")
local median = require("gpurun.bench").median

local PROGRAM = "startup.lua"
local SELF = debug.getinfo(1, "S").source:sub(2)

local function fail(message, code)
  io.stderr:write(PROGRAM, ": ", message, "\n")
  os.exit(code or 1)
end

local shell = require("gpurun.shell")
local shell_quote, dirname, file_exists = shell.quote, shell.dirname, shell.file_exists
local interpreter_path = shell.interpreter

-- The folder above bench/, spelled without a "bench/..".
local function repository_root()
  local bench = dirname(SELF)
  if bench == "." then
    return ".."
  end
  if bench:match("^%.%.$") or bench:match("/%.%.$") then
    return bench .. "/.."
  end
  return dirname(bench)
end

local cli = args.new(PROGRAM, "Where a short gpurun run spends its wall time.")
cli:integer_option("--reps", "Runs of each kind; the figures are medians.", 7)
cli.parser:option("--script", "The script to start (default: scripts/cudagraphs.lua).")
-- --script-args takes its value after '=': a separate word starting with
-- "--" would be read as an option.
cli.parser:option("--script-args", "Its arguments, as shell words (write --script-args='--iters 100').",
                  "--iters 10")
cli:flag("--json", "Print one JSON object with every figure instead of the summary.")

-- A temporary file's path, the file removed when the variable that holds
-- this goes out of scope.
local function temporary_file()
  return setmetatable({ path = os.tmpname() }, { __close = function(file) os.remove(file.path) end })
end

-- Wall seconds of one `sh -c command`; raises if it fails.
local function timed_run(command)
  local start = gpurun.perf_counter()
  local ok, how, code = os.execute(command)
  local seconds = gpurun.perf_counter() - start
  if not ok then
    error(("`%s` ended with %s %s (its message is above)"):format(command, how, code), 0)
  end
  return seconds
end

-- Sums the probe's lines by kind; cache_hit lines are counted instead.
local function read_probe_report(path)
  local sums = { program = 0, compile = 0, module_load = 0 }
  local compiles, hits, reported = 0, 0, 0
  for line in io.lines(path) do
    local kind, value = line:match("^(%S+) (%S+)$")
    value = tonumber(value)
    if kind == "cache_hit" then
      reported = reported + 1
      hits = hits + value
    elseif kind == "driver" or sums[kind] then
      sums[kind] = (sums[kind] or 0) + value
      if kind == "compile" then compiles = compiles + 1 end
    end
  end
  if not sums.driver then
    error(("the probe wrote no driver time to %s: did -e run bench/startup.lua?"):format(path), 0)
  end
  sums.compile = sums.compile + sums.program
  return sums, { timed_calls = compiles, reported = reported, hits = hits }
end

-- Runs `gpurun SCRIPT ARGS` (default: scripts/cudagraphs.lua --iters 10)
-- as a fresh process, --reps times plain for the total, and --reps times
-- with the probe; the rest is total - driver init - compile/cache load:
-- process and Lua start, module loading (get_kernel, shown apart),
-- allocation, the script's own work, exit (with the primary context's
-- release). A process that only makes device 0 current gives the driver's
-- whole cost, init and teardown; the script's total minus it is what gpurun
-- adds. Figures are medians over the reps; plain, probed, empty-process and
-- driver-only runs alternate so that they share machine noise. Each run goes
-- through /bin/sh (os.execute), whose start is part of every total, the
-- empty one included.
local function main(...)
  local options = cli:parse({ ... })
  options.script = options.script or (repository_root() .. "/scripts/cudagraphs.lua")
  -- Only counted: a context here would stay open while the runs start theirs.
  local problem, code = args.device_problem(0, gpurun.device_count(), gpurun.driver_error())
  if problem then
    fail(problem, code)
  end
  if not file_exists(options.script) then
    fail(("no script at %s: pass --script PATH"):format(options.script))
  end
  local interpreter = interpreter_path()
  if not interpreter then
    fail("cannot tell which gpurun binary runs this file")
  end

  local gpurun_command = "exec " .. shell_quote(interpreter)
  local script_command = shell_quote(options.script) .. " " .. options.script_args .. " >/dev/null"
  local plain = gpurun_command .. " " .. script_command
  local empty = gpurun_command .. " -e '' >/dev/null"
  -- The driver's own cost, start to exit: cuInit, the primary context, and
  -- its release when the process ends.
  local driver_only = gpurun_command
    .. " -e 'require(\"gpurun\").Device(0):set_current()' >/dev/null"
  local report <close> = temporary_file()
  local probe_chunk = ("GPURUN_STARTUP_PROBE = %q dofile(%q)"):format(report.path, SELF)
  local probed = gpurun_command .. " -e " .. shell_quote(probe_chunk) .. " " .. script_command

  -- Fills the kernel cache and the file cache; not counted.
  timed_run(plain)

  local figures = { total_ms = {}, empty_process_ms = {}, driver_ms = {}, compile_ms = {},
                    module_load_ms = {}, probed_total_ms = {}, driver_process_ms = {} }
  local cache = { timed_calls = 0, reported = 0, hits = 0 }
  io.stderr:write(("timing %d runs of each kind\n"):format(options.reps))
  for rep = 1, options.reps do
    figures.total_ms[rep] = 1e3 * timed_run(plain)
    figures.probed_total_ms[rep] = 1e3 * timed_run(probed)
    local sums, counts = read_probe_report(report.path)
    figures.driver_ms[rep] = 1e3 * sums.driver
    figures.compile_ms[rep] = 1e3 * sums.compile
    figures.module_load_ms[rep] = 1e3 * sums.module_load
    for key, count in pairs(counts) do cache[key] = cache[key] + count end
    figures.empty_process_ms[rep] = 1e3 * timed_run(empty)
    figures.driver_process_ms[rep] = 1e3 * timed_run(driver_only)
  end

  local total = median(figures.total_ms)
  local driver = median(figures.driver_ms)
  local compile = median(figures.compile_ms)
  local medians = {
    total_ms = total, driver_ms = driver, compile_ms = compile,
    rest_ms = total - driver - compile,
    module_load_ms = median(figures.module_load_ms),
    empty_process_ms = median(figures.empty_process_ms),
    probed_total_ms = median(figures.probed_total_ms),
    driver_process_ms = median(figures.driver_process_ms),
  }
  medians.beyond_driver_ms = total - medians.driver_process_ms
  local command_line = options.script .. " " .. options.script_args

  if options.json then
    io.write(require("cjson").encode({
      command = command_line, reps = options.reps, medians = medians, runs = figures,
      cache = cache,
    }), "\n")
    return
  end
  io.write(("gpurun %s, median of %d runs:\n"):format(command_line, options.reps))
  io.write(("driver init %.1f ms, compile/cache load %.1f ms, rest %.1f ms, total %.1f ms\n")
    :format(driver, compile, medians.rest_ms, total))
  io.write(("the rest includes module load (get_kernel) %.1f ms and an empty gpurun "
            .. "process (gpurun -e '') %.1f ms\n"):format(medians.module_load_ms, medians.empty_process_ms))
  io.write(("total with the probe loaded: %.1f ms\n"):format(medians.probed_total_ms))
  io.write(("a process that only makes device 0 current (driver init and teardown) %.1f ms: "
            .. "the script spends %.1f ms beyond it\n"):format(medians.driver_process_ms,
            medians.beyond_driver_ms))
  if cache.timed_calls == 0 then
    io.write("the script compiled nothing through gpurun.Program\n")
  elseif cache.reported == 0 then
    io.write("kernel cache: gpurun.cache_info() gave no hit count, so a warm cache is not confirmed\n")
  elseif cache.hits < cache.reported then
    io.write(("WARNING: %d of %d compiles missed the kernel cache; the compile figure is "
              .. "not a warm-cache one\n"):format(cache.reported - cache.hits, cache.reported))
  else
    io.write(("kernel cache: %d of %d compiles were hits\n"):format(cache.hits, cache.reported))
  end
end

return main(...)
