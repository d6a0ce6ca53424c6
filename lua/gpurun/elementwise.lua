-- gpurun.elementwise: the elementwise kernels' library under the name
-- scripts required it by before the module had gpurun.elementwise built
-- in; it is gpurun.compute.elementwise (docs/library.md, Earlier names).
return require("gpurun.compute.elementwise")
