return require("gpurun.io.npy")
