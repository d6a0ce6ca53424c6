return require("gpurun.script.shell")
