-- fftSignalAnalysis.lua: a port of NVIDIA cuda-samples' python/2_CoreConcepts/
-- fftSignalAnalysis (cuda.core and CuPy). A composite of five sine waves is
-- transformed by cuFFT's real-to-complex FFT (a gpurun.fft plan, where the
-- original calls cupy.fft.rfft), timed with events; its magnitude spectrum's
-- peaks give back the five frequencies. The reference is a radix-2 FFT
-- computed on the host in Lua (where the original calls numpy.fft.rfft),
-- timed once; so --samples must be a power of two.
--
--   gpurun samples/2_CoreConcepts/fftSignalAnalysis.lua [--samples 1048576]
--       [--sample-rate 44100] [--iterations 10] [--device 0]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local check = require("gpurun.check")

local RULE, LINE = string.rep("=", 60), string.rep("-", 60)
local FREQUENCIES = { 440.0, 880.0, 1320.0, 2000.0, 5000.0 }
local AMPLITUDES = { 1.0, 0.5, 0.3, 0.7, 0.4 }

local cli = args.new("fftSignalAnalysis.lua", "FFT signal analysis with cuFFT (gpurun.fft).")
cli:integer_option("--samples", "Samples in the signal, a power of two.", 1 << 20, 2)
cli:number_option("--sample-rate", "Sampling rate in Hz.", 44100.0)
cli:integer_option("--iterations", "Timed transforms.", 10, 1)
cli:integer_option("--device", "CUDA device id.", 0, 0)
local options = cli:parse(arg)
local n, rate = options.samples, options.sample_rate
if n & (n - 1) ~= 0 then cli:usage_error(("--samples must be a power of two, got %d"):format(n)) end

-- The signal in float32, as the original's: the sum of the sines at t = i / rate.
local function composite_signal()
  local signal = {}
  for i = 0, n - 1 do
    local t, value = i / rate, 0.0
    for k, frequency in ipairs(FREQUENCIES) do
      value = value + AMPLITUDES[k] * math.sin(2 * math.pi * frequency * t)
    end
    signal[i + 1] = value
  end
  return signal
end

-- The first n // 2 + 1 bins of the DFT of real x: an iterative radix-2 FFT.
local function host_rfft(x)
  local re, im = {}, {}
  local bits = math.floor(math.log(n, 2) + 0.5)
  for i = 0, n - 1 do
    local reversed, v = 0, i
    for _ = 1, bits do reversed, v = (reversed << 1) | (v & 1), v >> 1 end
    re[reversed + 1], im[reversed + 1] = x[i + 1], 0.0
  end
  local length = 2
  while length <= n do
    local half = length // 2
    for j = 0, half - 1 do
      local angle = -2 * math.pi * j / length
      local w_re, w_im = math.cos(angle), math.sin(angle)
      for start = j + 1, n, length do
        local a, b = start, start + half
        local t_re = w_re * re[b] - w_im * im[b]
        local t_im = w_re * im[b] + w_im * re[b]
        re[b], im[b] = re[a] - t_re, im[a] - t_im
        re[a], im[a] = re[a] + t_re, im[a] + t_im
      end
    end
    length = length * 2
  end
  local magnitude = {}
  for k = 1, n // 2 + 1 do magnitude[k] = math.sqrt(re[k] ^ 2 + im[k] ^ 2) * 2 / n end
  return magnitude
end

-- Local maxima above threshold_ratio of the largest, largest first, at most
-- num_peaks of them: { frequency, magnitude } pairs.
local function find_dominant_frequencies(magnitude, num_peaks, threshold_ratio)
  local largest = 0
  for _, value in ipairs(magnitude) do largest = math.max(largest, value) end
  local peaks = {}
  for i = 2, #magnitude - 1 do
    local m = magnitude[i]
    if m > largest * threshold_ratio and m > magnitude[i - 1] and m > magnitude[i + 1] then
      peaks[#peaks + 1] = { (i - 1) * rate / n, m }
    end
  end
  table.sort(peaks, function(a, b) return a[2] > b[2] end)
  return table.move(peaks, 1, math.min(num_peaks, #peaks), 1, {})
end

local device = cli:open_device(options.device)
print(RULE)
print("FFT Signal Analysis")
print(RULE)
local stream <close> = device:create_stream()
print("\nDevice: " .. device.name)
print("Compute Capability: sm_" .. device.arch)
print("\nSignal Parameters:")
print(("  Samples: %d"):format(n))
print(("  Sample Rate: %.0f Hz"):format(rate))
print(("  Duration: %.3f seconds"):format(n / rate))
print(("  Input Frequencies: [%s] Hz"):format(table.concat(FREQUENCIES, ", ")))
print(("  Input Amplitudes: [%s]"):format(table.concat(AMPLITUDES, ", ")))

local d_signal <close> = gpurun.array(composite_signal(), "float32")
local h_signal = d_signal:to_table() -- the values as float32 holds them

print("\n" .. LINE)
print("GPU FFT (cuFFT)")
print(LINE)
local plan <close> = gpurun.fft.plan(n, { kind = "r2c", dtype = "complex64", stream = stream })
local d_spectrum <close> = gpurun.empty(n // 2 + 1, "complex64")
local execute_options = { stream = stream }
plan:execute(d_signal, d_spectrum, execute_options) -- warm-up
stream:sync()
local start = stream:record()
for _ = 1, options.iterations do plan:execute(d_signal, d_spectrum, execute_options) end
local stop = stream:record()
stop:sync()
local gpu_ms = stop:elapsed_ms(start) / options.iterations
print(("Time: %.3f ms"):format(gpu_ms))

-- The magnitude spectrum, scaled as the original's: |X| * 2 / n.
local d_magnitude = {}
for k, pair in ipairs(d_spectrum:to_table(stream)) do
  d_magnitude[k] = math.sqrt(pair[1] ^ 2 + pair[2] ^ 2) * 2 / n
end
local peaks = find_dominant_frequencies(d_magnitude, 5, 0.1)
print("\nDetected Frequencies:")
for _, peak in ipairs(peaks) do print(("  %8.1f Hz (magnitude: %.4f)"):format(peak[1], peak[2])) end

print("\n" .. LINE)
print("CPU FFT (Lua, radix 2)")
print(LINE)
local cpu_start = gpurun.perf_counter()
local h_magnitude = host_rfft(h_signal)
local cpu_ms = (gpurun.perf_counter() - cpu_start) * 1000
print(("Time: %.3f ms"):format(cpu_ms))

print("\n" .. LINE)
print("PERFORMANCE SUMMARY")
print(LINE)
print(("GPU (cuFFT): %.3f ms"):format(gpu_ms))
print(("CPU (Lua): %.3f ms"):format(cpu_ms))
print(("Speedup: %.1fx"):format(cpu_ms / gpu_ms))

print("\n" .. LINE)
print("VERIFICATION")
print(LINE)
local checks = check.new(cli.name)
print("GPU vs CPU FFT magnitude: "
  .. (checks:tables("magnitude", d_magnitude, h_magnitude, 1e-4, 1e-6) and "Test PASSED" or "Test FAILED"))
print("\nFrequency Detection Accuracy:")
for _, expected in ipairs(FREQUENCIES) do
  local found = false
  for _, peak in ipairs(peaks) do found = found or math.abs(peak[1] - expected) < 10 end
  print(("  %6.0f Hz: %s"):format(expected, found and "[OK]" or "[FAIL]"))
  checks:condition("frequency " .. expected, found)
end
if not checks:passed() then
  print("\nAnalysis completed with errors")
  os.exit(1, true)
end
print("\nDone")
