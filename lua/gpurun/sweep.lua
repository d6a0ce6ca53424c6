return require("gpurun.script.sweep")
