return require("gpurun.io.python_literal")
