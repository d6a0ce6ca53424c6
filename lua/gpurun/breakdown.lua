return require("gpurun.script.breakdown")
