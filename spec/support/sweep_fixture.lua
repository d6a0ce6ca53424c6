-- A sweep result for the plot and file specs, from DESIGN.md's performance
-- table (one H200, driver 580.159, CUDA 13.0, us/iter medians): gpurun's
-- launch / graph figures at 4096, 2^20 and 2^24 elements, and at 2^26 the
-- pure-C individual figure with no graph figure, as a sweep interrupted in
-- the middle of that size leaves it.
local function row(elements, individual, graph)
  return {
    elements = elements,
    us_per_iter = { individual = individual, graph = graph },
    speedup = graph and { graph = individual / graph } or {},
    checks = { individual = true, graph = graph and true or nil },
  }
end

return function()
  return {
    pipeline = "add -> mul -> sub",
    title = "add -> mul -> sub: individual launches vs graph replay on NVIDIA H200 "
      .. "(driver 580.159, CUDA 13.0)",
    x_label = "elements per vector",
    device = "NVIDIA H200",
    driver = "driver 580.159, CUDA 13.0",
    iters = 1000,
    repeats = 5,
    paths = { { name = "individual", label = "individual launches" },
              { name = "graph", label = "graph replay" } },
    baseline = "individual",
    crossover_path = "graph",
    threshold = 1.05,
    sizes = { 4096, 1048576, 16777216, 67108864 },
    rows = { row(4096, 13.6, 4.06), row(1048576, 13.2, 11.9), row(16777216, 185, 182),
             row(67108864, 701, nil) },
    crossover = { elements = 16777216, speedup = 185 / 182 },
    complete = false,
    interrupted = true,
  }
end
