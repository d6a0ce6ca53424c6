-- Command-line handling for pipeline scripts, on top of lua-argparse.
--
--   local args = require("gpurun.args")
--   local cli = args.new("myscript.lua", "What the script shows.")
--   cli:integer_option("--size", "Elements per vector.", 4096)
--   cli:common_options{ iters = 1000 }        -- --iters, --device, --json
--   local options = cli:parse(arg)
--   local device = cli:open_device(options.device)

local argparse = require("argparse")
local gpurun = require("gpurun")
local check = require("gpurun.script.check")
local common = require("gpurun.common")
local quoted = common.quoted
local check_options = require("gpurun.options").check
local report = require("gpurun.script.report")

local args = {}

local EXIT_FAILURE = 1
local EXIT_USAGE = 2

-- text -> integer >= minimum, or nil and why not. Only plain decimal digits
-- count: "1e3", "0x10" and "2.0" are refused rather than guessed at.
args.to_integer = common.to_integer

-- text -> finite number, or nil and why not.
function args.to_number(text)
  local value = type(text) == "string" and tonumber(text)
  if not value or value ~= value or value == math.huge or value == -math.huge then
    return nil, "expected a finite number, got " .. quoted(text)
  end
  return value
end

-- The reason a script cannot use device `id` when `count` devices are
-- visible, with the exit code it should end with; nil when it can.
function args.device_problem(id, count, driver_error)
  if count == 0 then
    return "no CUDA GPU available: " .. (driver_error or "no device"), EXIT_FAILURE
  end
  if id >= count then
    return string.format("error: --device %d: no such CUDA device (%d device%s visible)",
                         id, count, count == 1 and "" or "s"), EXIT_USAGE
  end
  return nil
end

local Cli = {}
Cli.__index = Cli

function args.new(name, description)
  local parser = argparse(name, description)
  -- argparse's own help option prints and exits; this one only records that
  -- it was given (in a bundle of short flags), and try_parse returns the text.
  parser:add_help{ action = function(result) result.help = true end }
  return setmetatable({ name = name, parser = parser, value_options = {} }, Cli)
end

-- Defaults go to argparse as text so that they pass the same conversion as
-- a typed value and show in --help. `flag` may list aliases ("-n --size");
-- messages name the last, and each takes a negative-looking value.
local function add_option(cli, flag, description, default, convert)
  local name = flag:match("(%S+)%s*$")
  local function convert_naming_flag(text)
    local value, why = convert(text)
    if value == nil then
      return nil, name .. ": " .. why
    end
    return value
  end
  for alias in flag:gmatch("%S+") do
    cli.value_options[alias] = true
  end
  return cli.parser:option(flag, description, default ~= nil and tostring(default) or nil,
                           convert_naming_flag)
end

-- An option whose text convert(text) turns into its value, or nil and why.
function Cli:converted_option(flag, description, default, convert)
  return add_option(self, flag, description, default, convert)
end

function Cli:integer_option(flag, description, default, minimum)
  return add_option(self, flag, description, default,
                    function(text) return args.to_integer(text, minimum or 1) end)
end

function Cli:number_option(flag, description, default)
  return add_option(self, flag, description, default, args.to_number)
end

function Cli:flag(flag, description)
  return self.parser:flag(flag, description)
end

-- Adds the options every timed pipeline takes: --iters, --device, --json.
-- defaults: { iters = , device = } (1000 and 0 when absent).
function Cli:common_options(defaults)
  defaults = check_options("cli:common_options", defaults, { "iters", "device" }) or {}
  self:integer_option("--iters", "Pipeline iterations to time.", defaults.iters or 1000)
  self:integer_option("--device", "CUDA device id.", defaults.device or 0, 0)
  self:flag("--json", "Write the figures as one JSON object to stdout instead of the text report.")
  return self
end

-- argparse reads "--size -3" as two options; joining a negative-looking value
-- to its option lets the option's own check explain what is wrong.
local function join_negative_values(cli, argv)
  local joined = {}
  local i = 1
  while i <= #argv do
    local item = argv[i]
    local following = argv[i + 1]
    if cli.value_options[item] and following and following:match("^%-[%d.]") then
      -- "--size=-3", and "-n-3" for a short option, which takes no "="
      joined[#joined + 1] = item .. (item:match("^%-%-") and "=" or "") .. following
      i = i + 2
    else
      joined[#joined + 1] = item
      i = i + 1
    end
  end
  return joined
end

-- -h or --help as a word before "--".
local function wants_help(argv)
  for _, word in ipairs(argv) do
    if word == "--" then return false end
    if word == "-h" or word == "--help" then return true end
  end
  return false
end

-- argv -> true, options | false, the reason on one line | "help", the help
-- text (for -h or --help anywhere before "--"). Never exits.
function Cli:try_parse(argv)
  argv = argv or {}
  if wants_help(argv) then
    return "help", self.parser:get_help()
  end
  local ok, result = self.parser:pparse(join_negative_values(self, argv))
  if ok then
    if result.help then
      return "help", self.parser:get_help()
    end
    return true, result
  end
  local message = tostring(result):gsub("\nDid you mean", "; did you mean"):gsub("%s*\n%s*", "; ")
  return false, message
end

function Cli:usage_error(message)
  io.stderr:write(self.name, ": error: ", message, "\n")
  io.stderr:flush()
  os.exit(EXIT_USAGE, true)
end

-- argv -> options; or the help text on stdout and exit 0, or exit 2 with
-- "<name>: error: <reason>". Usage errors end the script before any GPU
-- work starts; a machine without a GPU gets one plain line and exit code 1
-- from open_device, after the options are read, so --help and option
-- errors behave the same with or without a GPU.
function Cli:parse(argv)
  local ok, result = self:try_parse(argv)
  if ok == "help" then
    io.stdout:write(result, "\n")
    io.stdout:flush()
    os.exit(0, true)
  elseif not ok then
    self:usage_error(result)
  end
  return result
end

-- Device `id`, made current; exits 1 when there is no GPU at all and 2 when
-- `id` names a device that is not there.
function Cli:open_device(id)
  local problem, code = args.device_problem(id, gpurun.device_count(), gpurun.driver_error())
  if problem then
    io.stderr:write(self.name, ": ", problem, "\n")
    io.stderr:flush()
    os.exit(code, true)
  end
  local device = gpurun.Device(id)
  device:set_current()
  return device
end

-- cli:open_run(options) -> device, out, checks: what a pipeline script's
-- main() starts with: the device of --device made current (or the one-line
-- exit open_device makes), a report (JSON with --json) that has said which
-- device, and the run's checks under the script's name.
function Cli:open_run(options)
  local device = self:open_device(options.device)
  local out = report.new{ json = options.json }
  out:device(device, options.device)
  return device, out, check.new(self.name)
end

return args
