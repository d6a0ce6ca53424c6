return require("gpurun.script.plot")
