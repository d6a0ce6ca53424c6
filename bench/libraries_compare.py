#!/usr/bin/env python3
"""bench/libraries_compare.py: bench/libraries.lua's library calls in CuPy
(cupy.matmul, cupyx.scipy.fftpack plans, cupyx.cusparse.spmv) and PyTorch
(torch.matmul, torch.mm, torch.fft, torch.mv of a CSR tensor), each captured
into a CUDA graph and launched; with --gpurun FILE (bench/libraries.lua
--json) and --c FILE (build/bench/libraries_c) one table of every side and
the ratios gpurun/C, gpurun/cupy, gpurun/torch.

bench/libraries_compare.sh runs every side. A path that cannot be captured
is timed called on its stream instead, marked '*'.
"""
import math

import common

CASES = ("gemm", "small_gemm", "fft", "spmv")


def case_list(text):
    """argparse type: a comma-separated list of CASES."""
    items = text.split(",")
    for item in items:
        if item not in CASES:
            raise common.argparse.ArgumentTypeError(
                f"expected a comma-separated list of {', '.join(CASES)}, got {item!r}")
    return items


def square_rows(text):
    """argparse type: a square of 9 or more, the points of a side x side grid."""
    rows = common.positive_int(text)
    side = math.isqrt(rows)
    if side * side != rows or side < 3:
        raise common.argparse.ArgumentTypeError(f"expected a square of 9 or more, got {text!r}")
    return rows


def case_keys(options):
    """[(key, what, case, parameters)] in the order bench/libraries.lua runs them."""
    keys = []
    for case in options.cases:
        if case == "gemm":
            for dtype in ("float32", "bfloat16", "float16"):
                keys.append((f"gemm_{dtype}_{options.gemm}", f"GEMM {dtype} {options.gemm}^3", case,
                             (options.gemm, dtype)))
        elif case == "small_gemm":
            n = options.small_gemm
            keys.append((f"gemm_float32_{n}", f"GEMM float32 {n}^3", case, (n, "float32")))
        elif case == "fft":
            for n in options.fft_sizes:
                for kind in ("c2c", "r2c"):
                    keys.append((f"fft_{kind}_{n}", f"FFT {kind} {n}", case, (n, kind)))
        else:
            rows = options.spmv_rows
            keys.append((f"spmv_{rows}", f"SpMV Laplacian {rows} rows", case, (rows,)))
    return keys


def laplacian(rows):
    """The 5-point Laplacian of a side x side grid in CSR (NumPy arrays:
    offsets, columns, values), each row's columns in order (up, left, self,
    right, down), as bench/libraries.lua writes it."""
    import numpy
    side = math.isqrt(rows)
    r = numpy.arange(rows, dtype=numpy.int64)
    i, j = r // side, r % side
    columns = numpy.stack([numpy.where(i > 0, r - side, -1), numpy.where(j > 0, r - 1, -1), r,
                           numpy.where(j < side - 1, r + 1, -1), numpy.where(i < side - 1, r + side, -1)], axis=1)
    values = numpy.broadcast_to(numpy.array([-1, -1, 4, -1, -1], dtype=numpy.float32), columns.shape)
    inside = columns >= 0
    offsets = numpy.zeros(rows + 1, dtype=numpy.int32)
    offsets[1:] = numpy.cumsum(inside.sum(axis=1))
    return offsets, columns[inside].astype(numpy.int32), numpy.ascontiguousarray(values[inside])


def timed(graphed, eager, what):
    """graphed() (a figure or None), else eager() marked as not in a graph."""
    figure = graphed()
    if figure is None:
        try:
            figure = dict(eager(), eager=True)
        except Exception as error:
            common.note(f"{what}: {type(error).__name__}: {error}")
    return figure


def cupy_case(case, parameters, seconds, reps, what):
    """One case in CuPy on a non-blocking stream: captured (common.cupy_graphed)
    or, where CuPy cannot capture it, called."""
    import cupy
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        if case in ("gemm", "small_gemm"):
            n, dtype = parameters
            if dtype == "bfloat16":
                common.note(f"{what}: CuPy has no bfloat16")
                return None
            rng = cupy.random.default_rng(n)
            a, b = (rng.random((n, n), dtype=cupy.float32).astype(dtype) for _ in range(2))
            out = cupy.empty((n, n), dtype=dtype)

            def step():
                cupy.matmul(a, b, out=out)
        elif case == "fft":
            import cupyx.scipy.fftpack as fftpack
            n, kind = parameters
            x = cupy.ones(n, dtype=cupy.complex64 if kind == "c2c" else cupy.float32)
            out = cupy.empty(n if kind == "c2c" else n // 2 + 1, dtype=cupy.complex64)
            plan = fftpack.get_fft_plan(x, value_type="C2C" if kind == "c2c" else "R2C")

            def step():
                plan.fft(x, out, cupy.cuda.cufft.CUFFT_FORWARD)
        else:
            import cupyx.cusparse
            import cupyx.scipy.sparse
            (rows,) = parameters
            offsets, columns, values = laplacian(rows)
            a = cupyx.scipy.sparse.csr_matrix((cupy.asarray(values), cupy.asarray(columns), cupy.asarray(offsets)),
                                              shape=(rows, rows))
            x = cupy.ones(rows, dtype=cupy.float32)
            out = cupy.empty(rows, dtype=cupy.float32)

            def step():
                cupyx.cusparse.spmv(a, x, y=out)
        return timed(lambda: common.cupy_graphed(step, stream, seconds, reps, what),
                     lambda: common.measure(step, stream.synchronize, seconds, reps), what)


def torch_case(case, parameters, seconds, reps, what):
    """One case in PyTorch: captured in a torch.cuda.CUDAGraph
    (common.torch_graphed) or, where torch refuses, called."""
    import torch
    holders = {}
    if case in ("gemm", "small_gemm"):
        n, dtype = parameters
        dtype = getattr(torch, dtype)
        generator = torch.Generator(device="cuda").manual_seed(n)
        a, b = (torch.rand((n, n), device="cuda", generator=generator).to(dtype) for _ in range(2))
        out = torch.empty((n, n), dtype=dtype, device="cuda")
        if case == "small_gemm":
            def step():
                return torch.mm(a, b, out=out)
        else:
            def step():
                return torch.matmul(a, b, out=out)
    elif case == "fft":
        n, kind = parameters
        x = torch.ones(n, dtype=torch.complex64 if kind == "c2c" else torch.float32, device="cuda")
        out = torch.empty(n if kind == "c2c" else n // 2 + 1, dtype=torch.complex64, device="cuda")
        transform = torch.fft.fft if kind == "c2c" else torch.fft.rfft

        def step():
            return transform(x, out=out)
    else:
        (rows,) = parameters
        offsets, columns, values = laplacian(rows)
        a = torch.sparse_csr_tensor(torch.from_numpy(offsets), torch.from_numpy(columns), torch.from_numpy(values),
                                    size=(rows, rows)).cuda()
        x = torch.ones(rows, dtype=torch.float32, device="cuda")

        def step():
            return torch.mv(a, x)
    return timed(lambda: common.torch_graphed(step, seconds, reps, holders, what, what),
                 lambda: common.measure(step, torch.cuda.synchronize, seconds, reps), what)


def python_sides(keys, seconds, reps):
    """{key: {"cupy": figure, "torch": figure}} and torch's name of the device;
    a module that is missing or stops is noted and its cells left out."""
    figures = {key: {} for key, _, _, _ in keys}
    device = None
    for module, run in (("cupy", cupy_case), ("torch", torch_case)):
        try:
            __import__(module)
        except Exception as error:
            common.note(f"{module} is missing ({type(error).__name__}: {error}): its cells show '-'")
            continue
        try:
            for key, what, case, parameters in keys:
                figure = run(case, parameters, seconds, reps, f"{module} {what}")
                if figure is not None:
                    figures[key][module] = figure
            if module == "torch":
                import torch
                device = torch.cuda.get_device_name()
        except Exception as error:  # no GPU for it, say
            common.note(f"{module} stopped ({type(error).__name__}: {error}): its remaining cells show '-'")
    return figures, device


def side_figure(side, key):
    if not side:
        return None
    return side.get("cases", {}).get(key)


def print_table(device, keys, gpurun, c, python, reps):
    print(f"{device}: us per graph launch, median of {reps} repetitions ('*': called, not in a graph); "
          "ratio < 1: gpurun is faster")
    columns = ("gpurun", "C", "cupy", "torch", "gpurun/C", "gpurun/cupy", "gpurun/torch")
    print("case".ljust(28) + "".join(f"{name:>13}" for name in columns))
    for key, what, _, _ in keys:
        cells = {"gpurun": side_figure(gpurun, key), "C": side_figure(c, key)}
        cells.update(python.get(key, {}))
        row = what.ljust(28)
        for name in columns[:4]:
            figure = cells.get(name)
            if figure is None:
                row += f"{'-':>13}"
            else:
                row += f"{figure['us_per_iter']:>12.2f}" + ("*" if figure.get("eager") else " ")
        ours = cells.get("gpurun")
        for name in columns[1:4]:
            theirs = cells.get(name)
            if ours is None or theirs is None:
                row += f"{'-':>13}"
            else:
                row += f"{ours['us_per_iter'] / theirs['us_per_iter']:>13.3f}"
        print(row)


def main():
    """The table, or --json."""
    parser = common.parser(__doc__, None, reps=15, seconds=0.1)
    parser.add_argument("--gemm", type=common.positive_int, default=4096, help="M = N = K of the large products")
    parser.add_argument("--small-gemm", type=common.positive_int, default=64, help="M = N = K of the small product")
    parser.add_argument("--fft-sizes", type=common.size_list, default="1048576,16777216",
                        help="comma-separated transform lengths")
    parser.add_argument("--spmv-rows", type=square_rows, default=4194304, help="rows of the 5-point Laplacian")
    parser.add_argument("--cases", type=case_list, default=",".join(CASES), help="comma-separated cases")
    parser.add_argument("--gpurun", help="bench/libraries.lua --json output")
    parser.add_argument("--c", help="build/bench/libraries_c output")
    options = parser.parse_args()
    keys = case_keys(options)
    sides = {name: path and common.read_json(path, name) for name, path in (("gpurun", options.gpurun), ("C", options.c))}
    python, device = python_sides(keys, options.seconds, options.reps)
    device = device or (sides["gpurun"] or sides["C"] or {}).get("device", "this GPU")
    if options.json:
        common.print_json({"device": device, "reps": options.reps, "keys": [key for key, _, _, _ in keys],
                           "gpurun": sides["gpurun"], "c": sides["C"], "python": python})
    else:
        print_table(device, keys, sides["gpurun"], sides["C"], python, options.reps)


if __name__ == "__main__":
    main()
