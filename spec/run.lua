-- Runs the busted suite inside gpurun: `gpurun spec/run.lua [busted options]`.
-- The defaults (spec folder, helper, summary output) come from .busted.
require("busted.runner")({ standalone = false })
