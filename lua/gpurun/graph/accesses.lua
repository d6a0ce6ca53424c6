-- The nodes race_check.check takes, from the facts the C side reads of a
-- graph (types/graph_facts.c: kinds, dependencies, bodies, a copy's and a
-- fill's bytes, a kernel's pointer arguments): what each node reads and
-- writes. Copies and fills touch exactly their bytes. A kernel touches the
-- whole buffer (Buffer, view or mapped PinnedBuffer the graph keeps) each
-- pointer argument points into, from that address to the buffer's end,
-- read or read and written as kernel_access says. Allocation and free
-- nodes write the memory they make and free, so that a node unordered
-- with them is reported. No GPU here: the facts are plain tables.
local race_check = require("gpurun.graph.race_check")

local accesses = {}

local KEY = "memory" -- one address space: unified addressing

-- Kinds that touch no memory a check can see, and are not unknown either.
local NO_MEMORY = { empty = true, host = true, event_record = true, wait_event = true,
                    conditional = true }

local function hex(n) return ("0x%x"):format(n) end

-- The buffers by address: find(address) -> the buffer the address falls
-- in, and the start of the access. Where several start at the address (a
-- view at its base's start), the largest: a check may report a race that
-- is not there, never miss one.
local function buffer_finder(buffers)
  local sorted = {}
  for _, b in ipairs(buffers) do sorted[#sorted + 1] = b end
  table.sort(sorted, function(a, b)
    if a.address ~= b.address then return a.address < b.address end
    return a.bytes > b.bytes
  end)
  local memo = {}
  return function(address)
    local found = memo[address]
    if found ~= nil then return found or nil end
    local best
    for _, b in ipairs(sorted) do
      if b.address > address then break end
      if address < b.address + b.bytes and (not best or b.address > best.address
          or (b.address == best.address and b.bytes > best.bytes)) then
        best = b
      end
    end
    memo[address] = best or false
    return best
  end
end

local function label_of(buffer)
  local ok, text = pcall(tostring, buffer.object)
  return ((ok and text) or "memory") .. " at " .. hex(buffer.address)
end

-- nodes(facts, modes_of) -> the nodes for race_check.check; modes_of(kernel)
-- -> { [position] = { mode, how } } (kernel_access.of).
function accesses.nodes(facts, modes_of)
  local find = buffer_finder(facts.buffers or {})
  local allocations = {} -- address -> bytes, of the allocation nodes
  for _, f in ipairs(facts.nodes) do
    if f.kind == "mem_alloc" then allocations[f.address] = f.bytes end
  end
  local nodes = {}
  for i, f in ipairs(facts.nodes) do
    local list = {}
    local node = { kind = f.kind, name = f.name, dependencies = f.dependencies,
                   conditional = f.conditional, branch = f.branch, accesses = list }
    local function span(s, mode)
      local b = find(s.address)
      local label = b and label_of(b) or ("bytes at " .. hex(s.address))
      list[#list + 1] = { key = KEY, lo = s.address, hi = s.address + s.bytes, mode = mode,
                          label = label, buffer = b and b.object }
    end
    if f.enabled == false then
      -- A disabled node does nothing at replays: it only orders others.
      node.accesses = {}
    elseif f.kind == "kernel" then
      if f.opaque then
        node.unknown = f.opaque
      elseif not f.kernel then
        node.unknown = "a kernel not launched from a gpurun.Kernel (a library's): its arguments are not known"
      else
        local modes = modes_of(f.kernel)
        local positions = {}
        for p in pairs(f.arguments or {}) do positions[#positions + 1] = p end
        table.sort(positions)
        for _, p in ipairs(positions) do
          local b = find(f.arguments[p])
          if b then
            local m = modes[p] or { mode = "rw" }
            list[#list + 1] = { key = KEY, lo = f.arguments[p], hi = b.address + b.bytes,
                                mode = m.mode, label = label_of(b), buffer = b.object,
                                parameter = p, how = m.how }
          elseif allocations[f.arguments[p]] then
            local m = modes[p] or { mode = "rw" }
            list[#list + 1] = { key = KEY, lo = f.arguments[p],
                                hi = f.arguments[p] + allocations[f.arguments[p]], mode = m.mode,
                                label = "graph allocation at " .. hex(f.arguments[p]),
                                parameter = p, how = m.how }
          end
        end
      end
    elseif f.kind == "memcpy" then
      if f.src then span(f.src, "r") end
      if f.dst then span(f.dst, "w") end
      if not f.src and not f.dst then node.unknown = "a copy between CUDA arrays" end
    elseif f.kind == "memset" then
      span(f.dst, "w")
    elseif f.kind == "mem_alloc" or f.kind == "mem_free" then
      local bytes = allocations[f.address]
      if bytes then
        list[1] = { key = KEY, lo = f.address, hi = f.address + bytes, mode = "w",
                    label = "graph allocation at " .. hex(f.address) }
      end
    elseif f.opaque then
      node.unknown = f.opaque
    elseif not NO_MEMORY[f.kind] then
      node.unknown = ("a %s node: what it touches is not known"):format(f.kind)
    end
    nodes[i] = node
  end
  return nodes
end

-- check(facts, modes_of) -> races, unchecked (race_check.check's).
function accesses.check(facts, modes_of)
  return race_check.check(accesses.nodes(facts, modes_of))
end

return accesses
