-- tools/require_graph.lua [DIR] — the require graph of gpurun's Lua code
-- (DIR: lua/ by default), read from the source. Exits 1, naming each, on a
-- cycle of requires and on a require inside a function body that its line
-- (or the line before) does not mark as lazy or optional with a comment
-- `-- lazy: why` or `-- optional: why`; else prints the graph's size.
-- Run by spec/require_graph_spec.lua, so that `tools/dev.sh test` runs it.
local lexer = require("pl.lexer")

local dir = (arg[1] or "lua"):gsub("/+$", "")

local function lua_files(root)
  local pipe = assert(io.popen("find '" .. root:gsub("'", "'\\''") .. "' -name '*.lua' | sort"))
  local list = {}
  for path in pipe:lines() do list[#list + 1] = path end
  pipe:close()
  return list
end

local function read(path)
  local file = assert(io.open(path, "rb"))
  local text = file:read("a")
  file:close()
  return text
end

-- DIR/gpurun/x/y.lua -> "gpurun.x.y"
local function module_name(path)
  return path:sub(#dir + 2):gsub("%.lua$", ""):gsub("/", ".")
end

-- Blocks that `end` closes (`while` and `for` open theirs with `do`).
local OPENS = { ["function"] = true, ["if"] = true, ["do"] = true }

-- The requires of one file: { { name, line, in_function, marked } }, and
-- the lines of requires whose name is not a string literal.
local function requires_of(text)
  local tokens = {}
  local stream = lexer.lua(text, { space = true }, { string = true, number = false })
  for kind, value in stream do
    local line = lexer.lineno(stream)
    if kind == "comment" then -- lineno is past the comment's end
      local _, newlines = value:gsub("\n", "")
      line = line - newlines
    end
    tokens[#tokens + 1] = { kind = kind, value = value, line = line }
  end
  local marked_lines = {}
  for _, token in ipairs(tokens) do
    if token.kind == "comment" and token.value:match("^%-%-%s*(%a+):") then
      local word = token.value:match("^%-%-%s*(%a+):")
      if word == "lazy" or word == "optional" then marked_lines[token.line] = true end
    end
  end
  local code = {}
  for _, token in ipairs(tokens) do
    if token.kind ~= "comment" then code[#code + 1] = token end
  end
  local found, dynamic, blocks, functions = {}, {}, {}, 0
  for k, token in ipairs(code) do
    local value = token.value
    if token.kind == "keyword" then
      if OPENS[value] or value == "repeat" then
        blocks[#blocks + 1] = value
        if value == "function" then functions = functions + 1 end
      elseif value == "end" or value == "until" then
        if table.remove(blocks) == "function" then functions = functions - 1 end
      end
    elseif token.kind == "iden" and value == "require" and not (code[k - 1] and code[k - 1].value == ".") then
      -- require "x", require("x"), pcall(require, "x")
      local after = code[k + 1]
      local name
      if after and after.kind == "string" then
        name = after.value
      elseif after and (after.value == "(" or after.value == ",") and code[k + 2] then
        name = code[k + 2].kind == "string" and code[k + 2].value or nil
      end
      local entry = { name = name, line = token.line, in_function = functions > 0,
                      marked = marked_lines[token.line] or marked_lines[token.line - 1] }
      if name then found[#found + 1] = entry else dynamic[#dynamic + 1] = entry end
    end
  end
  return found, dynamic
end

-- Tarjan's strongly connected components of the graph { [name] = { name... } }.
local function components(nodes, edges)
  local index, low, on_stack, stack, result, counter = {}, {}, {}, {}, {}, 0
  local function connect(v)
    counter = counter + 1
    index[v], low[v] = counter, counter
    stack[#stack + 1], on_stack[v] = v, true
    for _, w in ipairs(edges[v]) do
      if not index[w] then
        connect(w)
        low[v] = math.min(low[v], low[w])
      elseif on_stack[w] then
        low[v] = math.min(low[v], index[w])
      end
    end
    if low[v] == index[v] then
      local component = {}
      repeat
        local w = table.remove(stack)
        on_stack[w] = nil
        component[#component + 1] = w
      until w == v
      result[#result + 1] = component
    end
  end
  for _, v in ipairs(nodes) do
    if not index[v] then connect(v) end
  end
  return result
end

-- One cycle through `start` inside the component (a set): the names in order.
local function cycle_through(start, members, edges)
  local path, seen = { start }, { [start] = true }
  local function walk(v)
    for _, w in ipairs(edges[v]) do
      if w == start then return true end
      if members[w] and not seen[w] then
        seen[w] = true
        path[#path + 1] = w
        if walk(w) then return true end
        path[#path] = nil
      end
    end
    return false
  end
  walk(start)
  path[#path + 1] = start
  return path
end

local files = lua_files(dir)
local nodes, edges, where, problems, count = {}, {}, {}, {}, 0
local known = {}
for _, path in ipairs(files) do known[module_name(path)] = path end
for _, path in ipairs(files) do
  local from = module_name(path)
  nodes[#nodes + 1] = from
  edges[from] = {}
  local found, dynamic = requires_of(read(path))
  for _, entry in ipairs(dynamic) do
    if not entry.marked then
      problems[#problems + 1] = ("%s:%d: require of a name that is not a string literal"):format(
        path, entry.line)
    end
  end
  for _, entry in ipairs(found) do
    count = count + 1
    if entry.in_function and not entry.marked then
      problems[#problems + 1] = ("%s:%d: require(\"%s\") inside a function, not marked "
        .. "`-- lazy: why` or `-- optional: why`"):format(path, entry.line, entry.name)
    end
    if known[entry.name] then
      local list = edges[from]
      list[#list + 1] = entry.name
      where[from .. " " .. entry.name] = where[from .. " " .. entry.name] or entry.line
    end
  end
end

local cycles = 0
for _, component in ipairs(components(nodes, edges)) do
  local members = {}
  for _, name in ipairs(component) do members[name] = true end
  local self_loop = false
  for _, w in ipairs(edges[component[1]]) do
    if w == component[1] then self_loop = true end
  end
  if #component > 1 or self_loop then
    cycles = cycles + 1
    table.sort(component)
    local path = cycle_through(component[1], members, edges)
    local steps = {}
    for k = 1, #path - 1 do
      steps[k] = ("%s (%s:%d)"):format(path[k], known[path[k]], where[path[k] .. " " .. path[k + 1]])
    end
    problems[#problems + 1] = "require cycle: " .. table.concat(steps, " -> ") .. " -> " .. path[#path]
  end
end

if #problems > 0 then
  for _, text in ipairs(problems) do io.stderr:write(text, "\n") end
  io.stderr:write(("require graph of %s: %d problem(s)\n"):format(dir, #problems))
  os.exit(1)
end
print(("require graph of %s: %d modules, %d requires, %d cycles"):format(dir, #nodes, count, cycles))
