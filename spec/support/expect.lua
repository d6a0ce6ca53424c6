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

return expect
