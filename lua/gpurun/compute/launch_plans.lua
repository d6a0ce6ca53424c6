-- What a generated kernel's bind returns: a list of gpurun.LaunchPlans (a
-- reduction of columns launches two kernels, an elementwise pipeline one
-- per kernel) that launch and close as one, with the temporary buffers
-- they use, closed with them.
local gpurun = require("gpurun")

local launch_plans = {}

local LaunchPlans = {}
LaunchPlans.__index = LaunchPlans
launch_plans.LaunchPlans = LaunchPlans

-- new([temporaries]) -> an empty list, to which the caller adds the plans
-- in launch order.
function launch_plans.new(temporaries)
  return setmetatable({ temporaries = temporaries }, LaunchPlans)
end

function LaunchPlans:launch(target)
  for position = 1, #self do
    self[position]:launch(target)
  end
end

function LaunchPlans:close()
  for position = 1, #self do
    self[position]:close()
  end
  for _, temporary in ipairs(self.temporaries or {}) do
    temporary:close()
  end
end
LaunchPlans.__close = LaunchPlans.close

-- Scripts launch and close these while a builder captures: their errors
-- end the capture as gpurun's own do.
gpurun.guard(LaunchPlans)

return launch_plans
