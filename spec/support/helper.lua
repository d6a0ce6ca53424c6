-- busted helper (see .busted): the suite's specs follow the #gpu rule users'
-- specs do (lua/gpurun/testing.lua): #gpu specs are left out when no GPU is
-- usable, #multigpu specs when fewer than two devices are visible, and
-- counted. require("gpurun") first: under lua5.4 it adds the searcher that
-- finds gpurun's Lua library.
require("gpurun")
require("gpurun.testing")
