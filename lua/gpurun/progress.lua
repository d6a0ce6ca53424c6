return require("gpurun.script.progress")
