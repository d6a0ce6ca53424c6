-- Which pointer parameters of a PTX kernel it may write through, when its
-- C source is not known (code from ObjectCode.from_ptx): a small dataflow
-- from each parameter (ld.param) through the registers computed from it
-- (cvta, address arithmetic, moves: any instruction but a load, whose
-- result is the memory's, not the address's) to the addresses of stores,
-- atomics and reductions. Flow-insensitive (every instruction is taken to
-- run, in any order, until nothing changes), so a loop or a branch never
-- hides a store. A parameter whose address is taken, or a register made
-- from it that is stored to memory or passed to a call, escapes: it may be
-- written through elsewhere.
local ptx_access = {}

-- The text of `.entry name(...) { ... }`: the parameter list and the body,
-- or nil.
local function entry(ptx, name)
  local at = 1
  while true do
    local first, last = ptx:find("%.entry%s+" .. name:gsub("%p", "%%%0") .. "%s*%(", at)
    if not first then return nil end
    local close = ptx:find(")", last + 1, true)
    if not close then return nil end
    local open, stop = ptx:find("%b{}", close)
    if stop then return ptx:sub(last + 1, close - 1), ptx:sub(open + 1, stop - 1) end
    at = last + 1
  end
end

-- Opcodes that write memory at their first [address] operand (discard
-- leaves it undefined: a write too).
local WRITERS = { "st", "atom", "red", "cp", "multimem", "wmma.store", "stmatrix", "mbarrier",
                  "tensormap", "discard" }

local function writes_memory(opcode)
  for _, prefix in ipairs(WRITERS) do
    local after = opcode:sub(#prefix + 1, #prefix + 1)
    if opcode:sub(1, #prefix) == prefix and (after == "" or after == ".") then return true end
  end
  return false
end

-- params(ptx, name) -> { [position] = "r" | "rw" }, and a why for each
-- { [position] = text }; or nil and why when the entry is not in the text.
function ptx_access.params(ptx, name)
  if type(ptx) ~= "string" or type(name) ~= "string" then
    return nil, "no PTX"
  end
  local list, body = entry(ptx, name)
  if not list then
    return nil, ("no .entry %s in the PTX"):format(name)
  end
  local names, position = {}, {}
  for param in list:gmatch("([%a_$][%w_$]*)%s*[%[,]") do names[#names + 1] = param end
  local last = list:match("([%a_$][%w_$]*)%s*$") or list:match("([%a_$][%w_$]*)%s*%[%d*%]%s*$")
  if last and names[#names] ~= last then names[#names + 1] = last end
  for p, param in ipairs(names) do position[param] = p end
  -- Instructions: what comes between semicolons, labels and comments dropped.
  local code = body:gsub("//[^\n]*", ""):gsub("/%*.-%*/", "")
  local instructions = {}
  for text in code:gmatch("[^;]+") do
    text = text:gsub("^%s*[%a_$][%w_$]*:", ""):gsub("^%s*@!?%%[%w_]+%s+", ""):match("^%s*(.-)%s*$")
    if text ~= "" and text:sub(1, 1) ~= "." and text:sub(1, 1) ~= "{" and text:sub(1, 1) ~= "}" then
      local opcode, rest = text:match("^([%w%.:_]+)%s*(.*)$")
      if opcode then instructions[#instructions + 1] = { opcode = opcode, operands = rest } end
    end
  end
  local taint = {}      -- register -> { [position] = true }
  local written, escaped = {}, {}
  local function add(register, from)
    local set = taint[register]
    if not set then
      set = {}
      taint[register] = set
    end
    local changed = false
    for p in pairs(from) do
      if not set[p] then
        set[p] = true
        changed = true
      end
    end
    return changed
  end
  -- Parameters named outside `ld.param ..., [param]`: their address taken.
  for _, ins in ipairs(instructions) do
    for word in ins.operands:gmatch("[%a_$][%w_$]*") do
      local p = position[word]
      if p and not (ins.opcode:match("^ld%.param") and ins.operands:find("%[%s*" .. word:gsub("%p", "%%%0")
          .. "%s*[%]+]")) then
        escaped[p] = "its address is taken (" .. ins.opcode .. ")"
      end
    end
  end
  local changed = true
  while changed do
    changed = false
    for _, ins in ipairs(instructions) do
      local opcode, operands = ins.opcode, ins.operands
      local dest, sources = operands:match("^(%%[%w_]+)%s*,%s*(.*)$")
      if not dest then dest, sources = operands:match("^(%b{})%s*,%s*(.*)$") end
      if opcode:match("^ld%.param") then
        local param = operands:match("%[%s*([%a_$][%w_$]*)")
        if dest and position[param] then
          changed = add(dest, { [position[param]] = true }) or changed
        end
      elseif writes_memory(opcode) then
        local address = operands:match("%[([^%]]*)%]")
        local from = {}
        for register in (address or ""):gmatch("%%[%w_]+") do
          for p in pairs(taint[register] or {}) do from[p] = true end
        end
        for p in pairs(from) do
          if not written[p] then
            written[p] = opcode
            changed = true
          end
        end
        -- What is stored (the operands outside the address): a tainted
        -- register stored lets the pointer escape.
        local stored = operands:gsub("%b[]", "")
        for register in stored:gmatch("%%[%w_]+") do
          for p in pairs(taint[register] or {}) do
            if not escaped[p] and not (opcode:match("^atom") and register == dest) then
              escaped[p] = "stored to memory (" .. opcode .. ")"
              changed = true
            end
          end
        end
      elseif opcode:match("^call") then
        for register in operands:gmatch("%%[%w_]+") do
          for p in pairs(taint[register] or {}) do
            if not escaped[p] then
              escaped[p] = "passed to a call"
              changed = true
            end
          end
        end
      elseif dest and not opcode:match("^ld") and not opcode:match("^tex")
          and not opcode:match("^suld") then
        local from = {}
        for register in sources:gmatch("%%[%w_]+") do
          for p in pairs(taint[register] or {}) do from[p] = true end
        end
        if next(from) then
          -- (A vector destination, {%r1, %r2}: each of its registers.)
          for register in dest:gmatch("%%[%w_]+") do changed = add(register, from) or changed end
        end
      end
    end
  end
  local modes, why = {}, {}
  for p = 1, #names do
    if escaped[p] then
      modes[p], why[p] = "rw", "PTX: " .. escaped[p]
    elseif written[p] then
      modes[p], why[p] = "rw", "PTX: written through (" .. written[p] .. ")"
    else
      modes[p], why[p] = "r", "PTX: never written through"
    end
  end
  return modes, why
end

return ptx_access
