-- Small helpers for scripts that start other processes or write files:
-- quoting for /bin/sh, paths, whole-file writes, and the gpurun binary that
-- runs the calling script.
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

-- io.open's message without the temporary file's name in front.
local function reason(why, temporary)
  local prefix = temporary .. ": "
  if why and why:sub(1, #prefix) == prefix then
    return why:sub(#prefix + 1)
  end
  return why
end

-- write_file(path, text) -> true, or nil and why. Written beside the file
-- and renamed over it, so a reader (or an interrupted run) never sees half
-- a file.
function shell.write_file(path, text)
  local temporary = path .. ".tmp"
  local file, why = io.open(temporary, "wb")
  if not file then
    return nil, reason(why, temporary)
  end
  local written, write_error = file:write(text)
  local closed, close_error = file:close()
  if not written or not closed then
    os.remove(temporary)
    return nil, reason(write_error or close_error, temporary)
  end
  local renamed, rename_error = os.rename(temporary, path)
  if not renamed then
    os.remove(temporary)
    return nil, rename_error
  end
  return true
end

-- writable(path) -> true, or nil and why a file cannot be written there
-- (shell.write_file's temporary is created and removed to find out).
function shell.writable(path)
  local temporary = path .. ".tmp"
  local file, why = io.open(temporary, "wb")
  if not file then
    return nil, reason(why, temporary)
  end
  file:close()
  os.remove(temporary)
  return true
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
