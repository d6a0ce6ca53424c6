-- How the Python samples print counts: digits in groups of three.
--
--   require("gpurun.samples.digits").grouped(16777216) --> "16,777,216"
local digits = {}

-- grouped(n) -> n's digits with a comma every three, as Python's {:,}.
function digits.grouped(n)
  local text = tostring(n)
  repeat
    local done
    text, done = text:gsub("^(%d+)(%d%d%d)", "%1,%2")
  until done == 0
  return text
end

return digits
