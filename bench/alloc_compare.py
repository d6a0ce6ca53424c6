#!/usr/bin/env python3
"""bench/alloc_compare.py: what one device allocation and its free cost the
host in Python's GPU libraries, timed as bench/alloc_compare.lua times
gpurun's MemoryPool, for bench/alloc_compare.sh's table.
"""
import gc
import statistics
import time

import common


def pairs_for(size, pairs):
    """The same rule as bench/alloc_compare_c.c and bench/alloc_compare.lua."""
    return max(pairs // 10, 10) if size >= 64 << 20 else pairs


def measure(pair, sync, size, pairs, reps):
    """Median microseconds per pair(size): reps repetitions of pairs calls,
    after one call of warm-up, sync() after each timed loop, outside it."""
    pair(size)
    sync()
    runs = []
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(pairs):
            pair(size)
        runs.append((time.perf_counter() - start) * 1e6 / pairs)
        sync()
    return {"us_per_pair": statistics.median(runs), "min_us": min(runs), "pairs": pairs, "reps": reps}


def cuda_core_paths():
    """On one stream of device 0:
    cuda.core DeviceMemoryResource   the device's default pool: mr.allocate(n, stream=s), buffer.close(s)
    cuda.core own pool               DeviceMemoryResource(dev, DeviceMemoryResourceOptions(max_size=...))
    """
    try:
        import cuda.core as core
        if not hasattr(core, "DeviceMemoryResource"):
            import cuda.core.experimental as core
    except Exception as error:  # noqa: BLE001 - any failure is reported, not raised
        return {"cuda.core DeviceMemoryResource": error, "cuda.core own pool": error}
    try:
        device = core.Device(0)
        device.set_current()
        stream = device.create_stream()
        default = core.DeviceMemoryResource(device.device_id)
        own = core.DeviceMemoryResource(device.device_id,
                                        core.DeviceMemoryResourceOptions(max_size=1 << 31))
    except Exception as error:  # noqa: BLE001
        return {"cuda.core DeviceMemoryResource": error, "cuda.core own pool": error}

    def with_resource(resource):
        def pair(size):
            buffer = resource.allocate(size, stream=stream)
            buffer.close(stream)
        return pair

    return {
        "cuda.core DeviceMemoryResource": (with_resource(default), stream.sync),
        "cuda.core own pool": (with_resource(own), stream.sync),
    }


def cupy_paths():
    """On one non-blocking stream:
    CuPy MemoryPool        cupy.cuda.MemoryPool().malloc(n), then the pointer dropped
    CuPy MemoryAsyncPool   cupy.cuda.MemoryAsyncPool().malloc(n) (cudaMallocAsync), dropped
    """
    try:
        import cupy
        stream = cupy.cuda.Stream(non_blocking=True)
        caching = cupy.cuda.MemoryPool()
    except Exception as error:  # noqa: BLE001
        return {"CuPy MemoryPool": error, "CuPy MemoryAsyncPool": error}
    paths = {}

    def on_stream(pool):
        def pair(size):
            with stream:
                pointer = pool.malloc(size)
                del pointer
        return pair

    paths["CuPy MemoryPool"] = (on_stream(caching), stream.synchronize)
    try:
        paths["CuPy MemoryAsyncPool"] = (on_stream(cupy.cuda.MemoryAsyncPool()), stream.synchronize)
    except Exception as error:  # noqa: BLE001
        paths["CuPy MemoryAsyncPool"] = error
    return paths


def torch_paths():
    """On one stream: PyTorch caching allocator, torch.empty(n,
    dtype=torch.uint8, device="cuda"), then the tensor dropped."""
    try:
        import torch
        if not torch.cuda.is_available():
            raise RuntimeError("torch.cuda.is_available() is False")
        stream = torch.cuda.Stream()
    except Exception as error:  # noqa: BLE001
        return {"PyTorch caching allocator": error}

    def pair(size):
        with torch.cuda.stream(stream):
            tensor = torch.empty(size, dtype=torch.uint8, device="cuda")
            del tensor

    return {"PyTorch caching allocator": (pair, stream.synchronize)}


def main():
    """Every path at every size (a tenth of --pairs, at least 10, from 64
    MiB on). A library that is missing, or whose API differs, gives its rows
    as {"missing": why} instead of figures: never a crash."""
    parser = common.parser(__doc__, "4096,1048576,268435456", reps=11)
    parser.add_argument("--pairs", type=common.positive_int, default=1000,
                        help="alloc+free pairs per repetition (default 1000)")
    options = parser.parse_args()
    sizes = options.sizes
    paths = {}
    for make in (cuda_core_paths, cupy_paths, torch_paths):
        paths.update(make())
    results = {}
    for name, path in paths.items():
        if isinstance(path, BaseException):
            results[name] = {"missing": f"{type(path).__name__}: {path}"}
            continue
        pair, sync = path
        figures = {}
        try:
            for size in sizes:
                gc.collect()
                figures[str(size)] = measure(pair, sync, size, pairs_for(size, options.pairs),
                                             options.reps)
            results[name] = {"sizes": figures}
        except Exception as error:  # noqa: BLE001
            results[name] = {"missing": f"{type(error).__name__}: {error}"}
    report = {"reps": options.reps, "pairs": options.pairs, "results": results}
    if options.json:
        common.print_json(report)
        return
    for name, result in results.items():
        if "missing" in result:
            print(f"{name:32s} missing ({result['missing']})")
            continue
        cells = "".join(f"{result['sizes'][str(size)]['us_per_pair']:12.3f}" for size in sizes)
        print(f"{name:32s}{cells}")


if __name__ == "__main__":
    main()
