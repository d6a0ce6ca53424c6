-- Assertions on errors that the specs share.
local expect = {}

-- The message of the error f(...) raises; fails the spec when it raises none.
function expect.error_of(f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "expected an error, got none")
  return tostring(err)
end

-- Fails unless text holds fragment (found plainly).
function expect.contains(fragment, text)
  assert(text:find(fragment, 1, true), ("expected %q in %q"):format(fragment, text))
end

-- The bytes the Lua heap grew by over `calls` calls of step (default
-- 1000), with the collector stopped: 0 for a path that allocates nothing.
-- Warmed up `warm` times (default 4), then one call after the collection,
-- which shrinks the stack and frees interned strings that the first call
-- would make again once.
function expect.bytes_allocated(step, calls, warm)
  for _ = 1, warm or 4 do step() end
  collectgarbage("collect")
  collectgarbage("stop")
  step()
  local before = collectgarbage("count")
  for _ = 1, calls or 1000 do step() end
  local after = collectgarbage("count")
  collectgarbage("restart")
  return (after - before) * 1024
end

return expect
