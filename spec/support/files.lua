-- Files for specs that write some: reading them back, and temporary
-- folders that are removed afterwards.
local shell = require("gpurun.shell")

local files = {}

-- The whole file, or nil when it cannot be read.
function files.read(path)
  local file = io.open(path, "rb")
  if not file then
    return nil
  end
  local text = file:read("a")
  file:close()
  return text
end

-- The files under the folders (paths from the repository's root) that git
-- tracks or would track (not ignored), and that are there; {} outside a
-- git checkout. (A copy of the tree beside an older checkout's .git has
-- files that .git never saw, and lacks some it names.)
function files.tracked(folders)
  local list = {}
  local pipe = assert(io.popen("git ls-files --cached --others --exclude-standard -- "
    .. table.concat(folders, " ") .. " 2>/dev/null"))
  for line in pipe:lines() do
    local file = io.open(line, "rb")
    if file then
      file:close()
      list[#list + 1] = line
    end
  end
  pipe:close()
  return list
end

-- The lines of a text (each ended by "\n"); {} for nil.
function files.lines_of(text)
  local lines = {}
  for line in (text or ""):gmatch("([^\n]*)\n") do
    lines[#lines + 1] = line
  end
  return lines
end

-- A new empty folder.
function files.temporary_folder()
  local path = os.tmpname()
  os.remove(path)
  assert(os.execute("mkdir -p " .. shell.quote(path)))
  return path
end

function files.remove_folder(path)
  os.execute("rm -rf " .. shell.quote(path))
end

-- In a describe block, given busted's before_each and after_each (they live
-- in the spec file's environment): a fresh folder for every spec, removed
-- after it. -> a function returning the current spec's folder.
function files.folder_per_spec(before_each, after_each)
  local folder
  before_each(function()
    folder = files.temporary_folder()
  end)
  after_each(function()
    files.remove_folder(folder)
  end)
  return function()
    return folder
  end
end

return files
