-- The expressions a conditional node can be given in place of a Condition
-- ("max_abs_diff(u, v) > 1e-6 and sum(w) < 10"): a reduction over named
-- buffers compared with a number, joined by and, or, not and parentheses.
-- Pure Lua, no GPU: condition_source.lua writes the kernel that decides.
--
--   local tree, why = require("gpurun.compute.condition_parse").parse("max(r) > 1e-6")

-- A tree node is { kind = "or" | "and", left, right }, { kind = "not",
-- operand } or { kind = "compare", op = "<" | "<=" | ">" | ">=" | "==" |
-- "~=", call = { name, args = { buffer names } }, value = number } (the
-- call always on the left: "1 < max(x)" reads as "max(x) > 1").

local parse = {}

-- name -> how many buffers it takes.
parse.REDUCTIONS = {
  sum = 1, prod = 1, min = 1, max = 1, mean = 1, norm = 1, norm2 = 1, max_abs = 1,
  any = 1, all = 1, max_abs_diff = 2,
}
parse.NAMES = "sum, prod, min, max, mean, norm (norm2), max_abs, max_abs_diff, any, all"

local MAX_LENGTH = 4096
local MAX_DEPTH = 64
local KEYWORDS = { ["and"] = true, ["or"] = true, ["not"] = true }
local MIRRORED = { ["<"] = ">", ["<="] = ">=", [">"] = "<", [">="] = "<=", ["=="] = "==", ["~="] = "~=" }

-- A token's text as a message shows it: printable, short.
local function shown(text)
  text = text:gsub("[^\32-\126]", "?")
  if #text > 20 then text = text:sub(1, 20) .. "..." end
  return "'" .. text .. "'"
end

-- { kind = "name" | "number" | "op" | "end", text, position (1-based) },
-- or nil and the reason.
local function tokens(text)
  local list, at = {}, 1
  while true do
    at = text:find("[^ \t\r\n]", at)
    if not at then break end
    local name = text:match("^[%a_][%w_]*", at)
    local number = not name and (text:match("^0[xX]%x+", at)
                                 or text:match("^%d+%.?%d*[eE][+-]?%d+", at)
                                 or text:match("^%.%d+[eE][+-]?%d+", at)
                                 or text:match("^%d+%.?%d*", at) or text:match("^%.%d+", at))
    local op = not name and not number and (text:match("^[<>=~!]=", at) or text:match("^[<>(),%-+]", at))
    if name then
      list[#list + 1] = { kind = KEYWORDS[name] and "op" or "name", text = name, position = at }
    elseif number then
      if text:match("^[%a_]", at + #number) then
        return nil, ("bad number %s at position %d"):format(shown(text:match("^[%w_.]+", at)), at)
      end
      list[#list + 1] = { kind = "number", text = number, position = at }
    elseif op then
      list[#list + 1] = { kind = "op", text = op == "!=" and "~=" or op, position = at }
    else
      return nil, ("unexpected character %s at position %d"):format(shown(text:sub(at, at)), at)
    end
    at = at + #(name or number or op)
  end
  list[#list + 1] = { kind = "end", text = "end of expression", position = #text + 1 }
  return list
end

-- A recursive-descent reader over the tokens; errors are thrown as
-- { why = text } and caught by parse.parse.
local Reader = {}
Reader.__index = Reader

local function fail(fmt, ...)
  error({ why = fmt:format(...) }, 0)
end

function Reader:peek() return self.list[self.at] end

function Reader:take()
  local token = self.list[self.at]
  self.at = self.at + 1
  return token
end

function Reader:unexpected(wanted)
  local token = self:peek()
  local what = token.kind == "end" and "the end of the expression" or shown(token.text)
  fail("unexpected %s at position %d (expected %s)", what, token.position, wanted)
end

function Reader:expect(text, wanted)
  if self:peek().text ~= text or self:peek().kind ~= "op" then self:unexpected(wanted) end
  return self:take()
end

function Reader:number()
  local sign = 1
  while self:peek().kind == "op" and (self:peek().text == "-" or self:peek().text == "+") do
    if self:take().text == "-" then sign = -sign end
  end
  local token = self:peek()
  if token.kind == "name" and (token.text == "inf" or token.text == "nan") then
    self:take()
    return sign * (token.text == "inf" and math.huge or 0 / 0)
  end
  if token.kind ~= "number" then self:unexpected("a number") end
  self:take()
  return sign * tonumber(token.text)
end

function Reader:call()
  local token = self:take()
  local arity = parse.REDUCTIONS[token.text]
  if not arity then
    fail("unknown reduction %s at position %d (known: %s)", shown(token.text), token.position,
         parse.NAMES)
  end
  self:expect("(", "'(' after " .. token.text)
  local args = {}
  repeat
    local name = self:peek()
    if name.kind ~= "name" then self:unexpected("a buffer name") end
    self:take()
    args[#args + 1] = name.text
  until not (self:peek().kind == "op" and self:peek().text == "," and self:take())
  self:expect(")", "',' or ')'")
  if #args ~= arity then
    fail("%s takes %d buffer%s, got %d at position %d", token.text, arity, arity == 1 and "" or "s",
         #args, token.position)
  end
  return { name = token.text == "norm2" and "norm" or token.text, args = args, position = token.position }
end

function Reader:relation()
  local token = self:peek()
  if token.kind ~= "op" or not MIRRORED[token.text] then
    self:unexpected("a comparison (<, <=, >, >=, ==, ~=)")
  end
  return self:take().text
end

function Reader:comparison()
  local token = self:peek()
  if token.kind == "name" and parse.REDUCTIONS[token.text] then
    local call = self:call()
    local op = self:relation()
    return { kind = "compare", call = call, op = op, value = self:number() }
  end
  if token.kind == "number" or (token.kind == "op" and (token.text == "-" or token.text == "+"))
     or (token.kind == "name" and (token.text == "inf" or token.text == "nan")) then
    local value = self:number()
    local op = self:relation()
    if self:peek().kind ~= "name" then self:unexpected("a reduction (" .. parse.NAMES .. ")") end
    return { kind = "compare", call = self:call(), op = MIRRORED[op], value = value }
  end
  if token.kind == "name" then
    fail("unknown reduction %s at position %d (known: %s)", shown(token.text), token.position,
         parse.NAMES)
  end
  self:unexpected("a reduction, a number, 'not' or '('")
end

function Reader:unary(depth)
  if depth > MAX_DEPTH then
    fail("expression nested deeper than %d at position %d", MAX_DEPTH, self:peek().position)
  end
  local token = self:peek()
  if token.kind == "op" and token.text == "not" then
    self:take()
    return { kind = "not", operand = self:unary(depth + 1) }
  end
  if token.kind == "op" and token.text == "(" then
    self:take()
    local inner = self:disjunction(depth + 1)
    self:expect(")", "')'")
    return inner
  end
  return self:comparison()
end

function Reader:conjunction(depth)
  local left = self:unary(depth)
  while self:peek().kind == "op" and self:peek().text == "and" do
    self:take()
    left = { kind = "and", left = left, right = self:unary(depth) }
  end
  return left
end

function Reader:disjunction(depth)
  local left = self:conjunction(depth)
  while self:peek().kind == "op" and self:peek().text == "or" do
    self:take()
    left = { kind = "or", left = left, right = self:conjunction(depth) }
  end
  return left
end

-- parse(text) -> tree, or nil and a one-line reason naming the bad token
-- and its position (1-based, in bytes).
function parse.parse(text)
  if type(text) ~= "string" then
    return nil, ("an expression string expected, got %s"):format(type(text))
  end
  if #text > MAX_LENGTH then
    return nil, ("expression longer than %d characters"):format(MAX_LENGTH)
  end
  local list, why = tokens(text)
  if not list then return nil, why end
  local reader = setmetatable({ list = list, at = 1 }, Reader)
  local ok, tree = pcall(function()
    local result = reader:disjunction(0)
    if reader:peek().kind ~= "end" then reader:unexpected("'and', 'or' or the end") end
    return result
  end)
  if not ok then
    if type(tree) == "table" and tree.why then return nil, tree.why end
    error(tree, 0)
  end
  return tree
end

-- Calls visit(call) for each reduction call of a tree, left to right.
function parse.each_call(tree, visit)
  if tree.kind == "compare" then
    visit(tree.call)
  elseif tree.kind == "not" then
    parse.each_call(tree.operand, visit)
  else
    parse.each_call(tree.left, visit)
    parse.each_call(tree.right, visit)
  end
end

-- The buffer names a tree reads, each once, in the order they first appear.
function parse.names(tree)
  local names, seen = {}, {}
  parse.each_call(tree, function(call)
    for _, name in ipairs(call.args) do
      if not seen[name] then seen[name] = true; names[#names + 1] = name end
    end
  end)
  return names
end

return parse
