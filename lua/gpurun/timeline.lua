return require("gpurun.script.timeline")
