-- copyImageArraytoGPU.lua: a port of NVIDIA cuda-samples'
-- python/1_GettingStarted/copyImageArraytoGPU (cuda.core). A 256 x 256 RGB
-- image of random bytes goes to the GPU through page-locked (pinned) host
-- memory on a stream, its mean pixel value is computed there
-- (gpurun.mean, where the original uses a CuPy view), and it comes back
-- the same way; the round trip must give every byte back.
--
--   gpurun samples/1_GettingStarted/copyImageArraytoGPU.lua

local gpurun = require("gpurun")
local args = require("gpurun.args")
local check = require("gpurun.check")

local HEIGHT, WIDTH, CHANNELS = 256, 256, 3

local cli = args.new("copyImageArraytoGPU.lua",
  "Copies an image array to the GPU and back through pinned memory.")
cli:parse(arg)

local device = cli:open_device(0)
print("[Image Array Copy to GPU using gpurun]")
local stream <close> = device:create_stream()
gpurun.set_current_stream(stream)
print("Device: " .. device.name)
print(("[Image array copy of %dx%dx%d image]"):format(HEIGHT, WIDTH, CHANNELS))

print("Creating sample image...")
local pixels = HEIGHT * WIDTH * CHANNELS -- row-major: rows, then columns, then channels
local rng <close> = gpurun.default_rng(0)
local image = {}
for i, value in ipairs(rng:random_table(pixels)) do image[i] = math.floor(value * 256) end

print("Copying image to GPU...")
local pinned_in <close> = gpurun.pinned(pixels, "uint8")
pinned_in:copy_from(image)
local device_image <close> = gpurun.empty(pixels, "uint8")
device_image:copy_from(pinned_in, stream)

local mean <close> = gpurun.mean(stream, device_image)
print(("Mean pixel value (computed on GPU): %.2f"):format(mean:get(1)))

print("Copying image back from GPU...")
local pinned_out <close> = gpurun.pinned(pixels, "uint8")
device_image:copy_to(pinned_out, stream)
stream:sync()
local back = pinned_out:to_table()

print("Verifying result...")
local checks = check.new(cli.name)
if not checks:tables("image round trip", back, image, 0, 0) then
  print("Test FAILED")
  os.exit(1, true)
end
print("Test PASSED")
print("\nDone")
