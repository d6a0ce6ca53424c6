return require("gpurun.script.sweep.measure")
