-- The fenced code blocks of a Markdown file, for the specs that run the
-- docs' examples: { lang, flags = { gpu = true, ... }, text, line, mark }.
-- ```lua gpu gives lang "lua" and flags.gpu; mark is the HTML comment on
-- the line before the fence, if any (<!-- file: scripts/axpy.lua -->
-- gives "file: scripts/axpy.lua").
local markdown = {}

function markdown.blocks(text)
  local blocks, open, previous = {}, nil, nil
  local number = 0
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    number = number + 1
    if open then
      if line:match("^```%s*$") then
        open.text = table.concat(open.lines, "\n") .. "\n"
        open.lines = nil
        blocks[#blocks + 1] = open
        open = nil
      else
        open.lines[#open.lines + 1] = line
      end
    else
      local info = line:match("^```(.*)$")
      if info then
        local words = {}
        for word in info:gmatch("%S+") do words[#words + 1] = word end
        local flags = {}
        for i = 2, #words do flags[words[i]] = true end
        open = { lang = words[1] or "", flags = flags, line = number, lines = {},
                 mark = previous and previous:match("^<!%-%-%s*(.-)%s*%-%->$") }
      end
      previous = line
    end
  end
  assert(open == nil, "a code block that starts at line " .. (open and open.line or 0) .. " never ends")
  return blocks
end

-- The block after the mark `<!-- mark -->`, or nil.
function markdown.marked(blocks, mark)
  for _, block in ipairs(blocks) do
    if block.mark == mark then return block end
  end
  return nil
end

-- The Markdown files whose blocks run as specs: the README and docs/*.md.
function markdown.doc_files()
  local paths = { "README.md" }
  local pipe = assert(io.popen("ls docs/*.md"))
  for path in pipe:lines() do paths[#paths + 1] = path end
  pipe:close()
  return paths
end

return markdown
