-- Runs gpurun (or any command) in a child process and returns what it printed
-- and its exit code, for specs of the command line and of scripts.
local shell = require("gpurun.shell")

local process = {}

local shell_quote = shell.quote
process.quote = shell_quote

-- The gpurun binary under test: $GPURUN_BIN, else the interpreter running
-- the specs (arg[-1] when run as `gpurun spec/run.lua`), else build/gpurun.
function process.gpurun_bin()
  local bin = os.getenv("GPURUN_BIN")
  if bin and bin ~= "" then return bin end
  local interpreter
  for i = -1, -10, -1 do
    if arg and arg[i] then interpreter = arg[i] else break end
  end
  if interpreter and interpreter:find("gpurun", 1, true) then
    bin = interpreter
  else
    bin = "build/gpurun"
  end
  if bin:sub(1, 1) ~= "/" and bin:find("/", 1, true) then
    bin = (os.getenv("PWD") or ".") .. "/" .. bin
  end
  return bin
end

-- Debian's lua5.4, which specs compare gpurun with and load gpurun.so
-- into: the one on PATH, else nil.
function process.lua54()
  local pipe = io.popen("command -v lua5.4")
  local path = pipe and pipe:read("l")
  if pipe then pipe:close() end
  return path ~= "" and path or nil
end

-- The processors this process may run on (nproc), at least 1.
function process.cores()
  local pipe = io.popen("nproc 2>/dev/null")
  local count = pipe and math.tointeger(tonumber(pipe:read("l") or ""))
  if pipe then pipe:close() end
  return count and count > 0 and count or 1
end

local function read_file(path)
  local file = io.open(path, "rb")
  if not file then return "" end
  local text = file:read("a")
  file:close()
  os.remove(path)
  return text
end

-- run(command_line [, { stdin = text, env = { NAME = value } }]) ->
--   { stdout = text, stderr = text, code = exit code }
-- command_line is a shell fragment; quote arguments with process.quote.
function process.run(command_line, options)
  options = options or {}
  local prefix = ""
  for name, value in pairs(options.env or {}) do
    prefix = prefix .. name .. "=" .. shell_quote(value) .. " "
  end
  local stdout_path, stderr_path = os.tmpname(), os.tmpname()
  local stdin = "</dev/null"
  local stdin_path
  if options.stdin then
    stdin_path = os.tmpname()
    local file = assert(io.open(stdin_path, "wb"))
    file:write(options.stdin)
    file:close()
    stdin = "<" .. shell_quote(stdin_path)
  end
  local full = ("%s%s %s >%s 2>%s"):format(prefix, command_line, stdin,
    shell_quote(stdout_path), shell_quote(stderr_path))
  local _, how, code = os.execute(full)
  if stdin_path then os.remove(stdin_path) end
  return {
    stdout = read_file(stdout_path),
    stderr = read_file(stderr_path),
    code = how == "exit" and code or 128 + (code or 0),
  }
end

-- interrupt(start [, options]): runs the shell fragment `start`, which
-- starts a process in the background and sets $pid (and may leave an EXIT
-- trap to clean up), then sends that process SIGINT from the shell (not
-- timeout(1): it changes how the child sees SIGINT) and waits for it.
-- Returns process.run's result plus elapsed_ms, from SIGINT to the end.
function process.interrupt(start, options)
  local elapsed = os.tmpname()
  local result = process.run(([[{
    %s
    started=$(date +%%s%%N)
    kill -INT $pid
    wait $pid
    code=$?
    echo $(( ($(date +%%s%%N) - started) / 1000000 )) > %s
    exit $code
  }]]):format(start, shell_quote(elapsed)), options)
  local file = io.open(elapsed)
  result.elapsed_ms = file and tonumber(file:read("l")) or math.huge
  if file then file:close() end
  os.remove(elapsed)
  return result
end

-- The shell words that run the binary under test by its name, found on
-- PATH, as a user runs it: its messages then begin with "gpurun:" (the
-- command line prefixes them with argv[0], as lua does). `wrapper` (say
-- "timeout 60") goes between PATH and the name.
function process.gpurun_command(wrapper)
  local dir, name = process.gpurun_bin():match("^(.*)/([^/]+)$")
  return ("PATH=%s:\"$PATH\" %s%s"):format(shell_quote(dir),
    wrapper and wrapper .. " " or "", shell_quote(name))
end

-- gpurun(args [, options]): process.run with the gpurun command in front.
function process.gpurun(args, options)
  return process.run(process.gpurun_command() .. " " .. (args or ""), options)
end

return process
