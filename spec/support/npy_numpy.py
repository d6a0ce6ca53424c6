#!/usr/bin/env python3
"""NumPy's side of spec/npy_spec.lua's round trip: .npy files NumPy writes
for gpurun to load, and a check of the files gpurun saved; and np.load's
verdicts for spec/npy_numpy_spec.lua.

  npy_numpy.py write|check|verdicts DIR
"""
import json
import os
import sys
import warnings

import numpy as np

DTYPES = ["float32", "float64", "int8", "uint8", "int16", "uint16",
          "int32", "uint32", "int64", "uint64", "float16"]
COUNT = 1000


def expected(dtype):
    """Values every dtype holds exactly; spec/npy_spec.lua computes the same."""
    i = np.arange(COUNT, dtype=np.int64)
    if dtype.startswith("float"):
        return (i * 0.25 - 3).astype(dtype)
    if dtype.startswith("int"):
        return (i % 100 - 50).astype(dtype)
    return (i % 100).astype(dtype)


def write(directory):
    """DIR/<dtype>.npy for every gpurun dtype (1000 values, see expected()),
    DIR/matrix.npy (3 x 4 float32, 0..11), DIR/v2.npy (format 2.0, int32),
    DIR/fortran.npy (Fortran order), DIR/big.npy (big-endian float32),
    DIR/complex.npy (complex64), DIR/text.npy (unicode strings, which gpurun
    does not read). Prints OK."""
    for dtype in DTYPES:
        np.save(os.path.join(directory, dtype + ".npy"), expected(dtype))
    np.save(os.path.join(directory, "matrix.npy"),
            np.arange(12, dtype=np.float32).reshape(3, 4))
    with open(os.path.join(directory, "v2.npy"), "wb") as f:
        np.lib.format.write_array(f, np.arange(10, dtype=np.int32), version=(2, 0))
    np.save(os.path.join(directory, "fortran.npy"),
            np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4)))
    np.save(os.path.join(directory, "big.npy"), np.arange(4, dtype=">f4"))
    np.save(os.path.join(directory, "complex.npy"),
            np.arange(4, dtype=np.complex64) * (1 - 0.5j))
    np.save(os.path.join(directory, "text.npy"), np.array(["ab", "cd"]))
    print("OK")
    return 0


def check(directory):
    """Loads DIR/from_gpurun_<dtype>.npy and DIR/from_gpurun_matrix.npy and
    compares them with the same values: prints OK and returns 0, or prints
    each difference and returns 1."""
    problems = []
    wanted = {"from_gpurun_" + d: expected(d) for d in DTYPES}
    wanted["from_gpurun_matrix"] = np.arange(12, dtype=np.float32).reshape(3, 4)
    for name, values in wanted.items():
        path = os.path.join(directory, name + ".npy")
        try:
            got = np.load(path)
            mapped = np.load(path, mmap_mode="r")  # the data offset must be right
        except Exception as error:  # report every file, not just the first
            problems.append("%s: np.load failed: %s" % (path, error))
            continue
        if got.dtype != values.dtype or got.shape != values.shape:
            problems.append("%s: dtype %s shape %s, expected %s %s"
                            % (path, got.dtype, got.shape, values.dtype, values.shape))
        elif not np.array_equal(got, values) or not np.array_equal(mapped, values):
            problems.append("%s: values differ" % path)
    for problem in problems:
        print(problem)
    if problems:
        return 1
    print("OK")
    return 0


def header_reader():
    """NumPy's own header reader: numpy.lib.format's before NumPy 2,
    numpy.lib._format_impl's since (format keeps the public names only)."""
    reader = getattr(np.lib.format, "_read_array_header", None)
    if reader is None:
        try:
            from numpy.lib import _format_impl
            reader = getattr(_format_impl, "_read_array_header", None)
        except ImportError:
            reader = None
    if reader is not None:
        return reader
    public = {(1, 0): np.lib.format.read_array_header_1_0,
              (2, 0): np.lib.format.read_array_header_2_0}

    def read(f, version):
        if version not in public:
            raise ValueError("no public NumPy reader for a version %s header" % (version,))
        return public[version](f)
    return read


def header_of(path):
    """The header's shape, fortran_order and dtype, as NumPy reads them."""
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        return header_reader()(f, version)


def verdicts(directory):
    """np.load's verdict on every DIR/*.npy, one JSON object a line: name,
    ok, and descr (dtype.str), shape, and from the header: fortran,
    header_shape and plain (a dtype with no fields or subarray) when it
    loads, else error; dimensions as strings (JSON's numbers are doubles);
    numpy_major and python ("3.12") on every line."""
    warnings.simplefilter("ignore")  # deprecated spellings still load
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".npy"):
            continue
        path = os.path.join(directory, name)
        try:
            array = np.load(path)
            header_shape, fortran, dtype = header_of(path)
            verdict = {"name": name, "ok": True, "descr": array.dtype.str,
                       "shape": [str(n) for n in array.shape],
                       "fortran": bool(fortran),
                       "header_shape": [str(n) for n in header_shape],
                       "plain": dtype.names is None and dtype.subdtype is None}
        except Exception as error:  # any refusal, whatever NumPy raised
            verdict = {"name": name, "ok": False,
                       "error": "%s: %s" % (type(error).__name__, str(error)[:200])}
        verdict["numpy_major"] = int(np.__version__.split(".")[0])
        verdict["python"] = "%d.%d" % sys.version_info[:2]
        print(json.dumps(verdict))
    return 0


def main(argv):
    modes = {"write": write, "check": check, "verdicts": verdicts}
    if len(argv) != 3 or argv[1] not in modes:
        print("usage: npy_numpy.py write|check|verdicts DIR", file=sys.stderr)
        return 2
    return modes[argv[1]](argv[2])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
