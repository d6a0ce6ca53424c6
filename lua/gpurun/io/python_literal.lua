-- Python literals as Python's ast.literal_eval reads them: the parser
-- behind gpurun.npy's header (a .npy header is the text of a Python dict).
-- It follows Python 3's tokenizer and grammar for what a literal can hold
-- (strings in every quoting and escape, implicit concatenation, integers in
-- every base with underscores, parentheses, tuples, lists, sets, dicts,
-- comments, line continuations, blank lines and the indentation rule), so
-- that a text is read exactly when Python reads it, with the same value.
local literal = {}

local WHITESPACE = { [" "] = true, ["\t"] = true, ["\f"] = true }
local SIMPLE_ESCAPES = { ["\\"] = "\\", ["'"] = "'", ['"'] = '"', a = "\a", b = "\b", f = "\f",
  n = "\n", r = "\r", t = "\t", v = "\v" }
-- Python 3's string prefixes (any case), without the f-strings that
-- literal_eval refuses.
local STRING_PREFIXES = { [""] = "str", r = "str", u = "str", b = "bytes", br = "bytes", rb = "bytes" }
local FSTRING_PREFIXES = { f = true, fr = true, rf = true }
local PUNCTUATION = { ["("] = true, [")"] = true, ["["] = true, ["]"] = true, ["{"] = true,
  ["}"] = true, [","] = true, [":"] = true, ["+"] = true, ["-"] = true }
local CLOSING = { ["("] = ")", ["["] = "]", ["{"] = "}" }
-- Python's tokenizer refuses a 201st bracket open at once (MAXLEVEL in its
-- lexer): the parser's recursion, one level per bracket, stays this deep.
local MAX_NESTING = 200

-- Raised inside the parser, caught in parse().
local Refusal = {}
local function refuse(message, ...)
  error(setmetatable({ message = message:format(...) }, Refusal), 0)
end

local function is_name_byte(byte)
  return byte and (byte >= 0x80 or byte == 0x5F or (byte >= 0x30 and byte <= 0x39)
    or (byte >= 0x41 and byte <= 0x5A) or (byte >= 0x61 and byte <= 0x7A))
end

local function shown_char(c)
  if c:match("^[%g ]$") then return "'" .. c .. "'" end
  return ("byte 0x%02X"):format(c:byte())
end

-- ---- the tokenizer -------------------------------------------------------

-- Tokens: { type = "op"|"string"|"int"|"number"|"name"|"newline"|"end",
-- text, at (character position), ... }.
local function tokenize(text, options, untokenize_fails_at)
  local tokens = {}
  local pos, depth, length = 1, 0, #text
  local after_number = false -- for drop_long_suffix: the last token was a number

  local function char(at) return text:sub(at, at) end
  local function add(token)
    token.at = token.at or pos
    tokens[#tokens + 1] = token
    after_number = token.type == "int" or token.type == "number"
  end

  -- The start of a line outside brackets: blank lines and comment lines are
  -- skipped; any other line must not be indented (an eval has one line).
  local function line_start(first)
    while true do
      if pos == untokenize_fails_at then
        refuse("a last line that starts with a carriage return (NumPy's _filter_header fails on it)")
      end
      local column_start = pos
      while WHITESPACE[char(pos)] do pos = pos + 1 end
      local c = char(pos)
      if c == "#" then
        pos = (text:find("\n", pos, true) or length) + 1
      elseif c == "\n" then
        pos = pos + 1
      else
        local indent = text:sub(column_start, pos - 1)
        if options.numpy_filter then
          -- untokenize writes spaces up to a token's column: the first
          -- line's are stripped, a last line of blanks has no token.
          if first or c == "" then indent = "" end
        else
          -- A form feed resets Python's column count: only what follows
          -- the last one counts as indentation.
          indent = indent:match("[^\f]*$")
        end
        if indent ~= "" then refuse("unexpected indent at character %d", pos) end
        return
      end
      first = false
    end
  end

  local function read_escape(kind, quote_at)
    local c = char(pos)
    if c == "" then refuse("unterminated string starting at character %d", quote_at) end
    if c == "\n" then pos = pos + 1; return "" end
    if SIMPLE_ESCAPES[c] then pos = pos + 1; return SIMPLE_ESCAPES[c] end
    local octal = text:match("^[0-7][0-7]?[0-7]?", pos)
    if octal then
      pos = pos + #octal
      return utf8.char(tonumber(octal, 8))
    end
    local digits = ({ x = 2, u = kind == "str" and 4 or nil, U = kind == "str" and 8 or nil })[c]
    if digits then
      local hex = text:sub(pos + 1, pos + digits)
      if not hex:match("^" .. ("%x"):rep(digits) .. "$") then
        refuse("truncated \\%s escape at character %d", c, pos - 1)
      end
      local code = tonumber(hex, 16)
      if code > 0x10FFFF then refuse("illegal Unicode character \\%s%s", c, hex) end
      pos = pos + 1 + digits
      return utf8.char(code)
    end
    if c == "N" and kind == "str" then
      refuse("a \\N{...} escape at character %d (named characters are not read)", pos - 1)
    end
    return "\\" -- an unknown escape keeps its backslash
  end

  local function read_string(prefix)
    local lower = prefix:lower()
    if FSTRING_PREFIXES[lower] then refuse("an f-string at character %d", pos) end
    local kind = STRING_PREFIXES[lower]
    local raw = lower:find("r", 1, true) ~= nil
    local start = pos - #prefix
    local quote = char(pos)
    if text:sub(pos, pos + 2) == quote:rep(3) then quote = quote:rep(3) end
    pos = pos + #quote
    local parts = {}
    while true do
      local c = char(pos)
      if c == "" or (c == "\n" and #quote == 1) then
        refuse("unterminated string starting at character %d", start)
      end
      if text:sub(pos, pos + #quote - 1) == quote then
        pos = pos + #quote
        break
      end
      if c == "\\" then
        if raw then
          if char(pos + 1) == "" then refuse("unterminated string starting at character %d", start) end
          parts[#parts + 1] = text:sub(pos, pos + 1)
          pos = pos + 2
        else
          pos = pos + 1
          parts[#parts + 1] = read_escape(kind, start)
        end
      else
        parts[#parts + 1] = c
        pos = pos + 1
      end
    end
    add({ type = "string", kind = kind, value = table.concat(parts), at = start })
  end

  -- Integers as Python 3 writes them; anything else that starts as a number
  -- (floats, complex numbers) is a "number" token, and a malformed one a
  -- refusal.
  local function read_number()
    local start = pos
    local base = ({ ["0x"] = 16, ["0o"] = 8, ["0b"] = 2 })[text:sub(pos, pos + 1):lower()] or 10
    local digit = ({ [10] = "%d", [16] = "%x", [8] = "[0-7]", [2] = "[01]" })[base]
    if base ~= 10 then pos = pos + 2 end
    local body = text:match("^[" .. digit:gsub("[%[%]]", "") .. "_]*", pos)
    pos = pos + #body
    local next_char = char(pos)
    if base == 10 and (next_char == "." or next_char:match("^[eEjJ]$")) then
      -- A float or a complex number: its characters, then what it is.
      local rest = text:match("^[eE][+-]%d[%w_.]*", pos) or text:match("^[%w_.]*", pos)
      pos = pos + #rest
      add({ type = "number", at = start })
      return
    end
    -- Digits in groups of one underscore at most, none at the end; after a
    -- base prefix, one underscore may come first.
    local groups = base == 10 and body or body:gsub("^_", "", 1)
    if groups == "" or groups:find("__", 1, true) or groups:match("^_") or groups:match("_$") then
      refuse("invalid number at character %d", start)
    end
    local digits = groups:gsub("_", "")
    if base == 10 and digits:match("^0") and digits:match("[1-9]") then
      refuse("leading zeros in a decimal integer at character %d", start)
    end
    -- tonumber gives a float past 64 bits for decimal and wraps for the
    -- other bases: the count of significant digits says which it was.
    local value = math.tointeger(tonumber(digits, base))
    local significant = digits:gsub("^0+", "")
    local limit = ({ [10] = 19, [16] = 16, [8] = 21, [2] = 63 })[base]
    local too_large = not value or value < 0 or #significant > limit
    add({ type = "int", value = (not too_large) and value or nil, too_large = too_large, at = start })
    if is_name_byte(char(pos):byte()) and not (options.numpy_filter and char(pos) == "L") then
      refuse("invalid number at character %d", start)
    end
  end

  line_start(true)
  while pos <= length do
    local c = char(pos)
    local byte = c:byte()
    if WHITESPACE[c] then
      pos = pos + 1
    elseif c == "#" then
      pos = text:find("\n", pos, true) or length + 1
      after_number = false
    elseif c == "\n" then
      pos = pos + 1
      after_number = false
      if depth == 0 then
        add({ type = "newline", at = pos - 1 })
        line_start()
      end
    elseif c == "\\" then
      if char(pos + 1) ~= "\n" then refuse("a backslash outside a string at character %d", pos) end
      if pos + 1 >= length then refuse("the text ends after a line continuation") end
      pos = pos + 2
    elseif c == "'" or c == '"' then
      read_string("")
    elseif c:match("%d") or (c == "." and char(pos + 1):match("%d")) then
      if c == "." then
        pos = pos + #text:match("^[%w_.]*", pos)
        add({ type = "number" })
      else
        read_number()
      end
    elseif is_name_byte(byte) then
      local name = text:match("^[%w_\128-\255]+", pos)
      local quote = char(pos + #name)
      if (quote == "'" or quote == '"') and (STRING_PREFIXES[name:lower()] or FSTRING_PREFIXES[name:lower()]) then
        pos = pos + #name
        read_string(name)
      elseif name == "L" and after_number and options.numpy_filter then
        pos = pos + 1 -- Python 2's long suffix (the number stays the last token)
      else
        add({ type = "name", value = name })
        pos = pos + #name
      end
    elseif PUNCTUATION[c] then
      if CLOSING[c] then
        if depth >= MAX_NESTING then
          refuse("too many nested parentheses at character %d (Python reads %d levels at most)", pos,
                 MAX_NESTING)
        end
        depth = depth + 1
      elseif c == ")" or c == "]" or c == "}" then
        depth = depth - 1
      end
      add({ type = "op", value = c })
      pos = pos + 1
    elseif byte < 0x20 or byte == 0x7F then
      refuse("an invalid non-printable character (%s) at character %d", shown_char(c), pos)
    else
      refuse("unexpected %s at character %d", shown_char(c), pos)
    end
  end
  add({ type = "end", at = length + 1 })
  return tokens
end

-- ---- the parser ----------------------------------------------------------

local function describe(token)
  if token.type == "end" then return "the end of the text" end
  if token.type == "newline" then return ("a line break at character %d"):format(token.at) end
  if token.type == "op" then return ("'%s' at character %d"):format(token.value, token.at) end
  if token.type == "name" then return ("the name %s at character %d"):format(token.value, token.at) end
  return ("a %s at character %d"):format(token.type, token.at)
end

local function parse_tokens(tokens)
  local index = 1
  local function peek() return tokens[index] end
  local function take() index = index + 1; return tokens[index - 1] end
  local function is_op(value) local t = tokens[index]; return t.type == "op" and t.value == value end
  local function expect(value)
    if not is_op(value) then refuse("expected '%s', found %s", value, describe(peek())) end
    take()
  end

  local expression

  -- A display: ( ), [ ], { }, with their items and an optional trailing comma.
  local function display(open)
    local close = CLOSING[open]
    local items, keys, values = {}, {}, {}
    local kind = ({ ["("] = "tuple", ["["] = "list", ["{"] = "set" })[open]
    local commas = 0
    if is_op(close) then
      take()
      return { kind = open == "{" and "dict" or kind, items = items, keys = keys, values = values }
    end
    while true do
      local item = expression()
      if open == "{" and (#items == 0 and #keys == 0) and is_op(":") then kind = "dict" end
      if kind == "dict" then
        expect(":")
        keys[#keys + 1], values[#values + 1] = item, expression()
      else
        items[#items + 1] = item
      end
      if not is_op(",") then break end
      take()
      commas = commas + 1
      if is_op(close) then break end
    end
    expect(close)
    if open == "(" and commas == 0 then
      items[1].parenthesized = true
      return items[1] -- (x) is x
    end
    return { kind = kind, items = items, keys = keys, values = values }
  end

  local function atom()
    local token = take()
    if token.type == "string" then
      local kind, parts = token.kind, { token.value }
      while peek().type == "string" do
        local more = take()
        if more.kind ~= kind then refuse("bytes and str literals mixed at character %d", more.at) end
        parts[#parts + 1] = more.value
      end
      return { kind = kind, value = table.concat(parts) }
    elseif token.type == "int" then
      return { kind = "int", value = token.value, too_large = token.too_large, number = true }
    elseif token.type == "number" then
      return { kind = "float", number = true }
    elseif token.type == "name" then
      if token.value == "True" then return { kind = "bool", value = true } end
      if token.value == "False" then return { kind = "bool", value = false } end
      if token.value == "None" then return { kind = "None" } end
      refuse("the name %s at character %d is not a literal", token.value, token.at)
    elseif token.type == "op" and CLOSING[token.value] then
      return display(token.value)
    end
    refuse("unexpected %s", describe(token))
  end

  -- A literal, with literal_eval's unary sign on a number; no other
  -- operator (a complex number's binary + or - is refused with the rest).
  function expression()
    local sign = nil
    if is_op("+") or is_op("-") then sign = take() end
    local value = atom()
    if sign then
      if not value.number then
        refuse("a sign before something that is not a number at character %d", sign.at)
      end
      local negated = sign.value == "-"
      if value.kind == "int" and negated and value.value then
        value = { kind = "int", value = -value.value, too_large = false }
      elseif value.kind == "int" then
        value = { kind = "int", value = value.value, too_large = value.too_large }
      else
        value = { kind = value.kind }
      end
    end
    local after = peek()
    if after.type == "op" and (after.value == "(" or after.value == "[" or after.value == "+"
        or after.value == "-") then
      refuse("an expression that is not a literal at %s", describe(after))
    end
    return value
  end

  while peek().type == "newline" do take() end
  local first = expression()
  local value = first
  if is_op(",") then -- a tuple without parentheses
    value = { kind = "tuple", items = { first } }
    take()
    while not (peek().type == "newline" or peek().type == "end") do
      value.items[#value.items + 1] = expression()
      if not is_op(",") then break end
      take()
    end
  end
  while peek().type == "newline" do take() end
  if peek().type ~= "end" then refuse("unexpected %s after the literal", describe(peek())) end
  return value
end

-- Where NumPy's _filter_header fails: Python's tokenize takes a last line
-- (no \n after it) that starts with a carriage return, outside brackets,
-- for a blank line, and untokenize then refuses the position of the NEWLINE
-- it adds. Returns that line's start in the text as the tokenizer sees it
-- (\r\n and \r made \n), or nil; the tokenizer knows whether it is
-- outside brackets.
local function untokenize_failure(text)
  -- (A plain search for the last newline: the pattern "()[^\n]*$" would
  -- be tried from every character of a long line, quadratic in it.)
  local start = 1
  while true do
    local newline = text:find("\n", start, true)
    if not newline then break end
    start = newline + 1
  end
  local line = text:sub(start)
  if not line:match("^[ \t\f]*\r") or line:match("[\r\n]$") or line:match("^%s*#") then return nil end
  return #text:sub(1, start - 1):gsub("\r\n?", "\n") + 1
end

local function latin1_to_utf8(text)
  return (text:gsub("[\128-\255]", function(c) return utf8.char(c:byte()) end))
end

-- parse(text [, options]) -> value, or nil and why on any text Python
-- would refuse.
--
--   local literal = require("gpurun.python_literal")
--   local value, why = literal.parse("{'a': (1, 2), 'b': True}")
--   --> { kind = "dict", keys = { {kind = "str", value = "a"}, ... },
--   --    values = { {kind = "tuple", items = { {kind = "int", value = 1}, ... }}, ... } }
--
-- Kinds: "str" (value: UTF-8), "int" (value: a Lua integer, or nil and
-- too_large = true past 64 bits), "bool" (value), "tuple", "list", "set"
-- (items), "dict" (keys, values, in order), and without a value "bytes",
-- "float" (complex numbers too), "None". Values that are never more than
-- refused by its callers (floats, complex numbers, bytes, None, expressions
-- literal_eval refuses) are read as their kind only or refused outright;
-- that changes no verdict, only the message. Options:
--   text_is_latin1: bytes 128..255 are the characters U+0080..U+00FF (else
--     the text is UTF-8);
--   numpy_filter: the text is read as NumPy reads .npy versions 1.0 and 2.0,
--     after its _filter_header (Python's tokenize, untokenize): an `L` right
--     after a number is dropped (Python 2's longs), and untokenize's
--     rewriting of whitespace changes what counts as indentation (the first
--     line's is dropped, any other is an indent, a last line of blanks
--     vanishes).
function literal.parse(text, options)
  if type(text) ~= "string" then return nil, "the text is not a string" end
  options = options or {}
  if text:find("\0", 1, true) then return nil, "the text contains a NUL byte" end
  if options.text_is_latin1 then
    text = latin1_to_utf8(text)
  elseif not utf8.len(text) then
    return nil, "the text is not UTF-8"
  end
  local untokenize_fails_at = options.numpy_filter and untokenize_failure(text)
  -- Python reads \r\n and \r as \n, and literal_eval strips the first
  -- line's leading spaces and tabs.
  text = text:gsub("\r\n?", "\n")
  local stripped = #text:match("^[ \t]*")
  text = text:sub(stripped + 1)
  untokenize_fails_at = untokenize_fails_at and math.max(1, untokenize_fails_at - stripped)
  local ok, result = pcall(function()
    return parse_tokens(tokenize(text, options, untokenize_fails_at))
  end)
  if ok then return result end
  if getmetatable(result) == Refusal then return nil, result.message end
  error(result, 0)
end

return literal
