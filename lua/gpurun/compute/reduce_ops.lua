-- The named operations of reductions and scans (sum, prod, min, max,
-- argmin, argmax, any, all) as CUDA C: how two values combine and what the
-- identity of each dtype is. No GPU and no gpurun objects.
--
-- min and max propagate NaN (a NaN anywhere gives NaN, as numpy's and
-- torch's do); argmin and argmax pick the first NaN, else the first of
-- equal extremes, so that the answer never depends on the order in which
-- values were combined.

local ops = {}

ops.NAMES = "sum, prod, min, max, argmin, argmax, any, all"
ops.SCAN_NAMES = "sum, prod, min, max"

-- The extremes of each dtype as its accumulator holds them: float16 and
-- bfloat16 are reduced in float (their compute type), so float's infinity.
local INF = { float32 = "__int_as_float(0x7f800000)", float64 = "__longlong_as_double(0x7ff0000000000000LL)" }
INF.float16, INF.bfloat16 = INF.float32, INF.float32
local LOWEST = {
  int8 = "(-128)", uint8 = "0", int16 = "(-32768)", uint16 = "0", int32 = "(-2147483647 - 1)",
  uint32 = "0u", int64 = "(-9223372036854775807LL - 1)", uint64 = "0ull",
}
local HIGHEST = {
  int8 = "127", uint8 = "255", int16 = "32767", uint16 = "65535", int32 = "2147483647",
  uint32 = "4294967295u", int64 = "9223372036854775807LL", uint64 = "18446744073709551615ull",
}
for dtype, inf in pairs(INF) do
  LOWEST[dtype], HIGHEST[dtype] = "(-" .. inf .. ")", inf
end
ops.LOWEST, ops.HIGHEST = LOWEST, HIGHEST

-- name -> { combine = C expression of a and b, identity = function(dtype)
-- -> C expression, arg = true for argmin/argmax (a value and its index),
-- logical = true for any/all (reduced as bool), scan = usable in scans }.
ops.named = {
  sum = { combine = "a + b", identity = function() return "0" end, scan = true },
  prod = { combine = "a * b", identity = function() return "1" end, scan = true },
  -- b != b: a NaN wins and stays (an integer is never unequal to itself)
  max = { combine = "(b > a || b != b) ? b : a", identity = function(dtype) return LOWEST[dtype] end,
          scan = true },
  min = { combine = "(b < a || b != b) ? b : a", identity = function(dtype) return HIGHEST[dtype] end,
          scan = true },
  argmax = { arg = "max", identity = function(dtype) return LOWEST[dtype] end },
  argmin = { arg = "min", identity = function(dtype) return HIGHEST[dtype] end },
  any = { combine = "a || b", identity = function() return "false" end, logical = true },
  all = { combine = "a && b", identity = function() return "true" end, logical = true },
}

-- The combine of argmin/argmax over pairs { v, i }: x is kept unless y's
-- value is further out, or equal with a smaller index; NaN is further out
-- than anything, and of two NaNs the first index wins. i is unsigned, so
-- the identity's index (all ones) loses every tie.
function ops.arg_combine(kind, x, y)
  local further = kind == "max" and ">" or "<"
  return ("((%s.v != %s.v) ? (%s.v == %s.v || %s.i < %s.i) "
          .. ": (%s.v == %s.v && (%s.v %s %s.v || (%s.v == %s.v && %s.i < %s.i))))"):format(
          y, y, x, x, y, x,
          x, x, y, further, x, y, x, y, x)
end

return ops
