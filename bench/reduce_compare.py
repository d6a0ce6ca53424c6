#!/usr/bin/env python3
"""bench/reduce_compare.py: float32 sum, argmax, the fused map-reduce
sum(((a + b) * c - a)^2) and an inclusive scan in CuPy and PyTorch, each
captured into a CUDA graph and the graph launched, timed as bench/reduce.lua
times gpurun; with --gpurun FILE (bench/reduce.lua --json) and --cub FILE
(build/bench/reduce_cub) one table of every side, in us and GB/s against the
measured copy bandwidth.

bench/reduce_compare.sh runs all three sides in one command.
"""
import common

A, B, C = 1.5, 2.25, 0.5  # r3 = (a + b) * c - a = 0.375, as bench/reduce.lua
BYTES = {"sum": 4, "argmax": 4, "fused": 12, "scan": 8}


def inputs(xp, n, dtype):
    x = xp.ones(n, dtype=dtype)
    x[max(0, n - 4)] = 2  # argmax's answer, as bench/reduce.lua puts it
    return x


def cupy_paths(n, seconds, reps):
    """cupy.sum, cupy.argmax, cupy.cumsum (with out= where CuPy takes it) and
    cupy ReductionKernel (the sum, and the fused map-reduce) at n elements,
    each captured into a graph and its replays timed by common.measure (as
    gpurun.bench.measure times: from a device synchronisation to another
    after warm-up, the median over reps repetitions of enough iterations for
    about seconds, 10 to 5000)."""
    import cupy
    figures = {}
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        x = inputs(cupy, n, cupy.float32)
        a, b, c = (cupy.full(n, v, dtype=cupy.float32) for v in (A, B, C))
        s = cupy.zeros((), dtype=cupy.float32)
        at = cupy.zeros((), dtype=cupy.int64)
        y = cupy.empty(n, dtype=cupy.float32)
        kernel_sum = cupy.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "rk_sum")
        kernel_fused = cupy.ReductionKernel(
            "float32 p, float32 q, float32 r", "float32 y",
            "((p + q) * r - p) * ((p + q) * r - p)", "a + b", "y = a", "0", "rk_fused")
        steps = {
            "cupy.sum": lambda: cupy.sum(x, out=s),
            "cupy ReductionKernel sum": lambda: kernel_sum(x, s),
            "cupy.argmax": lambda: cupy.argmax(x, out=at),
            "cupy ReductionKernel fused": lambda: kernel_fused(a, b, c, s),
            "cupy.cumsum": lambda: cupy.cumsum(x, out=y),
        }
        for label, step in steps.items():
            figure = common.cupy_graphed(step, stream, seconds, reps, f"{label} at {n} elements")
            if figure is not None:
                figures[label] = figure
    return figures


def torch_paths(n, seconds, reps):
    """torch.sum, torch.argmax, torch.cumsum and the fused map-reduce, eager
    calls captured in a torch.cuda.CUDAGraph, and torch.compile of the fused
    map-reduce (one Triton kernel, mode="reduce-overhead": CUDA graphs), timed
    as cupy_paths times."""
    import torch
    x = inputs(torch, n, torch.float32).cuda()
    a, b, c = (torch.full((n,), v, dtype=torch.float32, device="cuda") for v in (A, B, C))
    s = torch.zeros((), dtype=torch.float32, device="cuda")
    y = torch.empty(n, dtype=torch.float32, device="cuda")
    sync = torch.cuda.synchronize
    figures = {}
    holders = {}

    def graphed(label, step):
        figure = common.torch_graphed(step, seconds, reps, holders, label, f"{label} at {n} elements")
        if figure is not None:
            figures[label] = figure

    graphed("torch.sum", lambda: torch.sum(x, dim=0, out=s))
    graphed("torch.argmax", lambda: torch.argmax(x))
    graphed("torch.cumsum", lambda: torch.cumsum(x, dim=0, out=y))
    graphed("torch eager fused", lambda: (((a + b) * c - a) ** 2).sum())

    def fused(p, q, r):
        return (((p + q) * r - p) ** 2).sum()

    try:
        torch._dynamo.reset()  # a fresh start per size: past the recompile limit it runs eager
        compiled = torch.compile(fused, dynamic=False, mode="reduce-overhead")
        for _ in range(3):  # reduce-overhead records its graph after a few calls
            compiled(a, b, c)
        figures["torch.compile fused"] = common.measure(lambda: compiled(a, b, c), sync, seconds, reps)
        value = float(compiled(a, b, c))
        want = n * 0.375 * 0.375
        if abs(value - want) > 1e-3 * want:
            common.note(f"torch.compile fused at {n} elements: {value}, expected {want}")
    except Exception as error:
        common.note(f"torch.compile fused at {n} elements: {type(error).__name__}: {error}")
    return figures


# (operation, label, where the figure comes from: "gpurun" key, "cub" key or a python label)
ROWS = [
    ("sum", "gpurun sum, graph", ("gpurun", "sum")),
    ("sum", "gpurun sum (float64 acc.), graph", ("gpurun", "sum_f64")),
    ("sum", "gpurun sum, launched", ("gpurun", "sum_launch")),
    ("sum", "CUB DeviceReduce::Sum, graph", ("cub", "sum")),
    ("sum", "cupy.sum, graph", ("python", "cupy.sum")),
    ("sum", "cupy ReductionKernel, graph", ("python", "cupy ReductionKernel sum")),
    ("sum", "torch.sum, graph", ("python", "torch.sum")),
    ("argmax", "gpurun argmax, graph", ("gpurun", "argmax")),
    ("argmax", "CUB DeviceReduce::ArgMax, graph", ("cub", "argmax")),
    ("argmax", "cupy.argmax, graph", ("python", "cupy.argmax")),
    ("argmax", "torch.argmax, graph", ("python", "torch.argmax")),
    ("fused", "gpurun fused map-reduce, graph", ("gpurun", "fused")),
    ("fused", "CUB TransformReduce, graph", ("cub", "fused")),
    ("fused", "cupy ReductionKernel fused, graph", ("python", "cupy ReductionKernel fused")),
    ("fused", "torch eager fused, graph", ("python", "torch eager fused")),
    ("fused", "torch.compile fused (graphs)", ("python", "torch.compile fused")),
    ("scan", "gpurun inclusive_scan, graph", ("gpurun", "scan")),
    ("scan", "CUB DeviceScan::InclusiveSum, graph", ("cub", "scan")),
    ("scan", "cupy.cumsum, graph", ("python", "cupy.cumsum")),
    ("scan", "torch.cumsum, graph", ("python", "torch.cumsum")),
]


def figure(source, key, n, gpurun, cub, python):
    if source == "python":
        return python.get(n, {}).get(key, {}).get("us_per_iter")
    side = gpurun if source == "gpurun" else cub
    if not side:
        return None
    for sizes in side["sizes"]:
        if sizes["elements"] == n:
            return sizes.get(key, {}).get("us_per_iter")
    return None


def print_table(device, sizes, gpurun, cub, python, reps):
    width = 38
    print(f"{device}: float32, us per graph launch (GB/s of the bytes each must move), "
          f"median of {reps} repetitions")
    print("path".ljust(width) + "".join(f"{n:>20}" for n in sizes))
    last = None
    for operation, label, (source, key) in ROWS:
        if operation != last:
            print(f"-- {operation} ({BYTES[operation]} bytes per element)")
            last = operation
        cells = []
        for n in sizes:
            us = figure(source, key, n, gpurun, cub, python)
            if us is None:
                cells.append(f"{'-':>20}")
            else:
                cells.append(f"{us:>12.2f} ({BYTES[operation] * n / (us * 1e-6) / 1e9:>5.0f})")
        print(label.ljust(width) + "".join(cells))
    if gpurun:
        copy, read = gpurun["copy"]["gb_per_s"], gpurun["read"]["gb_per_s"]
        print(f"copy: {copy:.0f} GB/s (read + write), read: {read:.0f} GB/s (bench/reduce.lua)")
        for n in sizes:
            parts = []
            for operation, key, limit, what in (("sum", "sum", read, "read"), ("fused", "fused", read, "read"),
                                                 ("scan", "scan", copy, "copy")):
                us = figure("gpurun", key, n, gpurun, cub, python)
                theirs = figure("cub", key, n, gpurun, cub, python)
                if us:
                    text = f"{operation} {100 * BYTES[operation] * n / (us * 1e-6) / 1e9 / limit:.0f}% of {what}"
                    if theirs:
                        text += f", {100 * (us / theirs - 1):+.1f}% vs CUB"
                    parts.append(text)
            if parts:
                print(f"  at {n}: " + "; ".join(parts))


def main():
    """The table, or --json. A module that is missing (cupy, torch) is
    reported and its rows show '-'."""
    parser = common.parser(__doc__, "4096,65536,1048576,16777216,67108864", reps=15, seconds=0.1)
    parser.add_argument("--gpurun", help="bench/reduce.lua --json output")
    parser.add_argument("--cub", help="build/bench/reduce_cub output")
    options = parser.parse_args()
    sizes = options.sizes
    sides = {name: path and common.read_json(path, name)
             for name, path in (("gpurun", options.gpurun), ("cub", options.cub))}
    device = (sides["gpurun"] or sides["cub"] or {}).get("device", "this GPU")
    python, device = common.peer_rows(sizes, options.seconds, options.reps,
                                      (("cupy", cupy_paths), ("torch", torch_paths)), device)
    if options.json:
        common.print_json({"device": device, "reps": options.reps, "sizes": sizes, "gpurun": sides["gpurun"],
                           "cub": sides["cub"], "python": {str(n): python[n] for n in sizes}})
    else:
        print_table(device, sizes, sides["gpurun"], sides["cub"], python, options.reps)


if __name__ == "__main__":
    main()
