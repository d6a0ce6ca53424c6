return require("gpurun.script.bench")
