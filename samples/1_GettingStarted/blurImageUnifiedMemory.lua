-- blurImageUnifiedMemory.lua: a port of NVIDIA cuda-samples'
-- python/1_GettingStarted/blurImageUnifiedMemory (cuda.core). A 256 x 256
-- grayscale test image goes into managed (unified) memory that prefers the
-- device, a 3x3 box-blur kernel reads it there and writes another managed
-- buffer, and the host reads the result from the same memory: no copy is
-- written. Both images are saved (as PGM files, where the original writes
-- PNG through Pillow) and the blur is checked against one computed on the
-- host.
--
--   gpurun samples/1_GettingStarted/blurImageUnifiedMemory.lua [--output-dir DIR]

local gpurun = require("gpurun")
local args = require("gpurun.args")

local H, W = 256, 256
local RULE = string.rep("=", 60)

local KERNEL = [[
extern "C" __global__
void box_blur_3x3(const float* __restrict__ src,
                  float* __restrict__ dst, int H, int W) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;

    if (x >= W || y >= H) return;

    float sum = 0.0f;
    int count = 0;

    for (int dy = -1; dy <= 1; dy++) {
        for (int dx = -1; dx <= 1; dx++) {
            int nx = x + dx;
            int ny = y + dy;
            if (nx >= 0 && nx < W && ny >= 0 && ny < H) {
                sum += src[ny * W + nx];
                count++;
            }
        }
    }

    dst[y * W + x] = sum / count;
}
]]

local cli = args.new("blurImageUnifiedMemory.lua", "Blurs an image on the GPU in unified (managed) memory.")
cli:converted_option("--output-dir", "Folder the two images are saved in.", ".",
  function(text) return text end)
local options = cli:parse(arg)

-- Stripes across, stripes down at another intensity, and a disc, as the
-- original's test image: row-major, 0-based (y, x) as NumPy indexes it.
local function make_test_image(h, w)
  local image = {}
  local radius = math.min(h, w) // 6
  for y = 0, h - 1 do
    for x = 0, w - 1 do
      local value = (y % 50 < 25) and 255 or 0
      if x % 50 < 25 then value = 128 end
      if (x - w // 2) ^ 2 + (y - h // 2) ^ 2 <= radius ^ 2 then value = 200 end
      image[y * w + x + 1] = value
    end
  end
  return image
end

-- A binary PGM (Netpbm P5) of 8-bit pixels, named as the script names it.
local function save_pgm(name, pixels)
  local path = options.output_dir == "." and name or options.output_dir .. "/" .. name
  local file = assert(io.open(path, "wb"))
  file:write(("P5\n%d %d\n255\n"):format(W, H))
  for first = 1, #pixels, 4096 do
    file:write(string.char(table.unpack(pixels, first, math.min(first + 4095, #pixels))))
  end
  assert(file:close())
  print("  Saved: " .. path)
end

local device = cli:open_device(0)
print(RULE)
print("Image Blur with Unified Memory (gpurun)")
print(RULE)
print("\nDevice: " .. device.name)
print("Compute Capability: sm_" .. device.arch)
local stream <close> = device:create_stream()

print("\nCompiling CUDA kernel with gpurun.Program...")
local arch = "sm_" .. device.arch
local program <close> = gpurun.Program(KERNEL, "c++", gpurun.ProgramOptions{ arch = arch })
local code <close> = program:compile("cubin")
local kernel = code:get_kernel("box_blur_3x3")
print("  Compiled for architecture: " .. arch)

print(("\nImage size: %dx%d grayscale"):format(H, W))
print("Creating sample image...")
local image = make_test_image(H, W)

print("Blurring image on GPU...")
local src <close> = gpurun.managed(H * W, "float32")
local dst <close> = gpurun.managed(H * W, "float32")
-- The original's managed memory resource prefers the device.
src:advise("set_preferred_location", device)
dst:advise("set_preferred_location", device)
local scaled = {}
for i, value in ipairs(image) do scaled[i] = value / 255 end
src:copy_from(scaled)
local config = gpurun.LaunchConfig{ grid = { (W + 15) // 16, (H + 15) // 16 }, block = { 16, 16 } }
gpurun.launch(stream, config, kernel, src, dst, H, W)
stream:sync()
local blurred = dst:to_table() -- the memory the kernel wrote, read in place

print("\nSaving results...")
save_pgm("original_image.pgm", image)
local blurred_pixels = {}
for i, value in ipairs(blurred) do
  blurred_pixels[i] = math.floor(math.min(math.max(value, 0), 1) * 255)
end
save_pgm("blurred_image.pgm", blurred_pixels)

print("\nVerifying result...")
local max_diff, worst_blur_error = 0, 0
for y = 0, H - 1 do
  for x = 0, W - 1 do
    local i = y * W + x + 1
    max_diff = math.max(max_diff, math.abs(blurred[i] - scaled[i]))
    local sum, count = 0, 0
    for ny = math.max(y - 1, 0), math.min(y + 1, H - 1) do
      for nx = math.max(x - 1, 0), math.min(x + 1, W - 1) do
        sum, count = sum + scaled[ny * W + nx + 1], count + 1
      end
    end
    worst_blur_error = math.max(worst_blur_error, math.abs(blurred[i] - sum / count))
  end
end
if max_diff <= 0.01 then
  print("  Test FAILED - blur not applied")
  os.exit(1, true)
elseif worst_blur_error > 1e-5 then
  print(("  Test FAILED - %.3g from the 3x3 mean computed on the host"):format(worst_blur_error))
  os.exit(1, true)
end
print("  Test PASSED")
print(("  Max difference from original: %.4f"):format(max_diff))
