-- gpurun.kernels: the sample's kernels under their first name; it is
-- gpurun.samples.kernels (docs/library.md, Earlier names).
return require("gpurun.samples.kernels")
