-- gpurun.TensorMap: TMA descriptors over buffers (Buffer:as_tensor_map),
-- their checks (gpurun.check_tensor_map, the same checks with no buffer
-- and no GPU), launches of a TMA tile copy, replace_address, and what
-- plans and graphs keep.
local gpurun = require("gpurun")

local CUDA_INCLUDE = (os.getenv("CUDA_HOME") or "/usr/local/cuda") .. "/include"

-- Each block copies one TILE x TILE tile of src into dst through shared
-- memory: a TMA load into shared memory, then a TMA store from it.
local SOURCE = [[
#include <cuda/barrier>
struct __align__(64) TensorMap { unsigned long long opaque[16]; };
using Barrier = cuda::barrier<cuda::thread_scope_block>;
namespace tma = cuda::device::experimental;
constexpr int TILE = 16;

extern "C" __global__ void copy_tiles(const __grid_constant__ TensorMap src,
                                      const __grid_constant__ TensorMap dst)
{
  __shared__ alignas(128) float tile[TILE][TILE];
  __shared__ Barrier bar;
  int x = blockIdx.x * TILE, y = blockIdx.y * TILE;
  if (threadIdx.x == 0) init(&bar, blockDim.x);
  __syncthreads();
  Barrier::arrival_token token;
  if (threadIdx.x == 0) {
    tma::cp_async_bulk_tensor_2d_global_to_shared(&tile, reinterpret_cast<const CUtensorMap *>(&src),
                                                  x, y, bar);
    token = cuda::device::barrier_arrive_tx(bar, 1, sizeof tile);
  } else {
    token = bar.arrive();
  }
  bar.wait(cuda::std::move(token));
  tma::fence_proxy_async_shared_cta();
  __syncthreads();
  if (threadIdx.x == 0) {
    tma::cp_async_bulk_tensor_2d_shared_to_global(reinterpret_cast<const CUtensorMap *>(&dst), x, y,
                                                  &tile);
    tma::cp_async_bulk_commit_group();
    tma::cp_async_bulk_wait_group_read<0>();
  }
}

extern "C" __global__ void takes_pointer(float *x) { x[0] = 1.0f; }
extern "C" __global__ void takes_struct(const __grid_constant__ TensorMap map, float *x) { x[0] = 1.0f; }
]]

local function compile(arch, target)
  local options = gpurun.ProgramOptions{ std = "c++17", arch = arch,
    include_paths = { CUDA_INCLUDE .. "/cccl", CUDA_INCLUDE } }
  return gpurun.Program(SOURCE, "c++", options):compile(target)
end

local function refuses(expected, f, ...)
  local ok, message = pcall(f, ...)
  assert.is_false(ok, "expected an error: " .. expected)
  assert.is_truthy(tostring(message):find(expected, 1, true),
    ("expected %q in %q"):format(expected, tostring(message)))
end

describe("TensorMap", function()
  describe("checks, with no buffer and no GPU", function()
    local CHECK = "bad argument #1 to 'gpurun.check_tensor_map' ("
    local function check(options, dtype, count, address)
      return gpurun.check_tensor_map(options, dtype or "float32", count or 4096, address)
    end

    it("take what the driver takes", function()
      assert.is_true(check{ shape = { 64, 64 }, box_dim = { 16, 16 } })
      assert.is_true(check{ box_dim = { 128 } }) -- the whole buffer, one dimension
      assert.is_true(check({ shape = { 64, 64 }, strides = { 128, 1 }, box_dim = { 8, 32 },
        element_strides = { 2, 1 }, swizzle = "swizzle_128b", l2_promotion = "l2_256b",
        oob_fill = "nan_request_zero_fma" }, "float32", 64 * 128))
      assert.is_true(check({ shape = { 2, 4, 8 }, box_dim = { 1, 2, 8 }, interleave = "interleave_16b" },
        "float16", 64))
      assert.is_true(check({ box_dim = { 16 }, data_type = "uint8" }, "int8", 64))
      assert.is_true(check({ box_dim = { 16 } }, "float32", 64, 4096))
    end)

    -- Each row: options, dtype, count, address, what the message says.
    for _, row in ipairs{
      { { shape = { 1, 1, 1, 1, 1, 1 }, box_dim = { 1 } }, nil, nil, nil,
        "shape has 6 entries: a TMA tensor has 1 to 5 dimensions" },
      { { shape = {}, box_dim = { 1 } }, nil, nil, nil, "shape has 0 entries" },
      { { shape = { 64, 0 }, box_dim = { 1, 16 } }, nil, nil, nil,
        "shape[2] is 0: a dimension is 1..4294967296 elements" },
      { { shape = { 64, 64.5 }, box_dim = { 16, 16 } }, nil, nil, nil,
        "shape[2]: an integer expected, got 64.5" },
      { { shape = "64", box_dim = { 16 } }, nil, nil, nil,
        "shape: a sequence of integers expected, got string" },
      { { shape = { 64, 64 } }, nil, nil, nil, "box_dim is required" },
      { { shape = { 64, 64 }, box_dim = { 16 } }, nil, nil, nil, "box_dim has 1 entries; shape has 2" },
      { { shape = { 64, 64 }, box_dim = { 0, 16 } }, nil, nil, nil,
        "box_dim[1] is 0: a box dimension is 1..256 elements" },
      { { shape = { 64, 64 }, box_dim = { 257, 16 } }, nil, nil, nil,
        "box_dim[1] is 257: a box dimension is 1..256 elements" },
      { { shape = { 64, 64 }, box_dim = { 16, 2 } }, nil, nil, nil,
        "box_dim[2] is 2 elements = 8 bytes: the innermost box dimension must be a multiple of 16 bytes" },
      { { shape = { 64, 64 }, box_dim = { 16, 64 }, swizzle = "swizzle_128b" }, nil, nil, nil,
        "box_dim[2] is 64 elements = 256 bytes, more than swizzle 'swizzle_128b' spans (128 bytes)" },
      { { shape = { 64, 64 }, box_dim = { 16, 16 }, swizzle = "swizzle_32b" }, nil, nil, nil,
        "box_dim[2] is 16 elements = 64 bytes, more than swizzle 'swizzle_32b' spans (32 bytes)" },
      { { shape = { 64, 64 }, strides = { 64 }, box_dim = { 16, 16 } }, nil, nil, nil,
        "strides has 1 entries; shape has 2" },
      { { shape = { 64, 64 }, strides = { 64, 2 }, box_dim = { 16, 16 } }, nil, 1 << 20, nil,
        "strides[2] is 2: the innermost dimension is read contiguously, so its stride must be 1" },
      { { shape = { 64, 64 }, strides = { 66, 1 }, box_dim = { 16, 16 } }, nil, 1 << 20, nil,
        "strides[1] is 66 elements = 264 bytes: a stride must be a multiple of 16 bytes" },
      { { shape = { 2, 64 }, strides = { 1 << 38, 1 }, box_dim = { 1, 16 } }, nil, 1 << 20, nil,
        "strides[1] is 274877906944 elements: a stride must be less than 2^40 bytes" },
      { { shape = { 64, 64 }, strides = { 0, 1 }, box_dim = { 16, 16 } }, nil, nil, nil,
        "strides[1] is 0: a stride is a positive number of elements" },
      { { shape = { 1 << 32, 1 << 32, 1 << 32 }, box_dim = { 1, 1, 16 } }, nil, nil, nil,
        "shape: its dimensions after the first hold more than 2^62 elements" },
      { { shape = { 64, 64 }, box_dim = { 16, 16 }, element_strides = { 1, 9 } }, nil, nil, nil,
        "element_strides[2] is 9: an element stride is 1..8" },
      { { shape = { 64, 64 }, box_dim = { 16, 16 }, element_strides = { 1 } }, nil, nil, nil,
        "element_strides has 1 entries; shape has 2" },
      { { box_dim = { 16 } }, "int8", nil, nil,
        "data_type int8 has no TMA element type (TMA moves float32, float64, int32, uint32, " ..
        "int64, uint64, uint8, uint16, float16, bfloat16; pass data_type = one of those of the same size)" },
      { { box_dim = { 16 }, data_type = "double" }, nil, nil, nil,
        "data_type: unknown dtype 'double' (expected one of: float32," },
      { { box_dim = { 16 }, data_type = 4 }, nil, nil, nil, "data_type: a dtype name expected, got number" },
      { { box_dim = { 16 }, swizzle = "128b" }, nil, nil, nil,
        "swizzle: one of none, swizzle_32b, swizzle_64b, swizzle_128b expected, got '128b'" },
      { { box_dim = { 16 }, swizzle = 3 }, nil, nil, nil,
        "swizzle: one of none, swizzle_32b, swizzle_64b, swizzle_128b expected, got number" },
      { { box_dim = { 16 }, interleave = "16b" }, nil, nil, nil,
        "interleave: one of none, interleave_16b, interleave_32b expected, got '16b'" },
      { { box_dim = { 16 }, l2_promotion = "l2_512b" }, nil, nil, nil,
        "l2_promotion: one of none, l2_64b, l2_128b, l2_256b expected, got 'l2_512b'" },
      { { box_dim = { 16 }, oob_fill = "zero" }, nil, nil, nil,
        "oob_fill: one of none, nan_request_zero_fma expected, got 'zero'" },
      { { box_dim = { 16 }, oob_fill = "nan_request_zero_fma" }, "int32", nil, nil,
        "oob_fill 'nan_request_zero_fma' needs a floating-point data_type, not int32" },
      { { shape = { 64, 64 }, box_dim = { 16, 16 }, interleave = "interleave_16b" }, nil, nil, nil,
        "interleave 'interleave_16b' needs a shape of 3 or more dimensions; this one has 2" },
      { { shape = { 4, 8, 8 }, box_dim = { 1, 8, 8 }, interleave = "interleave_32b" }, nil, nil, nil,
        "interleave 'interleave_32b' needs swizzle 'swizzle_32b', not 'none'" },
      { { shape = { 4, 8, 8 }, box_dim = { 1, 8, 8 }, interleave = "interleave_32b",
          swizzle = "swizzle_32b" }, nil, nil, 16,
        "the buffer's address 0x10 is not 32-byte aligned" },
      { { box_dim = { 16 } }, nil, nil, 8,
        "the buffer's address 0x8 is not 16-byte aligned (a view must start a multiple of 16 bytes into its buffer)" },
      { { shape = { 64, 64 }, box_dim = { 16, 16 } }, nil, 4095, nil,
        "the layout reaches 16384 bytes but the buffer holds 16380" },
      { { shape = { 64, 64 }, strides = { 128, 1 }, box_dim = { 16, 16 } }, nil, 64 * 64, nil,
        "the layout reaches 32512 bytes but the buffer holds 16384" },
      { { box_dim = { 16 }, bogus = 1 }, nil, nil, nil,
        "unknown option 'bogus' (known: shape, strides, box_dim, element_strides, data_type, " ..
        "interleave, swizzle, l2_promotion, oob_fill)" },
      { { box_dim = { 16 }, data_type = "uint32" }, "uint8", 6, nil,
        "shape is required: the buffer's 6 bytes are no whole number of uint32 elements" },
      { { box_dim = { 16 } }, nil, 1 << 40, nil,
        "shape is required for more than 4294967296 elements (a dimension holds no more); the buffer has 1099511627776" },
    } do
      local options, dtype, count, address, expected = table.unpack(row, 1, 5)
      it("refuse: " .. expected, function()
        refuses(CHECK .. expected, check, options, dtype, count, address)
      end)
    end

    it("refuse what is not options, a dtype, a count or an address", function()
      refuses(CHECK .. "table of options expected (box_dim at least)", gpurun.check_tensor_map,
        nil, "float32", 16)
      refuses("bad argument #1 to 'gpurun.check_tensor_map' (table of options expected, got number)",
        gpurun.check_tensor_map, 5, "float32", 16)
      refuses("bad argument #2 to 'gpurun.check_tensor_map' (dtype name expected, got no value)",
        gpurun.check_tensor_map, { box_dim = { 16 } })
      refuses("bad argument #3 to 'gpurun.check_tensor_map' (positive element count expected, got 0)",
        gpurun.check_tensor_map, { box_dim = { 16 } }, "float32", 0)
      refuses("bad argument #4 to 'gpurun.check_tensor_map' (address is -16: a non-negative integer expected)",
        gpurun.check_tensor_map, { box_dim = { 16 } }, "float32", 16, -16)
    end)

    it("take dtypes from the one table, which says which have a TMA type", function()
      local mapped = {}
      for _, dtype in ipairs(gpurun.dtypes) do
        if dtype.tensor_map then mapped[#mapped + 1] = dtype.name end
      end
      assert.are.same({ "float32", "float64", "int32", "uint32", "int64", "uint64", "uint8", "uint16",
        "float16", "bfloat16" }, mapped)
      assert.is_false(gpurun.dtypes.int8.tensor_map)
    end)

    it("match how NVRTC declares a __grid_constant__ CUtensorMap parameter", function()
      local code <close> = compile("sm_90", "ptx")
      local entry = code.code:match("%.entry copy_tiles(%b())")
      assert.is_truthy(entry)
      assert.matches("%.param %.align 64 %.b8 copy_tiles_param_0%[128%]", entry)
      assert.matches("%.param %.align 64 %.b8 copy_tiles_param_1%[128%]", entry)
    end)
  end)

  describe("on a GPU", function()
    local device, code, stream
    local ROWS, COLS, TILE = 64, 48, 16

    before_each(function()
      device = gpurun.Device(0)
      device:set_current()
      code = code or compile("sm_" .. device.arch, "cubin")
      stream = device:create_stream()
    end)

    after_each(function()
      if stream then stream:close() end
    end)

    local function host_values(seed)
      local values = {}
      for i = 1, ROWS * COLS do values[i] = (i * 7 + seed) % 1000 end
      return values
    end

    local function map_of(buffer)
      return buffer:as_tensor_map{ shape = { ROWS, COLS }, box_dim = { TILE, TILE } }
    end

    local config = gpurun.LaunchConfig{ grid = { COLS // TILE, ROWS // TILE }, block = 128 }

    it("copies a 2D buffer tile by tile through TMA, as the host has it #gpu", function()
      local values = host_values(3)
      local src <close> = gpurun.array(values, "float32")
      local dst <close> = gpurun.zeros(ROWS * COLS, "float32")
      local from <close> = map_of(src)
      local to <close> = map_of(dst)
      assert.are.equal("gpurun.TensorMap(float32, 2 dimensions)", tostring(from))
      assert.are.equal(".align 64 .b8[128]", code:get_kernel("copy_tiles"):params()[1].type)
      gpurun.launch(stream, config, code:get_kernel("copy_tiles"), from, to)
      stream:sync()
      assert.are.same(values, dst:to_table())
    end)

    it("points at another buffer with replace_address, without encoding again #gpu", function()
      local first <close> = gpurun.array(host_values(1), "float32")
      local second <close> = gpurun.array(host_values(2), "float32")
      local dst <close> = gpurun.zeros(ROWS * COLS, "float32")
      local from <close> = map_of(first)
      local to <close> = map_of(dst)
      local copy = code:get_kernel("copy_tiles")
      gpurun.launch(stream, config, copy, from, to)
      stream:sync()
      assert.are.same(host_values(1), dst:to_table())
      assert.are.equal(from, from:replace_address(second))
      gpurun.launch(stream, config, copy, from, to)
      stream:sync()
      assert.are.same(host_values(2), dst:to_table())
      -- a tile inside a larger buffer: the same layout from a later row
      local tall <close> = gpurun.array(host_values(4), "float32")
      local rows_down = tall:view(COLS * 16 + 1, COLS * (ROWS - 16))
      refuses("bad argument #1 to 'TensorMap:replace_address' (the map's layout reaches 12288 bytes " ..
        "but the buffer holds 9216)", from.replace_address, from, rows_down)
    end)

    it("refuses a buffer of another dtype, misaligned or too small #gpu", function()
      local src <close> = gpurun.zeros(ROWS * COLS, "float32")
      local from <close> = map_of(src)
      local ints <close> = gpurun.zeros(ROWS * COLS, "int32")
      refuses("bad argument #1 to 'TensorMap:replace_address' (a float32 buffer expected, as the map " ..
        "was made over; got int32)", from.replace_address, from, ints)
      refuses("bad argument #1 to 'TensorMap:replace_address' (the buffer's address", from.replace_address,
        from, src:view(2, 16))
      refuses("bad argument #1 to 'TensorMap:replace_address' (gpurun.Buffer expected, got number)",
        from.replace_address, from, 5)
      refuses("bad argument #1 to 'Buffer:as_tensor_map' (the buffer's address", src.as_tensor_map,
        src:view(2, 64), { box_dim = { 16 } })
      refuses("bad argument #1 to 'Buffer:as_tensor_map' (the layout reaches 12288 bytes but the buffer " ..
        "holds 12284)", src.as_tensor_map, src:view(1, ROWS * COLS - 1), { shape = { ROWS, COLS },
          box_dim = { TILE, TILE } })
      refuses("bad argument #1 to 'Buffer:as_tensor_map' (table of options expected (box_dim at least))",
        src.as_tensor_map, src)
      refuses("bad argument #1 to 'Buffer:as_tensor_map' (data_type int8 has no TMA element type",
        gpurun.zeros(64, "int8").as_tensor_map, gpurun.zeros(64, "int8"), { box_dim = { 16 } })
      from:close()
      refuses("attempt to use a closed gpurun.TensorMap", from.replace_address, from, src)
    end)

    it("passes only to a CUtensorMap parameter, naming the parameter #gpu", function()
      local buffer <close> = gpurun.zeros(ROWS * COLS, "float32")
      local map = map_of(buffer)
      local one = gpurun.LaunchConfig{ grid = 1, block = 1 }
      refuses("kernel 'takes_pointer' parameter 1 (.u64): a gpurun.TensorMap passes only as a " ..
        "`const __grid_constant__ CUtensorMap` (.align 64 .b8[128])",
        gpurun.launch, stream, one, code:get_kernel("takes_pointer"), map)
      refuses("kernel 'takes_struct' parameter 2 (.u64): a gpurun.TensorMap passes only as a",
        gpurun.launch, stream, one, code:get_kernel("takes_struct"), map, map)
      refuses("kernel 'takes_struct' parameter 1 (.align 64 .b8[128]): a gpurun.Buffer passes as an " ..
        "8-byte pointer; this parameter is 128 bytes",
        gpurun.launch, stream, one, code:get_kernel("takes_struct"), buffer, buffer)
      local takes_struct = code:get_kernel("takes_struct")
      assert.are.equal(takes_struct, takes_struct:check_argument(1, map))
      buffer:close()
      refuses("kernel 'takes_struct' parameter 1 (.align 64 .b8[128]): the gpurun.TensorMap points at a " ..
        "closed gpurun.Buffer", gpurun.launch, stream, one, code:get_kernel("takes_struct"), map,
        gpurun.zeros(1, "float32"))
      map:close()
      map:close()
      refuses("kernel 'takes_struct' parameter 1 (.align 64 .b8[128]): attempt to use a closed " ..
        "gpurun.TensorMap", gpurun.launch, stream, one, code:get_kernel("takes_struct"), map,
        gpurun.zeros(1, "float32"))
      assert.are.equal("gpurun.TensorMap(closed)", tostring(map))
    end)

    it("is copied by plans and graphs, which keep the buffer it pointed at #gpu", function()
      local first <close> = gpurun.array(host_values(5), "float32")
      local second <close> = gpurun.array(host_values(6), "float32")
      local dst <close> = gpurun.zeros(ROWS * COLS, "float32")
      local from <close> = map_of(first)
      local to <close> = map_of(dst)
      local copy = code:get_kernel("copy_tiles")
      local plan <close> = copy:bind(config, from, to)
      local builder = stream:create_graph_builder()
      builder:begin_building()
      gpurun.launch(builder, config, copy, from, to)
      builder:end_building()
      local graph <close> = builder:complete()
      builder:close()
      -- pointing the map elsewhere changes neither: they copied its bytes
      from:replace_address(second)
      refuses("used by", first.close, first)
      plan:launch(stream)
      stream:sync()
      assert.are.same(host_values(5), dst:to_table())
      dst:fill(0)
      graph:launch(stream)
      stream:sync()
      assert.are.same(host_values(5), dst:to_table())
      -- and set_args takes the map as it is now
      graph:set_args(1, from, to)
      graph:launch(stream)
      stream:sync()
      assert.are.same(host_values(6), dst:to_table())
    end)
  end)
end)

describe("samples/2_CoreConcepts/tmaTensorMap.lua", function()
  local process = require("spec.support.process")
  local SAMPLE = "samples/2_CoreConcepts/tmaTensorMap.lua"
  local function run(...)
    local words = { process.quote(SAMPLE) }
    for _, word in ipairs({ ... }) do words[#words + 1] = process.quote(word) end
    return process.gpurun(table.concat(words, " "))
  end

  it("refuses a size that is not whole tiles before any GPU work", function()
    local result = run("--elements", "100")
    assert.are.equal(2, result.code)
    assert.are.equal("tmaTensorMap.lua: error: --elements must be a multiple of 128, got 100\n", result.stderr)
    result = run("--elements", "0")
    assert.are.equal(2, result.code)
    assert.matches("^tmaTensorMap%.lua: error: [^\n]*elements[^\n]*\n$", result.stderr)
  end)

  it("copies through a tensor map, then through the same map after replace_address #gpu", function()
    local result = run("--elements", "2048")
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("", result.stderr)
    assert.matches("^GPU 0: [^\n]+ %(compute capability %d+%.%d+%)\n", result.stdout)
    if not result.stdout:find("TMA needs compute capability 9.0", 1, true) then
      assert.truthy(result.stdout:find("TMA copy verified: 2048 elements across 16 tiles\n", 1, true))
      assert.truthy(result.stdout:find("replace_address verified: the descriptor reused with a new source buffer\n",
        1, true))
    end
  end)
end)
