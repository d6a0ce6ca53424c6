#!/usr/bin/env python3
"""bench/fused_compare.py: (a + b) * c - a on float32 vectors in CuPy and
PyTorch, timed as bench/fused.lua times gpurun, and the device's copy
bandwidth; with --gpurun FILE (bench/fused.lua --json) one table of both.

bench/fused_compare.sh runs bench/fused.lua and then this, in one command.
"""
import sys

import common

EXPRESSION = "r = (a + b) * c - a"
A, B, C, EXPECTED = 1.5, 2.25, 0.5, 0.375  # exact in float32, as in bench/fused.lua


def check(result, what, n):
    import torch
    wrong = int((torch.as_tensor(result, device="cuda") != EXPECTED).sum())
    if wrong:
        sys.exit(f"{common.PROGRAM}: {what} at {n} elements: {wrong} of {n} results are not {EXPECTED}")


def cupy_paths(n, seconds, reps):
    """At n elements, each timed by common.measure as gpurun.bench.measure
    times (from a device synchronisation to another after warm-up, the median
    over reps repetitions of enough iterations for about seconds, 10 to 5000):
    cupy elementwise        cupy.ElementwiseKernel, output passed in
    cupy elementwise graph  the same call captured in a CUDA graph (cupy.cuda.Stream.begin_capture)
    """
    import cupy
    kernel = cupy.ElementwiseKernel("float32 a, float32 b, float32 c", "float32 r", EXPRESSION, "fused")
    a, b, c = (cupy.full(n, v, dtype=cupy.float32) for v in (A, B, C))
    r = cupy.zeros(n, dtype=cupy.float32)
    stream = cupy.cuda.Stream(non_blocking=True)
    figures = {}
    with stream:
        figures["cupy elementwise"] = common.measure(lambda: kernel(a, b, c, r), stream.synchronize, seconds, reps)
        check(r, "cupy elementwise", n)
        r.fill(0)
        try:
            stream.begin_capture()
            kernel(a, b, c, r)
            graph = stream.end_capture()
        except Exception as error:  # an older CuPy: the row shows '-'
            common.note(f"no CuPy graph at {n} elements: {error}")
            return figures
        figures["cupy elementwise graph"] = common.measure(lambda: graph.launch(stream), stream.synchronize,
                                                    seconds, reps)
        check(r, "cupy elementwise graph", n)
    return figures


def torch_paths(n, seconds, reps):
    """At n elements, timed as cupy_paths times:
    torch eager            torch.add, torch.mul, torch.sub with out=: three kernels
    torch eager graph      the same three captured in a torch.cuda.CUDAGraph
    torch.compile          torch.compile(dynamic=False) of the expression: one Triton kernel
    torch.compile graphs   torch.compile(mode="reduce-overhead"): the same under CUDA graphs
    """
    import torch
    a, b, c = (torch.full((n,), v, dtype=torch.float32, device="cuda") for v in (A, B, C))
    r1, r2, r3 = (torch.zeros(n, dtype=torch.float32, device="cuda") for _ in range(3))
    sync = torch.cuda.synchronize
    figures = {}

    def eager():
        torch.add(a, b, out=r1)
        torch.mul(r1, c, out=r2)
        torch.sub(r2, a, out=r3)

    figures["torch eager"] = common.measure(eager, sync, seconds, reps)
    check(r3, "torch eager", n)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the default stream, as torch asks before capture
        eager()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    r3.zero_()
    with torch.cuda.graph(graph):
        eager()
    figures["torch eager graph"] = common.measure(graph.replay, sync, seconds, reps)
    check(r3, "torch eager graph", n)

    def expression(x, y, z):
        return (x + y) * z - x

    # A fresh start per size: past dynamo's recompile limit it would run eager.
    torch._dynamo.reset()
    compiled = torch.compile(expression, dynamic=False)
    compiled(a, b, c)
    figures["torch.compile"] = common.measure(lambda: compiled(a, b, c), sync, seconds, reps)
    check(compiled(a, b, c), "torch.compile", n)
    graphed = torch.compile(expression, dynamic=False, mode="reduce-overhead")
    for _ in range(3):  # reduce-overhead records its graph after a few calls
        graphed(a, b, c)
    figures["torch.compile graphs"] = common.measure(lambda: graphed(a, b, c), sync, seconds, reps)
    check(graphed(a, b, c), "torch.compile graphs", n)
    return figures


def copy_bandwidth(mib, seconds, reps):
    """One device-to-device copy of mib MiB (read + write counted)."""
    import torch
    n = mib * (1 << 20) // 4
    source = torch.ones(n, dtype=torch.float32, device="cuda")
    target = torch.empty_like(source)
    timing = common.measure(lambda: target.copy_(source), torch.cuda.synchronize, seconds, reps)
    return {"bytes": 8 * n, "us": timing["us_per_iter"], "gb_per_s": 8 * n / (timing["us_per_iter"] * 1e-6) / 1e9}


GPURUN_ROWS = [("fused_launch", "gpurun fused, launched"), ("fused_plan", "gpurun fused, plan"),
               ("fused_graph", "gpurun fused, graph"),
               ("fused_streaming_graph", "gpurun fused, streaming, graph"),
               ("generated_launch", "gpurun 3 generated kernels, launched"),
               ("generated_graph", "gpurun 3 generated kernels, graph")]
PYTHON_ROWS = ["cupy elementwise", "cupy elementwise graph", "torch eager", "torch eager graph",
               "torch.compile", "torch.compile graphs"]


def print_table(device, sizes, python, gpurun, copy, reps):
    width = 38
    print(f"{device}: (a + b) * c - a on float32, us/iter, median of {reps} repetitions")
    print("path".ljust(width) + "".join(f"{n:>12}" for n in sizes))
    rows = []
    if gpurun:
        by_size = {figures["elements"]: figures for figures in gpurun["sizes"]}
        for key, label in GPURUN_ROWS:
            rows.append((label, [by_size.get(n, {}).get(key, {}).get("us_per_iter") for n in sizes]))
    for label in PYTHON_ROWS:
        rows.append((label, [python[n].get(label, {}).get("us_per_iter") for n in sizes]))
    limit = copy["gb_per_s"]
    rows.append((f"copy limit, 16 B/element at {limit:.0f} GB/s",
                 [16 * n / (limit * 1e9) * 1e6 for n in sizes]))
    for label, values in rows:
        cells = "".join(f"{v:>12.2f}" if v is not None else f"{'-':>12}" for v in values)
        print(label.ljust(width) + cells)
    if gpurun:
        print(f"copy bandwidth: {limit:.0f} GB/s here, {gpurun['copy']['gb_per_s']:.0f} GB/s from gpurun")


def main():
    parser = common.parser(__doc__, "4096,65536,1048576,16777216,67108864", reps=15, seconds=0.1)
    parser.add_argument("--copy-mib", type=common.positive_int, default=1024,
                        help="the copy that measures the bandwidth, in MiB (default 1024)")
    parser.add_argument("--gpurun", help="bench/fused.lua --json output to put in the same table")
    options = parser.parse_args()
    sizes = options.sizes
    gpurun = None
    if options.gpurun:
        gpurun = common.read_json(options.gpurun, "gpurun")
        if gpurun is None:
            sys.exit(1)

    import torch
    device = torch.cuda.get_device_name()
    python = {}
    for n in sizes:
        python[n] = {}
        python[n].update(cupy_paths(n, options.seconds, options.reps))
        python[n].update(torch_paths(n, options.seconds, options.reps))
        torch.cuda.empty_cache()
    copy = copy_bandwidth(options.copy_mib, options.seconds, options.reps)
    if options.json:
        common.print_json({"device": device, "reps": options.reps, "sizes": sizes,
                           "python": {str(n): python[n] for n in sizes}, "copy": copy, "gpurun": gpurun})
    else:
        print_table(device, sizes, python, gpurun, copy, options.reps)


if __name__ == "__main__":
    main()
