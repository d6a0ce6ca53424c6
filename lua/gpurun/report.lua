return require("gpurun.script.report")
