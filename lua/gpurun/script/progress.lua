-- A progress line on stderr for long runs: the stage, items done of the
-- total, the time elapsed and an estimate of the time left, redrawn in
-- place. Only on a terminal: when stderr is a file or a pipe, or the caller
-- says so (a --json run), every method does nothing.
--
--   local progress = require("gpurun.progress")
--   local line = progress.new{ label = "sweep", total = #sizes, sizes = sizes }
--   line:begin("2^20 graph")      -- an item starts
--   line:finish_item()            -- it is done (its time feeds the estimate)
--   line:close()                  -- at the end: the line is erased

local check_options = require("gpurun.options").check

local progress = {}

local REDRAW_INTERVAL_S = 0.1
local ERASE_LINE = "\r\27[K"

-- True when `file` (default io.stderr) is a terminal that can redraw a line.
function progress.is_terminal(file)
  local has_term, term = pcall(require, "term") -- optional: lua-term, for isatty
  if not has_term or os.getenv("TERM") == "dumb" then
    return false
  end
  return term.isatty(file or io.stderr) and true or false
end

-- seconds -> "0:07", "12:34", "1:02:03".
function progress.format_duration(seconds)
  local whole = math.max(0, math.floor(seconds + 0.5))
  local hours, minutes, secs = whole // 3600, whole % 3600 // 60, whole % 60
  if hours > 0 then
    return string.format("%d:%02d:%02d", hours, minutes, secs)
  end
  return string.format("%d:%02d", minutes, secs)
end

-- Seconds the items of `remaining_sizes` should take, from items of
-- `done_sizes` that took `done_seconds`: a least-squares line
-- seconds = a + b * size with a, b >= 0 (the mean when the sizes done do not
-- differ). nil before any item is done. So an item is taken to cost a
-- launch cost and a cost per element; without sizes every item counts the
-- same.
function progress.estimate(done_sizes, done_seconds, remaining_sizes)
  local n = #done_seconds
  if n == 0 then
    return nil
  end
  local sum_x, sum_t, sum_xx, sum_xt = 0, 0, 0, 0
  for i = 1, n do
    local x, t = done_sizes[i], done_seconds[i]
    sum_x, sum_t = sum_x + x, sum_t + t
    sum_xx, sum_xt = sum_xx + x * x, sum_xt + x * t
  end
  local mean_x, mean_t = sum_x / n, sum_t / n
  local variance = sum_xx / n - mean_x * mean_x
  local a, b = mean_t, 0
  if variance > 1e-12 * (mean_x * mean_x + 1) then
    b = (sum_xt / n - mean_x * mean_t) / variance
    a = mean_t - b * mean_x
    if b < 0 then
      a, b = mean_t, 0
    elseif a < 0 then -- a line through the origin instead
      a, b = 0, sum_xt / sum_xx
    end
  end
  local total = 0
  for _, x in ipairs(remaining_sizes) do
    total = total + a + b * x
  end
  return total
end

local Line = {}
Line.__index = Line

-- options: total (items, required), label (default "progress"), sizes (one
-- number per item, in order, for the estimate), enabled (default: stderr
-- is a terminal), write (default: to stderr), clock (default
-- gpurun.perf_counter, else os.clock).
function progress.new(options)
  if options == nil then error("progress.new: options with total are required", 2) end
  check_options("progress.new", options,
    { "total", "label", "sizes", "enabled", "write", "clock" })
  local enabled = options.enabled
  if enabled == nil then
    enabled = progress.is_terminal(io.stderr)
  end
  local clock = options.clock
  if clock == nil then
    local has_gpurun, gpurun = pcall(require, "gpurun") -- optional: os.clock serves without it
    clock = has_gpurun and gpurun.perf_counter or os.clock
  end
  local line = setmetatable({
    enabled = enabled,
    label = options.label or "progress",
    total = options.total,
    sizes = options.sizes,
    write = options.write or function(text)
      io.stderr:write(text)
      io.stderr:flush()
    end,
    clock = clock,
    done = 0,
    done_sizes = {},
    done_seconds = {},
    shown = false,
  }, Line)
  line.started = clock()
  return line
end

local function size_of(line, item)
  return line.sizes and line.sizes[item] or 1
end

-- Seconds left for the items not yet done, less what the current one has
-- already run; nil before the first item is done.
function Line:seconds_left(now)
  local remaining = {}
  for item = self.done + 1, self.total do
    remaining[#remaining + 1] = size_of(self, item)
  end
  local left = progress.estimate(self.done_sizes, self.done_seconds, remaining)
  if left and self.item_started then
    left = math.max(0, left - (now - self.item_started))
  end
  return left
end

function Line:text(now)
  local stage = self.stage or ""
  if self.sub_total then
    stage = string.format("%s (%d/%d)", stage, self.sub_done, self.sub_total)
  end
  local left = self:seconds_left(now)
  return string.format("%s: %s  %d/%d done  %s elapsed, %s left", self.label, stage,
                       self.done, self.total, progress.format_duration(now - self.started),
                       left and ("~" .. progress.format_duration(left)) or "estimating")
end

-- Redraws the line; only every REDRAW_INTERVAL_S unless forced.
function Line:draw(force)
  if not self.enabled then
    return
  end
  local now = self.clock()
  if not force and self.drawn_at and now - self.drawn_at < REDRAW_INTERVAL_S then
    return
  end
  self.drawn_at = now
  self.shown = true
  self.write(ERASE_LINE .. self:text(now))
end

function Line:begin(stage)
  self.stage = stage
  self.sub_done, self.sub_total = nil, nil
  self.item_started = self.clock()
  self:draw(true)
end

-- line:substep(3, 5): within the item, repeat 3 of 5.
function Line:substep(done, total)
  self.sub_done, self.sub_total = done, total
  self:draw(false)
end

function Line:finish_item()
  local now = self.clock()
  self.done = self.done + 1
  self.done_sizes[#self.done_sizes + 1] = size_of(self, self.done)
  self.done_seconds[#self.done_seconds + 1] = now - (self.item_started or now)
  self.item_started = nil
  self.sub_done, self.sub_total = nil, nil
  self:draw(true)
end

-- Erases the line so that other output starts at the left margin; the next
-- draw puts it back. Call it before printing anything else to the terminal.
function Line:clear()
  if self.enabled and self.shown then
    self.write(ERASE_LINE)
    self.shown = false
  end
end

function Line:close()
  self:clear()
  self.enabled = false
end

return progress
