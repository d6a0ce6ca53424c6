-- The reduction samples' rule for their block size: the shared-memory tree
-- halves the active threads each step, so a block has a power of 2 threads,
-- at most 1024 (the most a block may have).
--
--   require("gpurun.samples.tree_reduction").check_threads(cli, options.threads)
local tree_reduction = {}

-- check_threads(cli, threads): a usage error through cli unless threads is
-- nil (the sample's own choice) or a power of 2 in [1, 1024].
function tree_reduction.check_threads(cli, threads)
  if threads and (threads > 1024 or threads & (threads - 1) ~= 0) then
    cli:usage_error(("--threads must be a power of 2 in [1, 1024] (the tree reduction halves it), got %d")
      :format(threads))
  end
end

return tree_reduction
