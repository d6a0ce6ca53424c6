-- A Python with numpy for the specs that compare with NumPy: $GPURUN_PYTHON,
-- else python3 from PATH, else Debian's /usr/bin/python3 (python3-numpy,
-- which CI installs: a python3 earlier on PATH, a pyenv one say, may lack it).
-- Returns the command, or nil and why none was found.
local shell = require("gpurun.shell")

local function has_numpy(python)
  return os.execute(shell.quote(python) .. " -c 'import numpy' >/dev/null 2>&1") == true
end

return function()
  local chosen = os.getenv("GPURUN_PYTHON")
  local candidates = chosen and { chosen } or { "python3", "/usr/bin/python3" }
  for _, python in ipairs(candidates) do
    if has_numpy(python) then return python end
  end
  return nil, ("no Python with numpy here (tried %s; install python3-numpy or set GPURUN_PYTHON)")
    :format(table.concat(candidates, ", "))
end
