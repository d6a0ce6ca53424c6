return require("gpurun.common").quoted
