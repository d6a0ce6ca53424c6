return require("gpurun.script.sweep.sizes")
