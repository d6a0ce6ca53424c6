-- gpurun.quoted(value) -> how a message shows a value the user gave:
-- capped, escaped, never through its metamethods (gpurun.common's rule).
return require("gpurun.common").quoted
