"""bench/common.py: what the Python peers of the gpurun benches share
(fused_compare.py, reduce_compare.py, alloc_compare.py, random_compare.py,
cubin_load_compare.py, sort_compare.py): their options (--sizes, --reps, --seconds,
--json), the timed loop as gpurun.bench.measure runs it, JSON in and
out, and notes on stderr. Standard library only: the scripts import
cuda.core, CuPy and PyTorch themselves, where they use them.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

PROGRAM = os.path.basename(sys.argv[0])
WARMUP = 5
MIN_ITERS, MAX_ITERS = 10, 5000  # iterations per repetition, as gpurun.bench.measure
SHORTEST_ITER = 1e-7  # seconds: the probe's per-iteration time is at least this


def peer_rows(sizes, seconds, reps, paths_by_module, device):
    """Each (module, paths) pair's rows per size, paths(n, seconds, reps) -> a
    dict of rows, and the device's name as torch gives it (else `device`).
    A module that is missing or stops is noted; its rows are left out."""
    rows = {n: {} for n in sizes}
    for module, paths in paths_by_module:
        try:
            __import__(module)
        except Exception as error:
            note(f"{module} is missing ({type(error).__name__}: {error}): its rows show '-'")
            continue
        try:
            for n in sizes:
                rows[n].update(paths(n, seconds, reps))
            if module == "torch":
                import torch
                device = torch.cuda.get_device_name()
        except Exception as error:  # no GPU for it, say
            note(f"{module} stopped ({type(error).__name__}: {error}): its remaining rows show '-'")
    return rows, device


def cupy_graphed(step, stream, seconds, reps, what):
    """Seconds per launch of step() captured on a CuPy stream into a graph
    (run once uncaptured first), timed as measure times; None, with a note
    naming `what`, where CuPy cannot capture it."""
    try:
        step()
        stream.synchronize()
        stream.begin_capture()
        step()
        graph = stream.end_capture()
        return measure(lambda: graph.launch(stream), stream.synchronize, seconds, reps)
    except Exception as error:  # a CuPy without graphs, or an op that cannot be captured
        note(f"{what}: {type(error).__name__}: {error}")
        end_capture(stream)
        return None


def end_capture(stream):
    """Ends a capture that an error left open, so that the stream can run
    the same step called instead (CuPy refuses cuBLAS and cuSPARSE calls on
    a capturing stream)."""
    try:
        if stream.is_capturing():
            stream.end_capture()
    except Exception as error:  # the capture was invalidated: ending it still ends it
        note(f"ending the abandoned capture: {type(error).__name__}: {error}")


def torch_graphed(step, seconds, reps, holders, label, what):
    """Seconds per replay of step() captured in a torch.cuda.CUDAGraph
    (warmed up on a side stream first, as torch asks; holders[label] keeps
    what the capture returned), timed as measure times; None, with a note
    naming `what`, when torch refuses."""
    import torch
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            holders[label] = step()
        return measure(graph.replay, torch.cuda.synchronize, seconds, reps)
    except Exception as error:
        note(f"{what}: {type(error).__name__}: {error}")
        return None


def note(text):
    """One line on stderr, after the script's name."""
    print(f"{PROGRAM}: {text}", file=sys.stderr)


def positive_int(text):
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def positive_float(text):
    """argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (0 < value < math.inf):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def size_list(text):
    """argparse type: "4096,65536" -> [4096, 65536], each a positive integer."""
    return [positive_int(item) for item in text.split(",")]


def parser(doc, sizes, reps, seconds=None):
    """An ArgumentParser described by the first paragraph of doc, with
    --sizes (comma-separated, default sizes; none where sizes is None),
    --reps, --seconds (where a default is given) and --json."""
    result = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    if sizes is not None:
        result.add_argument("--sizes", type=size_list, default=sizes, help=f"comma-separated sizes (default {sizes})")
    result.add_argument("--reps", type=positive_int, default=reps, help=f"repetitions (default {reps})")
    if seconds is not None:
        result.add_argument("--seconds", type=positive_float, default=seconds,
                            help=f"about how long one repetition runs (default {seconds})")
    result.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    return result


def measure(step, sync, seconds, reps):
    """Median microseconds per call of step(), timed as gpurun.bench.measure
    times: WARMUP calls and a probe of MIN_ITERS, then reps loops of as many
    calls as fill about seconds (MIN_ITERS to MAX_ITERS), each from a sync()
    to a sync()."""
    for _ in range(WARMUP):
        step()
    sync()
    start = time.perf_counter()
    for _ in range(MIN_ITERS):
        step()
    sync()
    per_iter = max((time.perf_counter() - start) / MIN_ITERS, SHORTEST_ITER)
    iters = max(MIN_ITERS, min(MAX_ITERS, math.ceil(seconds / per_iter)))
    runs = []
    for _ in range(reps):
        sync()
        start = time.perf_counter()
        for _ in range(iters):
            step()
        sync()
        runs.append((time.perf_counter() - start) * 1e6 / iters)
    return {"us_per_iter": statistics.median(runs), "min_us": min(runs), "iters": iters, "reps": reps}


def read_json(path, what):
    """The JSON object in path, or None after a note naming what is wrong."""
    try:
        with open(path) as file:
            return json.load(file)
    except (OSError, ValueError) as error:
        note(f"no {what} figures ({path}: {error})")
        return None


def print_json(value):
    """value as one line of JSON on stdout."""
    print(json.dumps(value))
