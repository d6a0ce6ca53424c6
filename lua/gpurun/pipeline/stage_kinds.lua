-- The stage kinds a pipeline declares, one file each in stage_kinds/, in
-- one list: a new kind is one file there and one line here (in
-- parentheses: require returns where it loaded the file from too).

-- Each kind is one table:
--   name       what plan() and explain() call its stages
--   method     the pipeline method that declares one (p:<method>(...))
--   declare(p, ...) -> stage: the arguments checked, the stage's data and
--              accesses found (through pipeline/declare.lua); the stage may
--              carry `fusion` (pipeline/schedule.lua) and `not_fused`
--   compile(stage, runnable, state): makes the stage runnable on a device
--              (pipeline/compile.lua): runnable.refresh() resolves its
--              arguments into runnable.args, runnable.launch(target) queues
--              it on a stream or builder; also runnable.arity, and
--              runnable.object (a kernel object, or a table with prepare(),
--              for its prepare (before a capture) and
--              node_arguments) or runnable.node_slots() (where its graph
--              node takes each scalar), and runnable.prepare(stream)
--              (optional: library state made on the stream before a
--              capture); state holds the device's callbacks
--   accesses(p, stage) (optional) -> the accesses the schedule sees, where
--              they are known only when planning
--   describe(access) (optional) -> what explain() says of an inferred access
--   split(stage) (optional) -> declare_on(slice), declaring the stage again
--              on one device's slice, or nil and why it cannot split
--   launches_kernel (optional) true when its stages' last node is a kernel
--   after_kernel(stage) (optional) -> whether the stage's launch waits for
--              the kernel before it in its own code (generated kernels do),
--              so that it may be launched with programmatic stream
--              serialization after a kernel (pipeline/schedule.lua marks
--              where: runnable.unit.programmatic)
return {
  (require("gpurun.pipeline.stage_kinds.call")),
  (require("gpurun.pipeline.stage_kinds.kernel")),
  (require("gpurun.pipeline.stage_kinds.copy")),
  (require("gpurun.pipeline.stage_kinds.fill")),
  (require("gpurun.pipeline.stage_kinds.host")),
  (require("gpurun.pipeline.stage_kinds.matmul")),
  (require("gpurun.pipeline.stage_kinds.sort")),
  (require("gpurun.pipeline.stage_kinds.fft")),
  (require("gpurun.pipeline.stage_kinds.spmv")),
}
