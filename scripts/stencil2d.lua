-- stencil2d.lua: a pipeline of your own on a 2D grid, timed as individual
-- launches and as a replayed CUDA graph, checked against a host reference.
-- With --sweep FROM:TO the same pipeline runs on square images of side FROM
-- to TO (doubling) through gpurun.sweep: a table, the crossover, a picture.
--
--   gpurun scripts/stencil2d.lua [--width N] [--height N] [--alpha X]
--                                [--iters N] [--device ID] [--json]
--   gpurun scripts/stencil2d.lua --sweep 64:4096 [--plot FILE.png] [--json] [--iters N]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local bench = require("gpurun.bench")
local check = require("gpurun.check")
local report = require("gpurun.report")
local sweep = require("gpurun.sweep")

-- Two kernels over a width x height image: s = alpha * x + y (a float
-- scalar argument), then a 5-point stencil that averages each point of s
-- with its four neighbours (an edge point reuses itself for the missing
-- ones). Both launch on a 2D grid of 16 x 16 blocks and take the image size
-- as two int arguments. The result is copied back and compared on the host.
local KERNELS = [[
extern "C" __global__ void saxpy_2d(float alpha, const float *x, const float *y, float *s,
                                    int width, int height)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (col < width && row < height) {
        int i = row * width + col;
        s[i] = alpha * x[i] + y[i];
    }
}

extern "C" __global__ void stencil_5pt(const float *in, float *out, int width, int height)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (col >= width || row >= height)
        return;
    int i = row * width + col;
    float centre = in[i];
    float north = row > 0 ? in[i - width] : centre;
    float south = row + 1 < height ? in[i + width] : centre;
    float west = col > 0 ? in[i - 1] : centre;
    float east = col + 1 < width ? in[i + 1] : centre;
    out[i] = (centre + north + south + west + east) / 5.0f;
}
]]

local BLOCK = 16
local MAX_ELEMENTS = 2147483647 -- the kernels index with int
local MAX_HEIGHT = 65535 * BLOCK -- a grid is at most 65535 blocks high
local FLOAT32_MAX = 3.4028234663852886e38
local WARMUP = 5

local cli = args.new("stencil2d.lua",
  "Times saxpy -> 5-point stencil on a 2D grid as individual launches and as a CUDA graph.")
cli:integer_option("--width", "Image width in elements.", 512)
cli:integer_option("--height", "Image height in elements.", 512)
cli:number_option("--alpha", "The saxpy coefficient.", 2.5)
cli:common_options{ iters = 1000 }
cli.parser:option("--sweep", "Sweep square images of side FROM to TO instead, doubling.")
  :argname("<FROM:TO>")
cli.parser:option("--plot", "With --sweep: draw it into FILE.png or FILE.svg."):argname("<FILE>")
local options = cli:parse(arg)
local width, height, alpha = options.width, options.height, options.alpha
if height > MAX_HEIGHT then
  cli:usage_error(string.format("--height: at most %d, got %d", MAX_HEIGHT, height))
end
if width > MAX_ELEMENTS // height then
  cli:usage_error(string.format("--width x --height: %d x %d is more than %d elements",
                                width, height, MAX_ELEMENTS))
end
if math.abs(alpha) > FLOAT32_MAX then
  cli:usage_error(string.format("--alpha: %g does not fit a float", alpha))
end
local sweep_settings
if options.plot and not options.sweep then
  cli:usage_error("--plot: draws a sweep; give --sweep FROM:TO too")
end
if options.sweep then
  local from, to = sweep.parse_range(options.sweep)
  if not from then
    cli:usage_error("--sweep: " .. to)
  elseif to > MAX_HEIGHT or to * to > MAX_ELEMENTS then
    cli:usage_error(string.format("--sweep: a %d x %d image is more than %d elements", to, to,
                                  MAX_ELEMENTS))
  end
  local sizes = {}
  for _, side in ipairs(sweep.sizes(from, to, 2)) do
    sizes[#sizes + 1] = side * side
  end
  sweep_settings = sweep.settings(cli, { sizes = sizes, iters = options.iters,
                                         json = options.json and "-" or nil, plot = options.plot })
end

-- The pipeline in double precision on Lua arrays, row-major like the device.
local function reference(x, y)
  local s = {}
  for i = 1, width * height do
    s[i] = alpha * x[i] + y[i]
  end
  local expected = {}
  for row = 0, height - 1 do
    for col = 0, width - 1 do
      local i = row * width + col + 1
      local centre = s[i]
      local north = row > 0 and s[i - width] or centre
      local south = row + 1 < height and s[i + width] or centre
      local west = col > 0 and s[i - 1] or centre
      local east = col + 1 < width and s[i + 1] or centre
      expected[i] = (centre + north + south + west + east) / 5
    end
  end
  return expected
end

-- The pipeline on a columns x rows image, x and y into s and result: a
-- function that launches both kernels on a stream or into a graph builder,
-- and its launch configuration.
local function image_pipeline(saxpy, stencil, columns, rows, x, y, s, result)
  -- Typed scalars say exactly what each parameter is; made once, reused
  -- by every launch.
  local alpha_f32 = gpurun.f32(alpha)
  local width_i32, height_i32 = gpurun.i32(columns), gpurun.i32(rows)
  local config = gpurun.LaunchConfig{
    grid = { (columns + BLOCK - 1) // BLOCK, (rows + BLOCK - 1) // BLOCK, 1 },
    block = { BLOCK, BLOCK, 1 },
  }
  local launch = gpurun.launch

  local function pipeline(target)
    launch(target, config, saxpy, alpha_f32, x, y, s, width_i32, height_i32)
    launch(target, config, stencil, s, result, width_i32, height_i32)
  end
  return pipeline, config
end

-- For --sweep: square images of x = 1 and y = 2, where every element of
-- the result is alpha + 2 (the mean of equal values); NaN before each path.
local function sweep_pipeline(saxpy, stencil, rtol, atol)
  return {
    name = "saxpy -> 5-point stencil",
    x_label = "elements (square images)",
    bytes_per_element = 4 * 4, -- x, y, s and result in float32
    setup = function(size)
      local n, side = size.elements, math.tointeger(math.sqrt(size.elements))
      local x = size:own(gpurun.full(n, 1.0, "float32"))
      local y = size:own(gpurun.full(n, 2.0, "float32"))
      local s = size:own(gpurun.empty(n, "float32"))
      size.result = size:own(gpurun.empty(n, "float32"))
      size.pipeline = image_pipeline(saxpy, stencil, side, side, x, y, s, size.result)
    end,
    reset = function(size) size.result:fill(0 / 0) end,
    check = function(size, _, label)
      return check.buffers(label, size.result, alpha + 2, rtol, atol)
    end,
    paths = { sweep.INDIVIDUAL, sweep.GRAPH },
  }
end

local function main()
  local device = cli:open_device(options.device)
  local stream <close> = device:create_stream()
  gpurun.set_current_stream(stream)

  local program <close> = gpurun.Program(KERNELS, "c++",
    gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch })
  local module <close> = program:compile("cubin")
  local saxpy <close> = module:get_kernel("saxpy_2d")
  local stencil <close> = module:get_kernel("stencil_5pt")
  -- float32 inputs and sums: the error grows with the values' size, |alpha| + 1
  local rtol, atol = 1e-5, 1e-5 * (1 + math.abs(alpha))
  if sweep_settings then
    return sweep.main(sweep_pipeline(saxpy, stencil, rtol, atol), sweep_settings,
                      sweep.context(device, stream, cli.name))
  end

  local out = report.new{ json = options.json }
  local checks = check.new(cli.name)
  out:device(device, options.device)
  for _, key in ipairs{ "width", "height", "alpha", "iters" } do
    out:field(key, options[key])
  end

  local count = width * height
  local rng <close> = gpurun.default_rng(42)
  local x_host, y_host = rng:random_table(count, "float32"), rng:random_table(count, "float32")
  local x <close> = gpurun.array(x_host, "float32")
  local y <close> = gpurun.array(y_host, "float32")
  local s <close> = gpurun.empty(count, "float32")
  local result <close> = gpurun.empty(count, "float32")
  local expected = reference(x_host, y_host)
  local pipeline, config = image_pipeline(saxpy, stencil, width, height, x, y, s, result)

  out:say(string.format("Grid: %d x %d elements in %d x %d blocks of %d x %d, alpha = %g",
                        width, height, config.grid[1], config.grid[2], BLOCK, BLOCK, alpha))

  local individual = bench.run(stream, pipeline, { iters = options.iters, warmup = WARMUP })
  checks:tables("individual launches", result:to_table(), expected, rtol, atol)
  out:timing("individual", "\nIndividual launches: ", individual)

  out:say("\nBuilding CUDA graph...")
  local graph <close> = bench.capture(stream, pipeline)

  result:fill(0.0) -- so the graph check sees the graph's own output
  local replay = bench.run(stream, function(st) graph:launch(st) end,
                           { iters = options.iters, warmup = WARMUP })
  checks:tables("graph replay", result:to_table(), expected, rtol, atol)
  out:timing("graph", "Graph replay:       ", replay)
  out:speedup("Graph speedup: ", individual, replay)

  if checks:passed() then
    out:say("\nDone")
  end
  return out:finish(checks)
end

os.exit(main(), true)
