-- CUDA C for gpurun.device_rng's fills: one program per dtype, holding
-- Philox4x32-10 and a kernel per kind of fill the dtype takes. No GPU and
-- no gpurun objects (only the dtype table): compute/random.lua compiles
-- and launches what this writes; docs/random.md says what each draws.
--
-- The stream of 32-bit words a fill reads: Philox4x32-10 of the counter
-- (offset + j, 0) under the key (seed) gives words 4j .. 4j + 3. A fill
-- of n elements taking W words each reads ceil(n * W / 4) counters, its
-- first element from the first word of counter `offset`, and moves the
-- offset past them.

local common = require("gpurun.common")

local DTYPES = common.DTYPES

local random_source = {}

random_source.BLOCK = 256

-- Kernel parameters after (T *out, unsigned long long n, unsigned int *state),
-- by kind, and the kinds a dtype has.
local EXTRA = {
  random = "",
  uniform = ", double low, double high",
  normal = ", double mean, double scale",
  integers = ", long long low, long long range_bits",
}

function random_source.kinds(dtype)
  if DTYPES[dtype].kind == "complex" then return {} end
  if DTYPES[dtype].float then return { "random", "uniform", "normal" } end
  return { "integers" }
end

-- Words (32 bits each) an element of `dtype` takes in a fill of `kind`.
function random_source.words(kind, dtype)
  local info = DTYPES[dtype]
  if kind == "integers" then return info.size == 8 and 4 or 2 end
  return info.size == 8 and 2 or 1
end

function random_source.kernel_name(kind, dtype)
  return ("gpurun_%s_%s"):format(kind, dtype)
end

-- Philox4x32-10 (Salmon, Moraes, Dror and Shaw, SC11; Random123's
-- philox4x32_10, cuRAND's philox4_32_10): ten rounds of two 32x32->64-bit
-- products, the key bumped by the Weyl constants between rounds.
local PHILOX = [[
__device__ __forceinline__ void gpurun_philox(unsigned int c0, unsigned int c1, unsigned int c2,
                                              unsigned int c3, unsigned int k0, unsigned int k1,
                                              unsigned int (&w)[4])
{
#pragma unroll
    for (int round = 0; round < 10; round++) {
        if (round > 0) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        const unsigned long long p0 = 0xD2511F53ull * c0;
        const unsigned long long p1 = 0xCD9E8D57ull * c2;
        const unsigned int next0 = (unsigned int)(p1 >> 32) ^ c1 ^ k0;
        const unsigned int next2 = (unsigned int)(p0 >> 32) ^ c3 ^ k1;
        c1 = (unsigned int)p1;
        c3 = (unsigned int)p0;
        c0 = next0;
        c2 = next2;
    }
    w[0] = c0;
    w[1] = c1;
    w[2] = c2;
    w[3] = c3;
}
// Two words as one 64-bit draw, the first the high half.
__device__ __forceinline__ unsigned long long gpurun_words64(unsigned int high, unsigned int low)
{
    return ((unsigned long long)high << 32) | low;
}
]]

-- The state is eight 32-bit words: the seed (low, high), the offset (low,
-- high), and the count of blocks that have read them. Every block reads
-- seed and offset first; the block that arrives last, when all the others
-- have read, writes the advanced offset and resets the count, so that the
-- next fill on the stream starts where this one ended. (A block chosen in
-- advance, block 0 say, could write before a block that runs later has
-- read: blocks are not all resident at once.)
local PROLOGUE = [[
    __shared__ unsigned int rng_key[2];
    __shared__ unsigned long long rng_offset;
    const unsigned long long rng_count = (n + %d - 1) / %d;
    if (threadIdx.x == 0) {
        rng_key[0] = __ldcg(state);
        rng_key[1] = __ldcg(state + 1);
        rng_offset = gpurun_words64(__ldcg(state + 3), __ldcg(state + 2));
        __threadfence();
        if (atomicAdd(state + 4, 1u) == gridDim.x - 1) {
            __threadfence();
            const unsigned long long next = rng_offset + rng_count;
            state[2] = (unsigned int)next;
            state[3] = (unsigned int)(next >> 32);
            state[4] = 0u;
        }
    }
    __syncthreads();]]

-- The loop over counters: each gives `per` elements, stored as one
-- aligned vector where the buffer allows it.
local LOOP = [[
    struct alignas(%d) rng_chunk { %s v[%d]; };
    const unsigned int k0 = rng_key[0], k1 = rng_key[1];
    const unsigned long long first = rng_offset;
    const bool aligned = ((unsigned long long)out %% sizeof(rng_chunk)) == 0;
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long j = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         j < rng_count; j += stride) {
        const unsigned long long counter = first + j;
        unsigned int w[4];
        gpurun_philox((unsigned int)counter, (unsigned int)(counter >> 32), 0u, 0u, k0, k1, w);
        rng_chunk chunk;
%s
        const unsigned long long e = j * %d;
        if (aligned && e + %d <= n) {
            *reinterpret_cast<rng_chunk *>(out + e) = chunk;
        } else {
            for (int k = 0; k < %d && e + k < n; k++)
                out[e + k] = chunk.v[k];
        }
    }]]

-- What converts a double to the dtype rounding down (toward -inf): every
-- uniform value is the exact one rounded down, so below `high`.
local ROUND_DOWN = {
  float64 = "%s",
  float32 = "__double2float_rd(%s)",
  float16 = "__float2half_rd(__double2float_rd(%s))",
  bfloat16 = "__float2bfloat16_rd(__double2float_rd(%s))",
}

-- The uniform fraction of element k (a multiple of 2^-digits in [0, 1),
-- which the dtype holds exactly), as C of the compute type.
local function fraction(dtype, k)
  local info = DTYPES[dtype]
  local digits = info.digits
  if info.size == 8 then
    return ("(double)(gpurun_words64(w[%d], w[%d]) >> 11) * 0x1p-53"):format(2 * k, 2 * k + 1)
  end
  return ("(float)(w[%d] >> %d) * 0x1p-%df"):format(k, 32 - digits, digits)
end

local function body_random(dtype, per)
  local lines = {}
  for k = 0, per - 1 do
    lines[#lines + 1] = ("        chunk.v[%d] = %s(%s);"):format(k, DTYPES[dtype].c, fraction(dtype, k))
  end
  return table.concat(lines, "\n")
end

local function body_uniform(dtype, per)
  local lines = {
    "        // low + (high - low) * u in double, kept below high, rounded down",
  }
  for k = 0, per - 1 do
    lines[#lines + 1] = ("        { double x = fma(span, (double)(%s), low); if (!(x < high)) x = below;"
      .. " chunk.v[%d] = %s; }"):format(fraction(dtype, k), k, ROUND_DOWN[dtype]:format("x"))
  end
  return table.concat(lines, "\n")
end

-- Box-Muller: a pair from two words (two 64-bit draws for float64): the
-- radius sqrt(-2 ln u1) from u1 in (0, 1), the angle from u2. float64
-- takes pi * u2 (sincospi), u2 in [0, 2). The narrower dtypes take the
-- hardware's sine and cosine (__sincosf), as cuRAND's curand_normal does,
-- of pi * u2 for u2 in [-1, 1), where that is most accurate.
local function body_normal(dtype, per)
  local c = DTYPES[dtype].c
  local lines = {}
  for pair = 0, per // 2 - 1 do
    local a, b = 2 * pair, 2 * pair + 1
    if DTYPES[dtype].size == 8 then
      lines[#lines + 1] = ("        { const double u1 = (double)(gpurun_words64(w[0], w[1]) >> 11) * 0x1p-53\n"
        .. "                            + 0x1p-54;\n"
        .. "          const double u2 = (double)(gpurun_words64(w[2], w[3]) >> 11) * 0x1p-52;\n"
        .. "          double s, c; sincospi(u2, &s, &c); const double r = sqrt(-2.0 * log(u1));\n"
        .. "          chunk.v[%d] = fma(scale, r * c, mean); chunk.v[%d] = fma(scale, r * s, mean); }"):format(a, b)
    else
      lines[#lines + 1] = ("        { const float u1 = (float)(w[%d] >> 8) * 0x1p-24f + 0x1p-25f;\n"
        .. "          const float u2 = (float)(w[%d] >> 8) * 0x1p-23f - 1.0f;\n"
        .. "          float s, c; __sincosf(3.14159265f * u2, &s, &c); const float r = sqrtf(-2.0f * logf(u1));\n"
        .. "          chunk.v[%d] = %s(fmaf(scalef, r * c, meanf));\n"
        .. "          chunk.v[%d] = %s(fmaf(scalef, r * s, meanf)); }")
        :format(a, b, a, c, b, c)
    end
  end
  return table.concat(lines, "\n")
end

-- low + floor(draw * range / 2^bits): a 64-bit draw (128-bit for the
-- 64-bit dtypes) scaled by multiplication, Lemire's method without its
-- rejection step, so that each element takes a fixed number of words.
local function body_integers(dtype, per)
  local c = DTYPES[dtype].c
  local lines = {}
  if DTYPES[dtype].size == 8 then
    lines[#lines + 1] = "        { const unsigned long long upper = gpurun_words64(w[0], w[1]);\n"
      .. "          const unsigned long long lower = gpurun_words64(w[2], w[3]);\n"
      .. "          const unsigned long long product = upper * range, carry_in = __umul64hi(lower, range);\n"
      .. "          const unsigned long long top = __umul64hi(upper, range) + (product + carry_in < product);\n"
      .. ("          chunk.v[0] = (%s)((unsigned long long)low_value + top); }"):format(c)
  else
    for k = 0, per - 1 do
      lines[#lines + 1] = ("        { const unsigned long long part = (unsigned long long)w[%d] * range;\n"
        .. "          const unsigned long long whole = (unsigned long long)w[%d] * range + (part >> 32);\n"
        .. "          chunk.v[%d] = (%s)((unsigned long long)low_value + (whole >> 32)); }"):format(
        2 * k + 1, 2 * k, k, c)
    end
  end
  return table.concat(lines, "\n")
end

local BODY = { random = body_random, uniform = body_uniform, normal = body_normal,
               integers = body_integers }

-- What a kernel computes once, before its loop.
local SETUP = {
  random = "",
  uniform = "    const double span = high - low, below = nextafter(high, low);\n",
  normal = "",
  integers = "    const unsigned long long range = (unsigned long long)range_bits;\n"
    .. "    const long long low_value = low;\n",
}

local function kernel(kind, dtype)
  local info = DTYPES[dtype]
  local per = 4 // random_source.words(kind, dtype)
  local setup = SETUP[kind]
  if kind == "normal" and info.size ~= 8 then
    setup = "    const float meanf = (float)mean, scalef = (float)scale;\n"
  end
  return table.concat({
    ('extern "C" __global__ void __launch_bounds__(%d) %s(%s *__restrict__ out, unsigned long long n, '
     .. 'unsigned int *state%s)'):format(random_source.BLOCK, random_source.kernel_name(kind, dtype),
                                          info.c, EXTRA[kind]),
    "{",
    PROLOGUE:format(per, per),
    setup .. LOOP:format(per * info.size, info.c, per, BODY[kind](dtype, per), per, per, per),
    "}",
  }, "\n")
end

-- source(dtype) -> the program's CUDA C, its kernels' names by kind.
function random_source.source(dtype)
  local info = DTYPES[dtype]
  local parts, names = {}, {}
  if info.header then parts[#parts + 1] = ("#include <%s>"):format(info.header) end
  parts[#parts + 1] = PHILOX
  for _, kind in ipairs(random_source.kinds(dtype)) do
    parts[#parts + 1] = kernel(kind, dtype)
    names[kind] = random_source.kernel_name(kind, dtype)
  end
  return table.concat(parts, "\n") .. "\n", names
end

return random_source
