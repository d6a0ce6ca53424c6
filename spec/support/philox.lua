-- A host reference of Philox4x32-10 (Salmon et al., SC11) in Lua 5.4's
-- 64-bit integers, and the fills of gpurun.device_rng written from its
-- words as docs/random.md describes them: what the specs compare the
-- device's (and the emulated kernels') output with, element for element.
local philox = {}

local M0, M1 = 0xD2511F53, 0xCD9E8D57
local W0, W1 = 0x9E3779B9, 0xBB67AE85
local MASK = 0xffffffff

-- block(c0, c1, c2, c3, k0, k1) -> the four output words.
function philox.block(c0, c1, c2, c3, k0, k1)
  for round = 1, 10 do
    if round > 1 then
      k0, k1 = (k0 + W0) & MASK, (k1 + W1) & MASK
    end
    local p0, p1 = M0 * c0, M1 * c2 -- below 2^64: Lua wraps, >> is logical
    c0, c1, c2, c3 = ((p1 >> 32) ~ c1 ~ k0) & MASK, p1 & MASK, ((p0 >> 32) ~ c3 ~ k1) & MASK, p0 & MASK
  end
  return c0, c1, c2, c3
end

-- words(seed, offset, count) -> the first `count` words of the stream a
-- fill reads from state (seed, offset).
function philox.words(seed, offset, count)
  local list = {}
  local counter = offset
  while #list < count do
    local a, b, c, d = philox.block(counter & MASK, counter >> 32, 0, 0, seed & MASK, seed >> 32)
    list[#list + 1], list[#list + 2], list[#list + 3], list[#list + 4] = a, b, c, d
    counter = counter + 1
  end
  for i = count + 1, #list do list[i] = nil end
  return list
end

-- random(seed, offset, n, digits) -> n uniform fractions of a float dtype
-- of `digits` significant bits up to 32 (float32: 24): one word each.
function philox.random(seed, offset, n, digits)
  local list = philox.words(seed, offset, n)
  for i, w in ipairs(list) do list[i] = (w >> (32 - digits)) * 2.0 ^ -digits end
  return list
end

-- integers(seed, offset, n, low, high) -> n integers of a dtype of at most
-- 32 bits in [low, high): two words each, the first the high half.
function philox.integers(seed, offset, n, low, high)
  local words = philox.words(seed, offset, 2 * n)
  local range = high - low
  local list = {}
  for i = 1, n do
    local whole = words[2 * i - 1] * range + ((words[2 * i] * range) >> 32)
    list[i] = low + (whole >> 32)
  end
  return list
end

-- counters(n, words_each) -> how far a fill of n elements of
-- `words_each` words moves the offset.
function philox.counters(n, words_each)
  return (n * words_each + 3) // 4
end

return philox
