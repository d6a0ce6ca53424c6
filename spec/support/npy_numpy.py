#!/usr/bin/env python3
"""NumPy's side of spec/npy_spec.lua's round trip: .npy files NumPy writes
for gpurun to load, and a check of the files gpurun saved.

  npy_numpy.py write DIR   DIR/<dtype>.npy for every gpurun dtype (1000
                           values, see expected()), DIR/matrix.npy (3 x 4
                           float32, 0..11), DIR/v2.npy (format 2.0, int32),
                           DIR/fortran.npy (Fortran order), DIR/big.npy
                           (big-endian float32), DIR/complex.npy (complex64,
                           which gpurun does not read)
  npy_numpy.py check DIR   loads DIR/from_gpurun_<dtype>.npy and
                           DIR/from_gpurun_matrix.npy and compares them
                           with the same values

Prints OK and exits 0, or prints each difference and exits 1.
"""
import os
import sys

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
    for dtype in DTYPES:
        np.save(os.path.join(directory, dtype + ".npy"), expected(dtype))
    np.save(os.path.join(directory, "matrix.npy"),
            np.arange(12, dtype=np.float32).reshape(3, 4))
    with open(os.path.join(directory, "v2.npy"), "wb") as f:
        np.lib.format.write_array(f, np.arange(10, dtype=np.int32), version=(2, 0))
    np.save(os.path.join(directory, "fortran.npy"),
            np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4)))
    np.save(os.path.join(directory, "big.npy"), np.arange(4, dtype=">f4"))
    np.save(os.path.join(directory, "complex.npy"), np.arange(4, dtype=np.complex64))
    print("OK")
    return 0


def check(directory):
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


def main(argv):
    if len(argv) != 3 or argv[1] not in ("write", "check"):
        print("usage: npy_numpy.py write|check DIR", file=sys.stderr)
        return 2
    return write(argv[2]) if argv[1] == "write" else check(argv[2])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
