-- luacheck (Debian's lua-check) over gpurun's Lua: tools/lint.sh runs it
-- on lua/, scripts/, bench/, spec/ and tools/, and CI fails on a warning.
std = "lua54"
max_line_length = 120
-- Specs are busted files; their tables of bad-input rows keep one row a line.
files["spec/"] = { std = "+busted", max_line_length = false }
