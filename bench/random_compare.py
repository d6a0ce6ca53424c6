#!/usr/bin/env python3
"""bench/random_compare.py: float32 uniform and normal draws into an
existing tensor in PyTorch (torch.rand / torch.randn with out=, each
called and captured into a CUDA graph) and CuPy (cupy.random's
Generator.random and standard_normal with out=), timed as
bench/random.lua times gpurun.device_rng, in us and GB/s written. A side
that is not installed is reported as such.
"""
import common

PATHS = ("uniform", "uniform_graph", "normal", "normal_graph")


def gb_per_s(n, figures):
    return 4 * n / (figures["us_per_iter"] * 1e-6) / 1e9


def torch_paths(n, seconds, reps):
    """torch.rand and torch.randn into one float32 tensor: called on a side
    stream, and each captured once into a torch.cuda.CUDAGraph (PyTorch's
    graph-safe Philox draws anew at each replay) whose replays are timed."""
    import torch
    figures = {}
    out = torch.empty(n, dtype=torch.float32, device="cuda")
    stream = torch.cuda.Stream()
    draws = {"uniform": lambda: torch.rand(n, out=out), "normal": lambda: torch.randn(n, out=out)}
    with torch.cuda.stream(stream):
        for name, draw in draws.items():
            figures[name] = common.measure(draw, stream.synchronize, seconds, reps)
            draw()
            stream.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=stream):
                draw()
            figures[name + "_graph"] = common.measure(graph.replay, stream.synchronize, seconds, reps)
    return figures


def cupy_paths(n, seconds, reps):
    """cupy.random.default_rng's Generator (over cuRAND, with CuPy's
    default bit generator) into one float32 array on a side stream. CuPy
    does not capture cuRAND calls into graphs, so only the calls are
    timed."""
    import cupy
    figures = {}
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        rng = cupy.random.default_rng(1234)
        out = cupy.empty(n, dtype=cupy.float32)
        draws = {"uniform": lambda: rng.random(n, dtype=cupy.float32, out=out),
                 "normal": lambda: rng.standard_normal(n, dtype=cupy.float32, out=out)}
        for name, draw in draws.items():
            figures[name] = common.measure(draw, stream.synchronize, seconds, reps)
    return figures


def side(name, paths, sizes, seconds, reps):
    """{ n: figures } for each size, or a string saying why there are none."""
    try:
        result = {}
        for n in sizes:
            result[n] = paths(n, seconds, reps)
        return result
    except ImportError as error:
        return f"not installed ({error.name})"
    except Exception as error:  # a side that fails is reported, the others still run
        return f"failed: {type(error).__name__}: {error}"


def main():
    parser = common.parser(__doc__, "1048576,16777216,67108864", 15, 0.1)
    options = parser.parse_args()
    sides = {"torch": side("torch", torch_paths, options.sizes, options.seconds, options.reps),
             "cupy": side("cupy", cupy_paths, options.sizes, options.seconds, options.reps)}
    if options.json:
        common.print_json({str(k): v if isinstance(v, str) else {str(n): f for n, f in v.items()}
                           for k, v in sides.items()})
        return 0
    print("us/iter (GB/s written), median of %d repetitions" % options.reps)
    for name, figures in sides.items():
        if isinstance(figures, str):
            print(f"{name}: {figures}")
            continue
        for path in PATHS:
            cells = []
            for n in options.sizes:
                f = figures[n].get(path)
                cells.append("%13.2f (%6.0f)" % (f["us_per_iter"], gb_per_s(n, f)) if f else "%22s" % "-")
            print("%-20s" % f"{name} {path}" + "".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
