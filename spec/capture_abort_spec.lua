-- The capture rule: an error raised while a builder is capturing, whatever
-- raised it, ends the capture (the builder is "abandoned") and leaves the
-- stream taking plain launches at once. One spec per path that once kept
-- the capture going, and a check that no binding raises around the rule.
local gpurun = require("gpurun")
local kernels = require("spec.support.kernels")
local bench = require("gpurun.bench")

describe("an error raised while a builder is capturing", function()
  local device, kernel, stream, a, n, config
  before_each(function()
    local _
    device, _, kernel = kernels.setup()
    stream = device:create_stream()
    n = 256
    a = gpurun.zeros(n, "float32")
    config = gpurun.LaunchConfig({ grid = 1, block = 256 })
  end)
  after_each(function()
    stream:close()
  end)

  -- Runs `fail(builder)` inside a capture, expects it to raise `expected`,
  -- then checks the builder was abandoned and the stream is usable.
  local function abandoned_by(expected, fail)
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    local ok, err = pcall(fail, builder)
    assert.is_false(ok, "expected an error")
    assert.matches(expected, tostring(err))
    assert.are.equal("abandoned", builder.state)
    assert.is_false(builder.is_building)
    gpurun.launch(stream, config, kernel("vec_add"), a, a, a, gpurun.u64(n))
    stream:sync()
    assert.is_true(gpurun.allclose(a, 0, 0, 0))
  end

  it("a bad LaunchConfig argument #gpu", function()
    abandoned_by("gpurun.LaunchConfig expected, got table", function(builder)
      gpurun.launch(builder, { grid = 1 }, kernel("vec_add"), a, a, a, gpurun.u64(n))
    end)
  end)

  it("a bad kernel argument #gpu", function()
    abandoned_by("gpurun.Kernel expected, got gpurun.Buffer", function(builder)
      gpurun.launch(builder, config, a, a, a, a, gpurun.u64(n))
    end)
  end)

  it("a block larger than the kernel allows #gpu", function()
    assert.are.equal(64, kernel("bounded").max_threads_per_block)
    abandoned_by("kernel 'bounded' runs at most 64 threads per block; the LaunchConfig asks for 256",
      function(builder)
        gpurun.launch(builder, config, kernel("bounded"), a)
      end)
  end)

  it("more dynamic shared memory than the kernel may use #gpu", function()
    abandoned_by("may use at most %d+ bytes of dynamic shared memory", function(builder)
      local big = gpurun.LaunchConfig({ grid = 1, block = 32, shmem_size = 1 << 30 })
      gpurun.launch(builder, big, kernel("vec_add"), a, a, a, gpurun.u64(n))
    end)
  end)

  it("a wrong argument count #gpu", function()
    abandoned_by("takes 4 parameters, got 3", function(builder)
      gpurun.launch(builder, config, kernel("vec_add"), a, a, a)
    end)
  end)

  it("a wrong argument in a parameter's place #gpu", function()
    abandoned_by("parameter 4 %(%.u64%): takes 8 bytes but gpurun%.i32 is 4", function(builder)
      gpurun.launch(builder, config, kernel("vec_add"), a, a, a, gpurun.i32(1))
    end)
  end)

  it("a plan whose buffer was closed #gpu", function()
    local b = gpurun.zeros(n, "float32")
    local plan <close> = kernel("vec_add"):bind(config, b, b, b, gpurun.u64(n))
    b:close()
    abandoned_by("a gpurun.Buffer it passes was closed after bind", function(builder)
      plan:launch(builder)
    end)
  end)

  it("a failed CUDA call #gpu", function()
    -- Querying a stream is one of the calls the driver refuses during a capture.
    abandoned_by("cuStreamQuery: CUDA_ERROR_STREAM_CAPTURE_[%u_]+ %b() while querying a stream",
      function()
        stream:query()
      end)
  end)

  it("an allocation, which a capture cannot hold #gpu", function()
    abandoned_by("cannot allocate a gpurun.Buffer while a graph is being built", function()
      gpurun.empty(16)
    end)
  end)

  it("a buffer operation on the captured stream #gpu", function()
    abandoned_by("the stream is being captured by a GraphBuilder", function()
      a:fill(1, stream)
    end)
  end)

  it("an error from an unrelated gpurun function #gpu", function()
    abandoned_by("positive element count expected", function()
      gpurun.u64(1) -- fine
      gpurun.zeros(0)
    end)
  end)

  it("a Lua error inside the pipeline function given to bench.capture #gpu", function()
    local ok, err = pcall(bench.capture, stream, function(builder)
      gpurun.launch(builder, config, kernel("vec_add"), a, a, a, gpurun.u64(n))
      error("the pipeline broke")
    end)
    assert.is_false(ok)
    assert.matches("the pipeline broke", err)
    gpurun.launch(stream, config, kernel("vec_add"), a, a, a, gpurun.u64(n))
    stream:sync()
  end)

  it("an error in ProgramOptions, which is written in Lua #gpu", function()
    abandoned_by("unknown option 'bogus'", function()
      gpurun.ProgramOptions{ bogus = true }
    end)
  end)
end)

describe("the bindings", function()
  -- The rule holds because every error goes through src/runtime/error.c;
  -- a binding that raised through Lua's own helpers would slip past it.
  it("raise only through the runtime's error functions", function()
    local raising = { "luaL_error", "luaL_argerror", "luaL_typeerror", "luaL_argcheck",
                      "luaL_argexpected", "luaL_check%a+", "luaL_opt%a*", "lua_error" }
    local offenders = {}
    local listing = io.popen("find src/runtime src/types src/module -name '*.c' | sort")
    local scanned = 0
    for path in listing:lines() do
      -- entry.c raises while the module opens, before any capture can be.
      if path ~= "src/runtime/error.c" and path ~= "src/module/entry.c" then
        scanned = scanned + 1
        local number = 0
        for line in io.lines(path) do
          number = number + 1
          local code = line:gsub("/%*.-%*/", ""):gsub("//.*", "")
          for _, name in ipairs(raising) do
            if code:find("%f[%w_]" .. name .. "%s*%(") and not code:find("luaL_checkversion") then
              offenders[#offenders + 1] = ("%s:%d: %s"):format(path, number, line)
            end
          end
        end
      end
    end
    listing:close()
    assert.is_true(scanned >= 25, "found only " .. scanned .. " binding files to scan")
    assert.are.same({}, offenders)
  end)
end)
