return require("gpurun.script.sweep.present")
