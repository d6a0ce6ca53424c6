#!/usr/bin/env python3
"""bench/cubin_load_compare.py: cuda.core's cost of a launchable kernel for
the files bench/cubin_load.lua --save wrote, timed as gpurun's are, and one
table of both sides: compile again, a program-cache hit (FileStreamProgramCache
as cuda.core's persistentProgramCache sample uses it, else a plain cubin
load, which the table says), the saved cubin (ObjectCode.from_cubin of its
path) dropped at once or kept until its loop ends, each with get_kernel; and
the saved cubin to the end of its first launch (a 16 x 16 tile).
"""
import shutil
import statistics
import tempfile

import common


def first_launch(core, np, device, cubin_path, kernel):
    """The step that loads the cubin and launches one 16 x 16 tile of C, as
    gpurun's row does, on buffers made once."""
    stream = device.create_stream()
    tile = 16
    matrix, other, out = (device.allocate(tile * tile * 4, stream=stream) for _ in range(3))
    row = device.allocate(tile * 4, stream=stream)
    config = core.LaunchConfig(grid=1, block=(tile, tile))
    size = np.int32(tile)

    def cubin_launch():
        code = core.ObjectCode.from_cubin(cubin_path)
        core.launch(stream, config, code.get_kernel(kernel), matrix, other, row, out, size, size, size)
        stream.sync()

    return cubin_launch


def cuda_core_steps(gpurun):
    """{row key: step or the reason there is none}, and notes for the table."""
    try:
        import numpy as np
        import cuda.core as core
        if not hasattr(core, "ObjectCode"):
            import cuda.core.experimental as core
        device = core.Device(0)
        device.set_current()
    except Exception as error:  # noqa: BLE001 - any failure is reported, not raised
        reason = f"no cuda.core: {error}"
        return {key: reason for key, _ in ROWS}, [], None
    with open(gpurun["source_path"]) as file:
        source = file.read()
    cubin_path, kernel = gpurun["cubin_path"], gpurun["kernel"]
    options = core.ProgramOptions(std="c++17", arch=f"sm_{gpurun['arch']}")
    kept = []

    def compile_again():
        core.Program(source, "c++", options=options).compile("cubin").get_kernel(kernel)

    def cubin_load():
        core.ObjectCode.from_cubin(cubin_path).get_kernel(kernel)

    def cubin_kept():
        code = core.ObjectCode.from_cubin(cubin_path)
        code.get_kernel(kernel)
        kept.append(code)

    steps = {"compile": compile_again, "cubin_load": cubin_load, "cubin_kept": (cubin_kept, kept.clear)}
    try:
        steps["cubin_launch"] = first_launch(core, np, device, cubin_path, kernel)
    except Exception as error:  # noqa: BLE001 - that row says why
        steps["cubin_launch"] = f"no launch: {error}"
    notes = []
    try:
        from cuda.core.utils import FileStreamProgramCache, make_program_cache_key
    except ImportError as error:
        version = getattr(core, "__version__", "of unknown version")
        notes.append(f"cuda.core {version} has no FileStreamProgramCache ({error}): "
                     "gpurun's kernel-cache hit is compared with cuda.core's plain cubin load")
        steps["cache_hit"] = cubin_load
        return steps, notes, None
    cache_dir = tempfile.mkdtemp(prefix="cubin_load_compare.")
    cache = FileStreamProgramCache(cache_dir)

    def key():
        return make_program_cache_key(code=source, code_type="c++", options=options, target_type="cubin")

    cache[key()] = core.Program(source, "c++", options=options).compile("cubin")

    def cache_hit():
        cached = cache.get(key())
        module = core.ObjectCode.from_cubin(cached) if isinstance(cached, (bytes, bytearray)) else cached
        module.get_kernel(kernel)

    steps["cache_hit"] = cache_hit
    return steps, notes, (cache, cache_dir)


ROWS = (("compile", "compile again + get_kernel"),
        ("cache_hit", "program-cache hit + get_kernel"),
        ("cubin_load", "saved cubin + get_kernel, closed"),
        ("cubin_kept", "saved cubin + get_kernel, kept"),
        ("cubin_launch", "saved cubin + first launch"))


def measure_kept(step, let_go, args):
    """The median of args.reps loops of step, as gpurun's row is timed: what
    a loop kept is let go after it, untimed."""
    runs = []
    for _ in range(args.reps):
        runs.append(common.measure(step, lambda: None, args.seconds, 1)["us_per_iter"])
        let_go()
    return statistics.median(runs)


def main():
    parser = common.parser(__doc__, sizes=None, reps=9, seconds=0.5)
    parser.add_argument("--gpurun", required=True, help="bench/cubin_load.lua --save DIR --json output")
    args = parser.parse_args()
    gpurun = common.read_json(args.gpurun, "gpurun")
    if gpurun is None or "cubin_path" not in gpurun:
        common.note("no gpurun figures or files: run bench/cubin_load.lua --save DIR --json first")
        return 1
    steps, notes, cache = cuda_core_steps(gpurun)
    cuda_core = {}
    for key, _ in ROWS:
        step = steps[key]
        try:
            if isinstance(step, tuple):
                cuda_core[key] = measure_kept(*step, args)
            elif callable(step):
                cuda_core[key] = common.measure(step, lambda: None, args.seconds, args.reps)["us_per_iter"]
            else:
                cuda_core[key] = step
        except Exception as error:  # noqa: BLE001
            cuda_core[key] = f"failed: {error}"
    if cache is not None:
        program_cache, cache_dir = cache
        if hasattr(program_cache, "close"):
            program_cache.close()
        shutil.rmtree(cache_dir, ignore_errors=True)
    if args.json:
        common.print_json({"gpurun": gpurun, "cuda_core": cuda_core, "notes": notes})
        return 0
    print(f"A launchable kernel on {gpurun['device']}, ms per call, medians of {args.reps} loops"
          " (gpurun's and cuda.core's, each side in its own process)")
    print(f"{'path':32} {'gpurun':>10} {'cuda.core':>10} {'gpurun/cuda.core':>17}")
    for key, name in ROWS:
        ours = gpurun.get(key + "_us")
        theirs = cuda_core[key]
        ours_text = f"{ours / 1e3:10.3f}" if ours is not None else f"{'-':>10}"
        if isinstance(theirs, float):
            ratio = f"{ours / theirs:17.3f}" if ours is not None else f"{'-':>17}"
            print(f"{name:32} {ours_text} {theirs / 1e3:10.3f} {ratio}")
        else:
            print(f"{name:32} {ours_text} {'-':>10} {'-':>17}  ({theirs})")
    for why in (gpurun.get("missing") or {}).values():
        print(f"gpurun: {why}")
    hit, load, again = gpurun.get("cache_hit_us"), gpurun.get("cubin_load_us"), gpurun.get("compile_us")
    if again and load:
        print(f"gpurun: a saved cubin loads {again / load:.1f}x faster than compiling again")
    if again and hit:
        print(f"gpurun: a kernel-cache hit is {again / hit:.1f}x faster than compiling again")
    for note in notes:
        print(note)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
