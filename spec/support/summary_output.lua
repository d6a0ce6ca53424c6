-- busted output: the usual terminal report, then a note on excluded #gpu specs
-- and the closing line CI reads: "N passed, N failed, N skipped".
local term = require("term")

return function(options)
  local busted = require("busted")
  local gpu_tag = require("spec.support.gpu_tag")
  local tty = io.type(io.stdout) == "file" and term.isatty(io.stdout)
  local handler = require("busted.outputHandlers." .. (tty and "utfTerminal" or "plainTerminal"))(options)

  local function summary()
    local passed = handler.successesCount
    local failed = handler.failuresCount + handler.errorsCount
    local skipped = handler.pendingsCount + gpu_tag.excluded + gpu_tag.multi_excluded
    if gpu_tag.multi_excluded > 0 then
      io.write(("%d spec(s) tagged #multigpu excluded: %s\n")
        :format(gpu_tag.multi_excluded, gpu_tag.multi_reason))
    end
    if gpu_tag.excluded > 0 then
      io.write(("%d spec(s) tagged #gpu excluded: no usable CUDA GPU (%s)\n")
        :format(gpu_tag.excluded, gpu_tag.reason))
    elseif gpu_tag.available then
      io.write(("#gpu specs ran on %d CUDA device(s)\n"):format(gpu_tag.device_count))
    end
    io.write(("%d passed, %d failed, %d skipped\n"):format(passed, failed, skipped))
    io.flush()
    return nil, true
  end

  local subscribe = handler.subscribe
  handler.subscribe = function(self, opts)
    subscribe(self, opts)
    busted.subscribe({ "suite", "end" }, summary)
  end
  return handler
end
