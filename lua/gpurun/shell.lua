-- Small helpers for scripts that start other processes: quoting for
-- /bin/sh, paths, and the gpurun binary that runs the calling script.
local shell = {}

-- quote(text) -> text as one /bin/sh word.
function shell.quote(text)
  return "'" .. tostring(text):gsub("'", "'\\''") .. "'"
end

-- dirname(path) -> the folder part of path ("." when there is none).
function shell.dirname(path)
  return path:match("^(.*)/[^/]*$") or "."
end

function shell.file_exists(path)
  local file = io.open(path, "r")
  if file then file:close() end
  return file ~= nil
end

-- interpreter() -> the gpurun (or lua) binary running this script: the
-- lowest index of `arg`, looked up on PATH when started by bare name; nil
-- when it cannot be told.
function shell.interpreter()
  if type(arg) ~= "table" then return nil end
  local lowest = 0
  while arg[lowest - 1] ~= nil do
    lowest = lowest - 1
  end
  local path = arg[lowest]
  if lowest == 0 or path == nil then
    return nil
  end
  if not path:find("/", 1, true) then
    local pipe = io.popen("command -v " .. shell.quote(path))
    local found = pipe and pipe:read("l")
    if pipe then pipe:close() end
    if not found or found == "" then
      return nil
    end
    path = found
  end
  return path
end

return shell
