-- busted output: the usual terminal report, then what the #gpu rule left
-- out (gpurun.testing's lines) and the closing line CI reads:
-- "N passed, N failed, N skipped". Into a file (not a terminal), each
-- failure is also written as it happens ("Failure now -> ..."), so that a
-- run cut short by a time limit still says what failed.
local term = require("term")

return function(options)
  local busted = require("busted")
  require("gpurun")
  local testing = require("gpurun.testing")
  local rule = testing.gpu
  rule.report = false -- written here, before the closing line
  local tty = io.type(io.stdout) == "file" and term.isatty(io.stdout)
  local handler = require("busted.outputHandlers." .. (tty and "utfTerminal" or "plainTerminal"))(options)

  local function summary()
    local passed = handler.successesCount
    local failed = handler.failuresCount + handler.errorsCount
    local skipped = handler.pendingsCount + rule.excluded + rule.multi_excluded
    for _, line in ipairs(testing.summary_lines()) do
      io.write(line, "\n")
    end
    io.write(("%d passed, %d failed, %d skipped\n"):format(passed, failed, skipped))
    io.flush()
    return nil, true
  end

  local function report_now(element, _, status)
    if status ~= "failure" and status ~= "error" then return nil, true end
    local list = status == "failure" and handler.failures or handler.errors
    local last = list[#list]
    local message = last and last.message
    if type(message) ~= "string" then message = tostring(message) end
    io.write(("\n%s now -> %s\n%s\n"):format(status == "failure" and "Failure" or "Error",
      handler.getFullName(element), message:sub(1, 2000)))
    io.flush()
    return nil, true
  end

  local subscribe = handler.subscribe
  handler.subscribe = function(self, opts)
    subscribe(self, opts)
    if not tty then busted.subscribe({ "test", "end" }, report_now) end
    busted.subscribe({ "suite", "end" }, summary)
  end
  return handler
end
