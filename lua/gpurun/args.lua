return require("gpurun.script.args")
