-- The ports of NVIDIA's cuda-samples under samples/, as a user runs them:
-- each opens with a comment naming its original, answers --help, and
-- without a GPU ends with gpurun's one-line message; on a GPU each runs
-- with small arguments, exits 0 and says it passed.

local gpurun = require("gpurun")
local files = require("spec.support.files")
local process = require("spec.support.process")

-- Every port, with the argument lists that keep it short (one run each)
-- and the text its output must hold when its checks pass.
-- persistentProgramCache's saved cubins: beside the suite's kernel cache.
local PROGRAM_CACHE = (os.getenv("GPURUN_CACHE_DIR") or os.getenv("TMPDIR") or "/tmp")
  .. "/samples-spec-persistentProgramCache"

-- blurImageUnifiedMemory's two images: beside it too.
local IMAGES = (os.getenv("GPURUN_CACHE_DIR") or os.getenv("TMPDIR") or "/tmp")

local SMALL = {
  ["samples/1_GettingStarted/blurImageUnifiedMemory.lua"] = { runs = { { "--output-dir", IMAGES } },
                                                             passed = "\n  Test PASSED\n" },
  ["samples/1_GettingStarted/copyImageArraytoGPU.lua"] = { runs = { {} }, passed = "\nTest PASSED\n" },
  ["samples/1_GettingStarted/deviceQuery.lua"] = { runs = { {} }, passed = "\nDone\n" },
  ["samples/1_GettingStarted/kernelNsysProfile.lua"] = { runs = { { "-n", "1001" }, { "--array-size", "4096" } },
                                                        passed = "\nThe sample is complete PASSED!\n" },
  ["samples/1_GettingStarted/systemInfo.lua"] = { runs = { {}, { "--no-topology" } }, passed = "\nDone\n" },
  ["samples/1_GettingStarted/numpyVsCupy.lua"] = { runs = { { "-n", "300", "--samples", "64" } },
                                                 passed = "\nDemo completed successfully!\n" },
  ["samples/1_GettingStarted/simplePrint.lua"] = { runs = { {} }, passed = "\n[3, 7]:\t\tValue is: 10\n" },
  ["samples/1_GettingStarted/vectorAdd.lua"] = { runs = { { "--elements", "1000" } }, passed = "\nTest PASSED\n" },
  ["samples/2_CoreConcepts/binarySearch.lua"] = { runs = { {} },
    passed = "  upper_bound: got [3, 3, 4, 5]  expected [3, 3, 4, 5]  OK\n\nDone\n" },
  ["samples/2_CoreConcepts/blockwiseSum.lua"] = { runs = { {} }, passed = "\nBlock-wise sum:  Test PASSED\n" },
  ["samples/2_CoreConcepts/cudaComputeLambdas.lua"] = { runs = { { "--device", "0" } },
                                                        passed = "  expected = [0, 2, 2, 6, 6, 12]  OK\n\nDone\n" },
  ["samples/2_CoreConcepts/jitLtoLinking.lua"] = { runs = { { "--elements", "4096" } },
                                                  passed = "\nBoth PTX and LTO linked kernels produced matching results. Done\n" },
  ["samples/2_CoreConcepts/persistentProgramCache.lua"] = {
    -- Twice: a miss that saves the cubin, then a hit that loads it.
    runs = { { "--m", "64", "--n", "48", "--k", "40", "--warmup", "1", "--iterations", "2",
               "--cache-dir", PROGRAM_CACHE, "--clear-cache" },
             { "--m", "64", "--n", "48", "--k", "40", "--warmup", "1", "--iterations", "2",
               "--cache-dir", PROGRAM_CACHE } },
    passed = "\nValidation:         PASSED\n",
  },
  ["samples/2_CoreConcepts/launchConfigTuning.lua"] = { runs = { {} }, passed = "\n✓ Results verified correct!\n" },
  ["samples/2_CoreConcepts/parallelHistogram.lua"] = { runs = { {} }, passed = "\nTest PASSED\n" },
  ["samples/2_CoreConcepts/parallelReduction.lua"] = { runs = { {} }, passed = "\nTest PASSED!\n" },
  ["samples/2_CoreConcepts/prefixSum.lua"] = { runs = { {} }, passed = "Output: [0, 3, 4, 8, 9, 14, 23, 25]\nTest PASSED\n" },
  ["samples/2_CoreConcepts/reduction.lua"] = {
    runs = { { "--n", "100000", "--iterations", "3" },
             { "--n", "1000", "--threads", "32", "--type", "int", "--iterations", "2" },
             { "--n", "4097", "--threads", "1024", "--type", "double", "--iterations", "2" } },
    passed = "\nTest PASSED\n",
  },
  ["samples/2_CoreConcepts/reductionMultiBlockCG.lua"] = {
    runs = { { "--n", "100000", "--iterations", "3" },
             { "--n", "5000", "--threads", "64", "--maxblocks", "4", "--iterations", "2" } },
    passed = "\nTest PASSED\n",
  },
  ["samples/2_CoreConcepts/fftSignalAnalysis.lua"] = { runs = { { "--iterations", "2" } },
    passed = "\n    5000 Hz: [OK]\n\nDone\n" },
  ["samples/2_CoreConcepts/matrixMulSharedMem.lua"] = {
    -- Sizes that are not multiples of the tile: the kernel's edges.
    runs = { { "--m", "100", "--n", "70", "--k", "45", "--num_iterations", "2" }, {} },
    passed = "\nVERIFICATION\n" .. string.rep("-", 60) .. "\ncuBLAS: Test PASSED\ncustom: Test PASSED\n",
  },
  ["samples/2_CoreConcepts/memoryResources.lua"] = { runs = { { "--elements", "10007" } }, passed = "\nDone\n" },
  ["samples/2_CoreConcepts/simpleZeroCopy.lua"] = { runs = { { "--num_elements", "100003" } },
                                                    passed = "\n  Validation PASSED\n" },
  ["samples/2_CoreConcepts/streamingCopyComputeOverlap.lua"] = { runs = { {} },
                                                                 passed = "\nVerification: PASSED\n" },
  ["samples/2_CoreConcepts/greenContext.lua"] = {
    runs = { { "--delay-us", "200", "--delay-waves", "2", "--critical-n", "65536", "--critical-iters", "64" } },
    passed = "\nCritical kernel output identical in all three runs: PASSED\n",
  },
  -- PASS, or WAIVED where the driver refuses a checkpoint (a container):
  -- either way the buffer was checked unchanged before "Done".
  ["samples/2_CoreConcepts/processCheckpoint.lua"] = { runs = { { "--buffer-mib", "1" } },
                                                       passed = "\nDone\n" },
  ["samples/2_CoreConcepts/tmaTensorMap.lua"] = { runs = { { "--elements", "256" } },
                                                  passed = "\nreplace_address verified" },
  ["samples/3_CUDA_Features/graphConditionalNodes.lua"] = { runs = { {} },
                                                           passed = "\nTest PASSED: every launch ran" },
  ["samples/3_CUDA_Features/graphMemoryFootprint.lua"] = {
    runs = { {} }, passed = "\nCheck confirms all graphs use a different virtual address.\n",
  },
  ["samples/3_CUDA_Features/graphMemoryNodes.lua"] = { runs = { { "--elements", "100003" } },
    passed = "\nValidation PASSED!\n\nCleaning up sample.\nCleanup complete. Exiting sample.\n" },
  ["samples/3_CUDA_Features/jacobiCudaGraphs.lua"] = {
    runs = { { "--gpumethod", "0" }, { "--gpumethod", "1" }, { "--gpumethod", "2" } },
    passed = "\n&&&& jacobiCudaGraphs PASSED\n",
  },
  ["samples/4_CUDA_Libraries/conjugateGradientCudaGraphs.lua"] = {
    runs = { { "--n", "1000" }, { "--n", "1000", "--host-loop" } },
    passed = "\n&&&& conjugateGradientCudaGraphs PASSED\n",
  },
  ["samples/4_DistributedComputing/ipcMemoryPool.lua"] = { runs = { { "--elements", "1000", "--timeout", "60" } },
    passed = "\nIPC round-trip: OK\n" },
  ["samples/4_DistributedComputing/multiGPUGradientAverage.lua"] = {
    runs = { { "--size", "1000" } }, ranks = 2, passed = "\n[PASS] Gradient averaging is correct on all ranks.\n",
  },
  -- Two GPUs with peer access; with fewer it waives, exits 2, as its original.
  ["samples/4_DistributedComputing/simpleP2P.lua"] = {
    runs = { { "--num_elements", "1000003" } }, gpus = 2,
    passed = "\n  [PASS] Validation PASSED\n",
    waived = { code = 2, text = "\nCUDA-capable device count: 1\nTwo or more GPUs with Peer-to-Peer access "
      .. "capability are required, waiving this sample.\n" },
  },
  ["samples/3_CUDA_Features/simpleCudaGraphs.lua"] = { runs = { {} }, passed = "\nTest PASSED: all 12 replays" },
}

local function run(path, argv)
  local words = { process.quote(path) }
  for _, word in ipairs(argv) do words[#words + 1] = process.quote(word) end
  return process.gpurun(table.concat(words, " "))
end

-- The port run in `ranks` MPI ranks (Open MPI's mpirun; root needs its flag).
local function run_ranks(ranks, path, argv)
  local words = { "timeout 300 mpirun --oversubscribe -np", tostring(ranks) }
  local id = io.popen("id -u")
  if id:read("l") == "0" then words[#words + 1] = "--allow-run-as-root" end
  id:close()
  words[#words + 1] = process.quote(process.gpurun_bin())
  words[#words + 1] = process.quote(path)
  for _, word in ipairs(argv) do words[#words + 1] = process.quote(word) end
  return process.run(table.concat(words, " "))
end

-- The ports: the samples/ files git tracks, else those in the table.
local function ports()
  local list = files.tracked({ "samples" })
  if #list == 0 then
    for path in pairs(SMALL) do list[#list + 1] = path end
    table.sort(list)
  end
  return list
end

-- The opening comment's text, its lines joined ("python/2_CoreConcepts/"
-- at a line's end runs on into the next line's word).
local function header(text)
  local lines = {}
  for line in text:gmatch("([^\n]*)\n") do
    local comment = line:match("^%-%-%s?(.*)$")
    if not comment then break end
    lines[#lines + 1] = comment
  end
  return (table.concat(lines, " "):gsub("/ ", "/"))
end

describe("samples/", function()
  it("has small arguments in this spec for every port", function()
    local missing = {}
    for _, path in ipairs(ports()) do
      if not SMALL[path] then missing[#missing + 1] = path end
    end
    assert.are.same({}, missing)
  end)

  -- A name Device:get_attribute does not know fails only on a GPU host, so
  -- the names the ports and scripts spell out are checked against the
  -- table the method reads, here.
  it("asks Device:get_attribute only for attributes it knows", function()
    local known = {}
    for name in assert(files.read("src/base/device_attributes.h")):gmatch("X%(([%w_]+),") do
      known[name] = true
    end
    assert.truthy(known.memory_pools_supported)
    local unknown = {}
    local paths = ports()
    for _, path in ipairs(files.tracked({ "scripts" })) do paths[#paths + 1] = path end
    for _, path in ipairs(paths) do
      for name in assert(files.read(path)):gmatch("get_attribute%(%s*\"([^\"]+)\"") do
        if not known[name] then unknown[#unknown + 1] = path .. ": " .. name end
      end
    end
    assert.are.same({}, unknown)
  end)

  it("refuses a --threads the reduction tree cannot halve, before any GPU work", function()
    for _, path in ipairs{ "samples/2_CoreConcepts/reduction.lua", "samples/2_CoreConcepts/reductionMultiBlockCG.lua" } do
      for _, threads in ipairs{ "3", "2048" } do
        local result = run(path, { "--threads", threads })
        assert.are.equal(2, result.code, path)
        assert.matches("--threads must be a power of 2 in [1, 1024] (the tree reduction halves it), got "
          .. threads, result.stderr, 1, true)
      end
    end
  end)

  it("has a row in docs/samples.md for each of the forty, with each port's length", function()
    local doc = assert(files.read("docs/samples.md"))
    local rows = 0
    for _ in doc:gmatch("\n| [%w+ ]*%d_[%w_]+/%w+ |") do rows = rows + 1 end
    assert.are.equal(40, rows)
    local ported = 0
    for _ in doc:gmatch("\n| [%w+ ]*%d_[%w_]+/%w+ | [^|]* | ported") do ported = ported + 1 end
    assert.truthy(doc:find("\n" .. ported .. " of the forty are ported", 1, true),
                  ("docs/samples.md should say %d of the forty are ported"):format(ported))
    for _, path in ipairs(ports()) do
      local row = doc:match("\n(|[^\n]*%(%.%./" .. path:gsub("%p", "%%%0") .. "%)[^\n]*)")
      assert.truthy(row, "no row links " .. path)
      local lines = #files.lines_of(assert(files.read(path)))
      assert.truthy(row:find("| " .. lines .. " / ", 1, true), ("%s has %d lines: %s"):format(path, lines, row))
    end
  end)

  for _, path in ipairs(ports()) do
    local name = path:match("([^/]+)%.lua$")
    local category = path:match("^samples/([^/]+)/")
    describe(path, function()
      it("opens with a comment naming its original and what it shows", function()
        local text = assert(files.read(path))
        local opening = header(text)
        assert.matches("^" .. name .. "%.lua: a port of NVIDIA cuda%-samples' ", opening)
        assert.truthy(opening:find(category .. "/" .. name, 1, true),
                      "the header names " .. category .. "/" .. name .. ": " .. opening)
        assert.is_true(#opening > 120, "the header says what the sample shows: " .. opening)
      end)

      it("prints its usage for --help and exits 0", function()
        local result = run(path, { "--help" })
        assert.are.equal(0, result.code, result.stderr)
        assert.are.equal("", result.stderr)
        assert.matches("^Usage: " .. name .. "%.lua ", result.stdout)
      end)

      it("refuses an unknown option with exit status 2 before any GPU work", function()
        local result = run(path, { "--no-such-option" })
        assert.are.equal(2, result.code)
        assert.are.equal("", result.stdout)
        assert.are.equal(name .. ".lua: error: unknown option '--no-such-option'\n", result.stderr)
      end)

      if gpurun.device_count() > 0 then
        pending("says plainly that there is no GPU #nogpu (this machine has one)")
      else
        it("says plainly that there is no GPU #nogpu", function()
          local result = run(path, SMALL[path] and SMALL[path].runs[1] or {})
          assert.are.equal(1, result.code)
          assert.are.equal("", result.stdout)
          local reason = gpurun.driver_error() or "no device"
          assert.are.equal(name .. ".lua: no CUDA GPU available: " .. reason .. "\n", result.stderr)
        end)
      end

      local small = SMALL[path] or {}
      local tag = small.ranks and ("in %d MPI ranks #multigpu"):format(small.ranks) or "#gpu"
      it("runs with small arguments, exits 0 and passes its checks " .. tag, function()
        assert(SMALL[path], "no small arguments for " .. path)
        -- A port that needs more GPUs than the host has waives instead: its
        -- own exit status and line.
        local waived = small.gpus and gpurun.device_count() < small.gpus
        local code = waived and small.waived.code or 0
        local wanted = waived and small.waived.text or small.passed
        for _, argv in ipairs(small.runs) do
          local result = small.ranks and run_ranks(small.ranks, path, argv) or run(path, argv)
          local command = path .. " " .. table.concat(argv, " ")
          assert.are.equal(code, result.code, command .. "\n" .. result.stdout .. result.stderr)
          if not small.ranks then assert.are.equal("", result.stderr, command) end -- mpirun may warn
          assert.truthy(result.stdout:find(wanted, 1, true), command .. "\n" .. result.stdout)
        end
      end)
    end)
  end
end)

describe("samples/2_CoreConcepts/processCheckpoint.lua against a driver that refuses", function()
  -- Stand-ins for the GPU and the checkpoint calls (spec/support/checkpoint_standins.lua).
  local function run_refusing(call)
    return process.run(process.quote(process.gpurun_bin()) .. " spec/support/checkpoint_standins.lua",
                       { env = { REFUSE = call } })
  end

  it("waives, with the process running, when the state query itself is refused (compute-sanitizer)", function()
    local result = run_refusing("state")
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("", result.stderr)
    assert.matches("\ninitial +%- +%-\n", result.stdout)
    assert.truthy(result.stdout:find("\nstate refused: cuCheckpointProcessGetState: CUDA_ERROR_NOT_SUPPORTED", 1, true),
                  result.stdout)
    assert.falsy(result.stdout:find("\nlock ", 1, true), result.stdout)
    assert.truthy(result.stdout:find("\nWAIVED: the driver refused the checkpoint", 1, true), result.stdout)
  end)

  it("waives after a refused step, and passes when nothing is refused", function()
    local result = run_refusing("lock")
    assert.are.equal(0, result.code, result.stderr)
    assert.matches("\ninitial +%- +running\n", result.stdout)
    assert.truthy(result.stdout:find("\nlock refused: ", 1, true), result.stdout)
    assert.truthy(result.stdout:find("\nWAIVED: ", 1, true), result.stdout)
    result = run_refusing("")
    assert.are.equal(0, result.code, result.stderr)
    assert.matches("\nunlock +[%d.]+ +running\n", result.stdout)
    assert.truthy(result.stdout:find("\nPASS: GPU buffer contents survived checkpoint/restore.\n", 1, true),
                  result.stdout)
  end)
end)

describe("tools/samples.sh", function()
  local function harness(argv, env)
    return process.run("tools/samples.sh " .. argv, { env = env })
  end

  it("lists every port with its sample, cudaGraphs' in scripts/", function()
    local result = harness("--list")
    assert.are.equal(0, result.code, result.stderr)
    local expected = { "2_CoreConcepts/cudaGraphs scripts/cudagraphs.lua" }
    for _, path in ipairs(ports()) do
      expected[#expected + 1] = path:match("^samples/(.-)%.lua$") .. " " .. path
    end
    table.sort(expected)
    assert.are.same(expected, files.lines_of(result.stdout))
  end)

  it("refuses an unknown option with exit status 2", function()
    local result = harness("--no-such-option")
    assert.are.equal(2, result.code)
    assert.matches("^samples.sh: unknown option '%-%-no%-such%-option'\n", result.stderr)
  end)

  it("runs each port, says PASS, FAIL or skipped and ends with the counts", function()
    local fake = os.tmpname()
    local file = assert(io.open(fake, "w"))
    file:write([[#!/bin/sh
[ "$1" = "-e" ] && { echo 1; exit 0; }
echo "  Average time: 1.250 ms"
case $1 in
  *vectorAdd*) exit 3;;
  *simpleP2P*) echo "Two or more GPUs with Peer-to-Peer access capability are required, waiving this sample."; exit 2;;
esac
]])
    file:close()
    os.execute("chmod +x " .. process.quote(fake))
    local result = harness("--originals /nonexistent", { GPURUN_BIN = fake })
    os.remove(fake)
    local count = #ports() + 1
    assert.are.equal(1, result.code, result.stdout .. result.stderr)
    assert.truthy(result.stdout:find("\n== 1_GettingStarted/vectorAdd: FAIL (exit 3); original not run", 1, true),
                  result.stdout)
    assert.truthy(result.stdout:find("\n== 2_CoreConcepts/cudaGraphs: PASS; original not run", 1, true))
    assert.truthy(result.stdout:find("\n   Average time: 1.250 ms ", 1, true))
    -- One GPU: the distributed port, one MPI rank per GPU, is left out.
    assert.truthy(result.stdout:find("\n== 4_DistributedComputing/multiGPUGradientAverage: skipped: one MPI rank "
      .. "per GPU, and this host has 1 GPU", 1, true), result.stdout)
    -- A port that waives its test, as its original does, is skipped too.
    assert.truthy(result.stdout:find("\n== 4_DistributedComputing/simpleP2P: skipped: waived (Two or more GPUs "
      .. "with Peer-to-Peer access capability are required, waiving this sample.)", 1, true), result.stdout)
    assert.truthy(result.stdout:find(("\n%d passed, 1 failed, 2 skipped\n$"):format(count - 3)), result.stdout)
  end)

  if gpurun.device_count() > 0 then
    pending("says plainly that there is no GPU #nogpu (this machine has one)")
  else
    it("says plainly that there is no GPU #nogpu", function()
      local result = harness("")
      assert.are.equal(1, result.code)
      assert.are.equal("samples.sh: no CUDA GPU available: " .. (gpurun.driver_error() or "no device") .. "\n",
                       result.stderr)
    end)
  end
end)
