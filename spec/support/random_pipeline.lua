-- Random pipelines for the race specs (spec/pipeline_race_spec.lua): data
-- (temporaries, or buffers when a maker is given, and views of them that
-- overlap), stages that read and write them at random (fills, copies,
-- elementwise kernels that fuse, host callbacks), and a host model of what
-- each stage does, to run the declaration in order and the plan in any
-- order its schedule allows.
local gpurun = require("gpurun")

local random_pipeline = {}

local COUNT = 16     -- elements of a base
local VIEW = 8       -- elements of a view

local kernels
local function elementwise()
  if not kernels then
    kernels = {
      add = gpurun.elementwise("float32 a, float32 b", "float32 r", "r = a + b", "radd"),
      mix = gpurun.elementwise("float32 a, float32 b", "float32 r", "r = a * 0.5f + b", "rmix"),
      bump = gpurun.elementwise("float32 a", "float32 r", "r = a; r += 1.0f", "rbump"),
    }
  end
  return kernels
end

-- The host model of each kernel, element by element.
local MODEL = {
  add = function(a, b) return a + b end,
  mix = function(a, b) return a * 0.5 + b end,
  bump = function(a) return a + 1 end,
}
random_pipeline.MODEL = MODEL

local function overlaps(x, y)
  return x.key == y.key and x.lo < y.hi and y.lo < x.hi
end

-- new(seed [, make_buffer [, options]]) -> { pipeline, data = { d... },
-- steps = { ... } }: make_buffer(count) gives a buffer for each base (GPU
-- specs), else the bases are temporaries; options.kernels = { add =, mix
-- =, bump = } kernel objects in place of the elementwise ones (the fake
-- GPU's). Every base is filled first, so nothing reads what nothing wrote.
function random_pipeline.new(seed, make_buffer, options)
  local random = math.random
  math.randomseed(seed)
  local k = options and options.kernels or elementwise()
  local p = gpurun.pipeline{ name = "race" .. seed, max_streams = random(1, 4),
                             fuse = random(4) ~= 1, quiet = true }
  local bases, all = {}, {}
  for b = 1, random(2, 5) do
    local name = "b" .. b
    local d = make_buffer and p:buffer(name, make_buffer(COUNT)) or p:temporary(name, COUNT)
    bases[b] = d
    all[#all + 1] = d
  end
  for v = 1, random(0, 4) do
    local base = bases[random(#bases)]
    all[#all + 1] = p:view("v" .. v, base, random(1, COUNT - VIEW + 1), VIEW)
  end
  local steps = {}
  local function step(entry)
    steps[#steps + 1] = entry
  end
  for b, d in ipairs(bases) do
    p:fill(d, b, { name = "init" .. b })
    step({ kind = "fill", dst = d, value = b })
  end
  local function pick(count, avoid)
    for _ = 1, 20 do
      local d = all[random(#all)]
      if d.count == count then
        local clash = false
        for _, other in ipairs(avoid or {}) do
          if other ~= d and overlaps(other, d) then clash = true end
        end
        if not clash then return d end
      end
    end
    return nil
  end
  local stages = random(5, (options and options.max_stages) or 30)
  local hosts = {}
  for s = 1, stages do
    local roll = random(10)
    local count = random(2) == 1 and COUNT or VIEW
    if roll <= 2 then
      local d = pick(count)
      if d then
        local value = random(0, 9)
        p:fill(d, value, { name = "fill" .. s })
        step({ kind = "fill", dst = d, value = value })
      end
    elseif roll <= 4 then
      local src = pick(count)
      local dst = src and pick(count, { src })
      if dst and dst ~= src then
        p:copy(dst, src, { name = "copy" .. s })
        step({ kind = "copy", dst = dst, src = src })
      end
    elseif roll <= 9 then
      local a = pick(count)
      local b = a and pick(count, { a })
      local r = b and pick(count, { a, b })
      if r then
        local which = ({ "add", "mix", "bump" })[random(3)]
        if which == "bump" then
          p:call{ k.bump, a, r, name = "bump" .. s }
          step({ kind = "call", model = MODEL.bump, inputs = { a }, out = r })
        else
          p:call{ k[which], a, b, r, name = which .. s }
          step({ kind = "call", model = MODEL[which], inputs = { a, b }, out = r })
        end
      end
    else
      -- A host callback: a barrier, or one that records a value it reads
      -- from a table the pipeline knows as host data.
      local state = {}
      hosts[#hosts + 1] = state
      if random(2) == 1 then
        p:host(function() state.ran = (state.ran or 0) + 1 end, { name = "host" .. s })
      else
        local d = p:buffer("state" .. s, state)
        p:host(function() state.ran = (state.ran or 0) + 1 end,
               { name = "host" .. s, writes = { d } })
      end
      step({ kind = "host" })
    end
  end
  return { pipeline = p, data = all, bases = bases, steps = steps, hosts = hosts }
end

-- ---- the host model -----------------------------------------------------------------

-- memory[key][element] (elements of 4 bytes from the key's byte 0).
local function element_range(d)
  return d.lo // 4, d.hi // 4 - 1
end

local function read(memory, d)
  local cells = memory[d.key]
  local first, last = element_range(d)
  local values = {}
  for e = first, last do values[#values + 1] = cells[e] or 0 end
  return values
end

local function write(memory, d, values)
  local cells = memory[d.key]
  local first = element_range(d)
  for i, value in ipairs(values) do cells[first + i - 1] = value end
end

function random_pipeline.apply(memory, step)
  if step.kind == "fill" then
    local values = {}
    for i = 1, step.dst.count do values[i] = step.value end
    write(memory, step.dst, values)
  elseif step.kind == "copy" then
    write(memory, step.dst, read(memory, step.src))
  elseif step.kind == "call" then
    local inputs = {}
    for i, d in ipairs(step.inputs) do inputs[i] = read(memory, d) end
    local out = {}
    for e = 1, step.out.count do
      out[e] = step.model(inputs[1][e], inputs[2] and inputs[2][e])
    end
    write(memory, step.out, out)
  end
end

function random_pipeline.new_memory(case)
  local memory = {}
  for _, d in ipairs(case.data) do memory[d.key] = memory[d.key] or {} end
  return memory
end

-- The values of every base after running `order` (a list of step indices).
function random_pipeline.run(case, order)
  local memory = random_pipeline.new_memory(case)
  for _, index in ipairs(order) do
    random_pipeline.apply(memory, case.steps[index])
  end
  local result = {}
  for b, d in ipairs(case.bases) do result[b] = read(memory, d) end
  return result
end

-- Whether two planned stages conflict, written out here as the specs'
-- own oracle (not pipeline/access.lua's rule they check): some pair of
-- their accesses shares bytes of one key, and one of the two writes.
function random_pipeline.conflicting(a, b)
  for _, x in ipairs(a.accesses) do
    for _, y in ipairs(b.accesses) do
      if x.data.key == y.data.key and x.data.lo < y.data.hi and y.data.lo < x.data.hi
          and (x.mode ~= "r" or y.mode ~= "r") then
        return true
      end
    end
  end
  return false
end

return random_pipeline
