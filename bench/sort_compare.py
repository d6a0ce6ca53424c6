#!/usr/bin/env python3
"""bench/sort_compare.py: cupy.sort and torch.sort of uint32 keys (int32 in
torch, which has no uint32 sort on every version), the float32 key-value
sort (cupy.argsort then a gather; torch.sort's values and indices) and
cupy.searchsorted / torch.searchsorted, each captured into a CUDA graph and
the graph launched, timed as bench/sort.lua times gpurun; with --gpurun
FILE (bench/sort.lua --json) one table of every side.

Each sort path copies its input from a kept source first, as bench/sort.lua
does, so that every launch sorts the same random keys.
"""
import common

PATHS = ["copy", "keys", "pairs", "search"]


def cupy_paths(n, seconds, reps):
    """The four paths in CuPy at n elements, each captured into a graph and
    its replays timed by common.measure."""
    import cupy
    figures = {}
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        rng = cupy.random.default_rng(n)
        source = rng.integers(0, 1 << 30, n, dtype=cupy.uint32)
        float_source = rng.random(n, dtype=cupy.float32)
        keys = cupy.empty(n, dtype=cupy.uint32)
        float_keys = cupy.empty(n, dtype=cupy.float32)
        values = cupy.arange(n, dtype=cupy.int32)
        sorted_keys = cupy.sort(source)
        positions = cupy.empty(n, dtype=cupy.int64)

        def copy():
            cupy.copyto(keys, source)

        def keys_sort():
            cupy.copyto(keys, source)
            keys.sort()

        def pairs():
            cupy.copyto(float_keys, float_source)
            order = cupy.argsort(float_keys)
            return float_keys[order], values[order]

        def search():
            positions[...] = cupy.searchsorted(sorted_keys, source)

        for label, step in (("copy", copy), ("keys", keys_sort), ("pairs", pairs), ("search", search)):
            figure = common.cupy_graphed(step, stream, seconds, reps, f"cupy {label} at {n} elements")
            if figure is not None:
                figures[f"cupy {label}"] = figure
    return figures


def torch_paths(n, seconds, reps):
    """The four paths in PyTorch, eager calls captured in a
    torch.cuda.CUDAGraph, timed as cupy_paths times."""
    import torch
    generator = torch.Generator(device="cuda").manual_seed(n)
    source = torch.randint(0, 1 << 30, (n,), dtype=torch.int32, device="cuda", generator=generator)
    float_source = torch.rand(n, dtype=torch.float32, device="cuda", generator=generator)
    keys = torch.empty_like(source)
    float_keys = torch.empty_like(float_source)
    sorted_keys = torch.sort(source).values
    figures = {}
    holders = {}

    def graphed(label, step):
        figure = common.torch_graphed(step, seconds, reps, holders, label, f"torch {label} at {n} elements")
        if figure is not None:
            figures[f"torch {label}"] = figure

    def keys_sort():
        keys.copy_(source)
        return torch.sort(keys, stable=True)

    def pairs():
        float_keys.copy_(float_source)
        return torch.sort(float_keys, stable=True)  # values and the indices that carry

    graphed("copy", lambda: keys.copy_(source))
    graphed("keys", keys_sort)
    graphed("pairs", pairs)
    graphed("search", lambda: torch.searchsorted(sorted_keys, source))
    return figures


def figure(side, key, n, gpurun, python):
    if side == "gpurun":
        if not gpurun:
            return None
        for sizes in gpurun["sizes"]:
            if sizes["elements"] == n:
                return sizes.get(key, {}).get("us_per_iter")
        return None
    return python.get(n, {}).get(f"{side} {key}", {}).get("us_per_iter")


def print_table(device, sizes, gpurun, python, reps):
    width = 20
    print(f"{device}: us per graph launch (millions of keys per second), median of {reps} repetitions")
    print("path".ljust(width) + "".join(f"{n:>22}" for n in sizes))
    for key in PATHS:
        for side in ("gpurun", "cupy", "torch"):
            cells = []
            for n in sizes:
                us = figure(side, key, n, gpurun, python)
                cells.append(f"{'-':>22}" if us is None else f"{us:>12.2f} ({n / us:>7.0f})")
            print(f"{side} {key}".ljust(width) + "".join(cells))
    print("keys and pairs include the copy of their input (the copy rows)")


def main():
    """The table, or --json. A module that is missing (cupy, torch) is
    reported and its rows show '-'."""
    parser = common.parser(__doc__, "4096,65536,1048576,16777216", reps=15, seconds=0.1)
    parser.add_argument("--gpurun", help="bench/sort.lua --json output")
    options = parser.parse_args()
    sizes = options.sizes
    gpurun = options.gpurun and common.read_json(options.gpurun, "gpurun")
    device = (gpurun or {}).get("device", "this GPU")
    python, device = common.peer_rows(sizes, options.seconds, options.reps,
                                      (("cupy", cupy_paths), ("torch", torch_paths)), device)
    if options.json:
        common.print_json({"device": device, "reps": options.reps, "sizes": sizes, "gpurun": gpurun,
                           "python": {str(n): python[n] for n in sizes}})
    else:
        print_table(device, sizes, gpurun, python, options.reps)


if __name__ == "__main__":
    main()
