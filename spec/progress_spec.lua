-- gpurun.progress: the progress line of long runs, its estimate, and that it
-- stays silent off a terminal. Nothing here needs a GPU.
local progress = require("gpurun.progress")
local process = require("spec.support.process")

-- A line with a clock the spec moves and a record of what it wrote.
local function fake_line(options)
  local now = 0
  local written = {}
  options.clock = function() return now end
  options.write = function(text) written[#written + 1] = text end
  if options.enabled == nil then
    options.enabled = true
  end
  local line = progress.new(options)
  return line, written, function(seconds) now = now + seconds end
end

describe("gpurun.progress", function()
  it("formats durations as m:ss and h:mm:ss", function()
    assert.are.equal("0:00", progress.format_duration(0))
    assert.are.equal("0:07", progress.format_duration(6.6))
    assert.are.equal("1:05", progress.format_duration(65))
    assert.are.equal("59:59", progress.format_duration(3599))
    assert.are.equal("1:02:03", progress.format_duration(3723))
    assert.are.equal("0:00", progress.format_duration(-3))
  end)

  it("estimates from a line fitted to the items done", function()
    assert.is_nil(progress.estimate({}, {}, { 1, 2 }))
    -- 1 s per item when sizes do not differ
    assert.are.equal(3, progress.estimate({ 1, 1 }, { 1, 1 }, { 1, 1, 1 }))
    -- seconds = 0.5 + 0.001 * size, exactly
    local left = progress.estimate({ 1000, 2000, 4000 }, { 1.5, 2.5, 4.5 }, { 8000, 16000 })
    assert.is_true(math.abs(left - (8.5 + 16.5)) < 1e-9, left)
    -- a falling line (noise) does not predict negative times: the mean instead
    assert.are.equal(4, progress.estimate({ 1, 2 }, { 3, 1 }, { 10, 20 }))
    -- a negative intercept: a line through the origin instead
    left = progress.estimate({ 1, 2 }, { 0.1, 2 }, { 4 })
    assert.is_true(left > 0, left)
  end)

  it("draws stage, done/total, elapsed and the estimate, in place", function()
    local line, written, advance = fake_line{ label = "sweep", total = 4, sizes = { 1, 1, 2, 2 } }
    line:begin("2^10 individual")
    assert.are.equal("\r\27[Ksweep: 2^10 individual  0/4 done  0:00 elapsed, estimating left",
                     written[#written])
    advance(2)
    line:finish_item()
    line:begin("2^10 graph")
    assert.are.equal("\r\27[Ksweep: 2^10 graph  1/4 done  0:02 elapsed, ~0:06 left",
                     written[#written])
    advance(1)
    line:substep(2, 5)
    assert.are.equal("\r\27[Ksweep: 2^10 graph (2/5)  1/4 done  0:03 elapsed, ~0:05 left",
                     written[#written])
  end)

  it("redraws at most ten times a second between items", function()
    local line, written, advance = fake_line{ total = 2 }
    line:begin("a")
    local count = #written
    for _ = 1, 50 do
      advance(0.001)
      line:substep(1, 100)
    end
    assert.are.equal(count, #written, "no redraw within 0.1 s")
    advance(0.2)
    line:substep(2, 100)
    assert.are.equal(count + 1, #written)
  end)

  it("erases itself before other output and at the end", function()
    local line, written = fake_line{ total = 1 }
    line:clear()
    assert.are.equal(0, #written, "nothing to erase yet")
    line:begin("a")
    line:clear()
    assert.are.equal("\r\27[K", written[#written])
    line:begin("a")
    line:close()
    assert.are.equal("\r\27[K", written[#written])
    local count = #written
    line:begin("b")
    line:finish_item()
    assert.are.equal(count, #written, "nothing after close")
  end)

  it("writes nothing when disabled", function()
    local line, written, advance = fake_line{ total = 3, enabled = false }
    line:begin("a")
    advance(1)
    line:substep(1, 2)
    line:finish_item()
    line:clear()
    line:close()
    assert.are.same({}, written)
  end)

  local PRINT_IS_TERMINAL = 'print(require("gpurun.progress").is_terminal(io.stderr))'

  it("is off when stderr is not a terminal", function()
    local result = process.gpurun("-e " .. process.quote(PRINT_IS_TERMINAL))
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("false\n", result.stdout)
  end)

  -- script(1) (util-linux) runs a command on a pseudo-terminal.
  local has_script = os.execute("command -v script >/dev/null 2>&1")
  local on_terminal = has_script and it or pending
  on_terminal("is on when stderr is a terminal", function()
    local command = process.quote(process.gpurun_bin()) .. " -e " .. process.quote(PRINT_IS_TERMINAL)
    local result = process.run("TERM=xterm script -qec " .. process.quote(command) .. " /dev/null")
    assert.are.equal(0, result.code, result.stderr)
    assert.matches("^true\r?\n$", result.stdout)
  end)
end)
