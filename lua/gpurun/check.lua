return require("gpurun.script.check")
