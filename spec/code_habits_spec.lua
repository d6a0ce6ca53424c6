-- The habits CONTRIBUTING.md asks of the tree that a program can check:
-- no issue numbers or session history in code, comments or docs (git log
-- keeps history), and file headers of a few lines.
local files = require("spec.support.files")

local CHECKED = { "src", "lua", "bench", "scripts", "tools", "tests", "spec", "cmake", "docs" }
local TOP_FILES = { "CMakeLists.txt", "README.md", "CONTRIBUTING.md" }
local HISTORY = { "[Ii]ssues? #?%d+", "%f[%w][Tt]urn[- ]%d+%f[^%w]" }
-- The folders whose files open with at most HEADER_LINES lines of comment
-- (CONTRIBUTING.md's "a few lines"); a folder joins by its name here.
local HEADED = { "src", "lua", "bench", "scripts", "spec", "tools", "tests" }
local HEADER_LINES = 10

-- How a file writes a comment, told by its name: "c" (// and /* */), "lua"
-- (-- and --[[ ]]), "hash" (#), or nil for a file without comments of its
-- own (generated PTX, Markdown).
local function comment_style(path)
  if path:match("%.[ch]$") or path:match("%.cu$") or path:match("%.map$") then return "c" end
  if path:match("%.lua$") then return "lua" end
  if path:match("%.sh$") or path:match("%.py$") or path:match("%.supp$") or path:match("%.txt$") then
    return "hash"
  end
  return nil
end

-- The number of lines of the comment block a text opens with, a shebang
-- line apart. A blank line or a line of code ends the block; a Python
-- docstring counts as comment.
local function header_lines(text, style)
  local lines = files.lines_of(text .. "\n")
  local first = (lines[1] or ""):match("^#!") and 2 or 1
  local closing -- the end of a comment that spans lines, while inside one
  local count = 0
  for index = first, #lines do
    local line = lines[index]
    if closing then
      if line:find(closing, 1, true) then closing = nil end
    elseif style == "c" and line:match("^%s*/%*") then
      if not line:find("*/", line:find("/*", 1, true) + 2, true) then closing = "*/" end
    elseif style == "lua" and line:match("^%s*%-%-%[=*%[") then
      local level = line:match("^%s*%-%-%[(=*)%[")
      local rest = line:gsub("^%s*%-%-%[=*%[", "")
      if not rest:find("]" .. level .. "]", 1, true) then closing = "]" .. level .. "]" end
    elseif style == "hash" and line:match('^%s*"""') then
      if not line:gsub('^%s*"""', ""):find('"""', 1, true) then closing = '"""' end
    elseif not ((style == "c" and line:match("^%s*//"))
        or (style == "lua" and line:match("^%s*%-%-"))
        or (style == "hash" and line:match("^%s*#"))) then
      break
    end
    count = count + 1
  end
  return count
end

describe("the tree's habits", function()
  it("names no issue or turn in code, comments or docs", function()
    local paths = files.tracked(CHECKED)
    for _, file in ipairs(TOP_FILES) do paths[#paths + 1] = file end
    if #paths == 0 then pending("not a git checkout") return end
    local found = {}
    for _, path in ipairs(paths) do
      if path ~= "spec/code_habits_spec.lua" and not path:match("%.png$") then
        local text = files.read(path) or ""
        local number = 0
        for line in (text .. "\n"):gmatch("([^\n]*)\n") do
          number = number + 1
          for _, pattern in ipairs(HISTORY) do
            if line:find(pattern) then found[#found + 1] = ("%s:%d: %s"):format(path, number, line) end
          end
        end
      end
    end
    assert.are.same({}, found)
  end)

  it("opens every file with a header of at most " .. HEADER_LINES .. " lines", function()
    local paths = files.tracked(HEADED)
    if #paths == 0 then pending("not a git checkout") return end
    local long = {}
    for _, path in ipairs(paths) do
      local style = comment_style(path)
      local lines = style and header_lines(files.read(path) or "", style) or 0
      if lines > HEADER_LINES then long[#long + 1] = ("%s: %d lines"):format(path, lines) end
    end
    assert.are.same({}, long)
  end)

  it("counts a header's lines in each comment style", function()
    assert.are.equal(2, header_lines("#!/bin/sh\n# one\n# two\nset -eu\n", "hash"))
    assert.are.equal(1, header_lines("-- one\n\n-- a function's comment\nlocal x\n", "lua"))
    assert.are.equal(4, header_lines("--[[ one\ntwo\n]]\n-- four\nreturn {}\n", "lua"))
    assert.are.equal(4, header_lines("/* one\n * two\n */\n// four\nint x;\n", "c"))
    assert.are.equal(1, header_lines("/* one */\n#include <x.h>\n", "c"))
    assert.are.equal(3, header_lines('#!/usr/bin/env python3\n"""one\ntwo\n"""\nimport sys\n', "hash"))
    assert.are.equal(0, header_lines("local x = 1 -- not a header\n", "lua"))
  end)
end)
