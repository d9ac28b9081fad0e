"""Fixtures written by h5py and numpy (run with the venv's python) for the interop test.

  make DIR        HDF5 shards in every dtype and layout, with the values mnddp must read back;
                  bad HDF5 files; .npy/.csv/IDX/CIFAR-10 inputs for `mnddp-data convert` with
                  the checksums their samples must keep; a manifest.json describing all of it.
  checksum X Y F  count and order-free checksum of the samples in HDF5 files F (datasets X, Y).

The checksum hashes every (x row, label) pair in a canonical byte form, sorts the digests and
hashes them again: equal checksums mean the same samples, none lost or duplicated, in any order.
"""

import hashlib
import json
import os
import sys

import h5py
import numpy as np

# (name, numpy dtype) of every input dtype h5py users write; mnddp's name for each is dtype.name.
INPUT_DTYPES = [
    ("u1", "u1"), ("i1", "i1"), ("i2", "<i2"), ("i4", "<i4"), ("i8", "<i8"),
    ("f2", "<f2"), ("f4", "<f4"), ("f8", "<f8"),
    ("f4be", ">f4"), ("i4be", ">i4"), ("f8be", ">f8"), ("i2be", ">i2"),
    ("u2", "<u2"), ("u4", "<u4"), ("u8be", ">u8"),  # token ids (nanoGPT writes uint16)
]
LABEL_DTYPES = ["<i8", "<i4", "u1", ">i8", "<i2"]
# h5py create_dataset keywords of each layout.
LAYOUTS = {
    "contiguous": {},
    "chunked": {"chunks": True},
    "gzip": {"chunks": True, "compression": "gzip", "compression_opts": 6},
    "shuffle_gzip": {"chunks": True, "shuffle": True, "compression": "gzip"},
    "fletcher32": {"chunks": True, "fletcher32": True},
    "all_filters": {"chunks": True, "shuffle": True, "compression": "gzip", "fletcher32": True},
}
SAMPLE_SHAPE = (3, 4)
SHARD_SIZES = (13, 17)


def values_for(dtype, count, rng):
    """Samples spanning the dtype's range (floats kept inside float32's, so none become inf)."""
    dt = np.dtype(dtype)
    shape = (count,) + SAMPLE_SHAPE
    if dt.kind in "iu":
        info = np.iinfo(dt)
        x = rng.integers(info.min, info.max, size=shape, dtype=dt.newbyteorder("="), endpoint=True)
        x.flat[0], x.flat[1] = info.min, info.max
    else:
        x = rng.standard_normal(shape) * 1000.0
        if dt.itemsize == 2:
            x.flat[:4] = [65504.0, -65504.0, 6e-8, -0.0]  # float16 max, min, a subnormal, -0
        else:
            x.flat[:3] = [3.0e38, -1.0e-40, -0.0]  # near float32's max, a float32 subnormal, -0
    return x.astype(dt)


def canonical(x):
    """Little-endian bytes of the same dtype: the form mnddp-data writes."""
    return np.ascontiguousarray(x, dtype=x.dtype.newbyteorder("<"))


def checksum(x, y):
    x = canonical(np.asarray(x))
    y = np.asarray(y).astype("<i8")
    digests = sorted(hashlib.sha256(x[i].tobytes() + y[i].tobytes()).digest() for i in range(len(y)))
    return hashlib.sha256(b"".join(digests)).hexdigest()


def write_shard(path, x, y, layout, x_name="x", y_name="y"):
    with h5py.File(path, "w") as f:
        f.create_dataset(x_name, data=x, **LAYOUTS[layout])
        f.create_dataset(y_name, data=y, **LAYOUTS[layout])


def make_shard_cases(out, rng):
    cases = []
    for d, (name, dtype) in enumerate(INPUT_DTYPES):
        for l, layout in enumerate(LAYOUTS):
            case = f"{name}_{layout}"
            label_dtype = LABEL_DTYPES[(d + l) % len(LABEL_DTYPES)]
            files, xs, ys, ranges = [], [], [], []
            for s, count in enumerate(SHARD_SIZES):
                x = values_for(dtype, count, rng)
                y = rng.integers(0, 100, size=count).astype(label_dtype)
                path = os.path.join(out, f"{case}_{s}.h5")
                write_shard(path, x, y, layout)
                files.append(path)
                xs.append(x)
                ys.append(y)
                ranges.append([int(y.min()), int(y.max())])
            x = np.concatenate(xs)
            y = np.concatenate(ys).astype("<i8")
            stem = os.path.join(out, case)
            # What H5Reader::read must give (float32), and read_stored (own dtype, native order).
            x.astype("<f4").tofile(stem + ".x_f32")
            np.ascontiguousarray(x, dtype=x.dtype.newbyteorder("=")).tofile(stem + ".x_raw")
            y.tofile(stem + ".y_i64")
            cases.append({"name": case, "files": files, "dtype": np.dtype(dtype).name,
                          "sample_shape": list(SAMPLE_SHAPE), "num_samples": int(len(y)),
                          "label_ranges": ranges, "stem": stem})
    return cases


def make_bad_files(out, rng):
    """Each: the file, its datasets, and text the UsageError must contain besides the path."""
    bad = []
    good_x = values_for("<f4", 40, rng)
    good_y = np.arange(40, dtype="<i8") % 10

    def add(name, expect, x_name="x", y_name="y", stage="scan", num_classes=0):
        bad.append({"file": os.path.join(out, name), "x_name": x_name, "y_name": y_name, "expect": expect,
                    "stage": stage, "num_classes": num_classes})

    write_shard(os.path.join(out, "truncated.h5"), good_x, good_y, "contiguous")
    path = os.path.join(out, "truncated.h5")
    os.truncate(path, os.path.getsize(path) // 2)
    add("truncated.h5", "cannot open HDF5 file")

    write_shard(os.path.join(out, "corrupt.h5"), good_x, good_y, "gzip")
    with open(os.path.join(out, "corrupt.h5"), "r+b") as f:
        f.write(b"\xab" * 8)  # the superblock signature
    add("corrupt.h5", "cannot open HDF5 file")

    with h5py.File(os.path.join(out, "missing_y.h5"), "w") as f:
        f["x"] = good_x
    add("missing_y.h5", "dataset 'y' not found")

    write_shard(os.path.join(out, "flat_x.h5"), good_x.reshape(-1)[:40], good_y, "contiguous")
    add("flat_x.h5", "needs at least 2 dimensions")

    with h5py.File(os.path.join(out, "matrix_y.h5"), "w") as f:
        f["x"] = good_x
        f["y"] = np.zeros((40, 2), dtype="<i8")
    # Regression targets [N, 2]: inspect accepts them, classification (--num-classes) does not.
    add("matrix_y.h5", "dataset 'y' must be a 1-D", stage="labels", num_classes=10)

    with h5py.File(os.path.join(out, "empty.h5"), "w") as f:
        f.create_dataset("x", shape=(0,) + SAMPLE_SHAPE, dtype="<f4")
        f.create_dataset("y", shape=(0,), dtype="<i8")
    add("empty.h5", "0 samples (empty shard)")

    # complex64: h5py writes a compound of two floats, which no model input can be.
    write_shard(os.path.join(out, "complex.h5"), (good_x + 1j * good_x).astype("<c8"), good_y, "chunked")
    add("complex.h5", "unsupported element type compound")

    nan_x = good_x.copy()
    nan_x[7, 1, 2] = np.nan
    write_shard(os.path.join(out, "nan.h5"), nan_x, good_y, "shuffle_gzip")
    add("nan.h5", "sample 7 holds a non-finite input (nan at element 6)", stage="read")

    write_shard(os.path.join(out, "labels_12.h5"), good_x, good_y + 3, "contiguous")
    add("labels_12.h5", "has label 12, outside [0, 10) set by --num-classes 10", stage="labels", num_classes=10)
    return bad


def make_conversion_inputs(out, rng):
    """Inputs for `mnddp-data convert`, each with the checksum of the samples it holds."""
    conv = os.path.join(out, "convert")
    os.makedirs(conv)
    inputs = []
    for name, dtype, label_dtype, version in [("u1", "u1", "<i4", (1, 0)), ("f4be", ">f4", ">i8", (2, 0)),
                                              ("f2", "<f2", "u1", (3, 0)), ("i2be", ">i2", "<i2", (1, 0)),
                                              ("f8", "<f8", "<u8", (1, 0)), ("i8", "<i8", "<i8", (2, 0))]:
        x = values_for(dtype, 53, rng)
        y = rng.integers(0, 10, size=53).astype(label_dtype)
        for array, suffix in ((x, "x"), (y, "y")):
            with open(os.path.join(conv, f"{name}_{suffix}.npy"), "wb") as f:
                np.lib.format.write_array(f, array, version=version)
        inputs.append({"name": f"npy_{name}", "args": ["--x", f"{conv}/{name}_x.npy", "--y", f"{conv}/{name}_y.npy"],
                       "dtype": np.dtype(dtype).name, "count": 53, "checksum": checksum(x, y)})

    x = np.round(rng.standard_normal((31, 5)), 3).astype("<f8")
    y = rng.integers(0, 4, size=31)
    with open(os.path.join(conv, "header.csv"), "w") as f:
        f.write("a,b,label,c,d,e\n")
        for row, label in zip(x, y):
            fields = [repr(float(row[0])), repr(float(row[1])), str(label)] + [repr(float(v)) for v in row[2:]]
            f.write(",".join(fields) + "\n")
    inputs.append({"name": "csv_header", "args": ["--csv", f"{conv}/header.csv", "--label-column", "label"],
                   "dtype": "float32", "count": 31, "checksum": checksum(x.astype("<f4"), y)})
    with open(os.path.join(conv, "plain.csv"), "w") as f:
        for row, label in zip(x, y):
            f.write(", ".join(repr(float(v)) for v in row) + f", {label}\r\n")
    inputs.append({"name": "csv_plain", "args": ["--csv", f"{conv}/plain.csv"], "dtype": "float32", "count": 31,
                   "checksum": checksum(x.astype("<f4"), y)})

    images = rng.integers(0, 256, size=(29, 6, 5), dtype="u1")
    labels = rng.integers(0, 10, size=29).astype("u1")
    with open(os.path.join(conv, "images-idx3-ubyte"), "wb") as f:
        f.write(bytes([0, 0, 0x08, 3]) + np.array(images.shape, dtype=">u4").tobytes() + images.tobytes())
    with open(os.path.join(conv, "labels-idx1-ubyte"), "wb") as f:
        f.write(bytes([0, 0, 0x08, 1]) + np.array([29], dtype=">u4").tobytes() + labels.tobytes())
    inputs.append({"name": "idx", "args": ["--images", f"{conv}/images-idx3-ubyte", "--labels",
                                           f"{conv}/labels-idx1-ubyte"],
                   "dtype": "uint8", "count": 29, "checksum": checksum(images, labels)})
    floats = rng.standard_normal((29, 4, 2)).astype(">f4")
    with open(os.path.join(conv, "floats-idx3"), "wb") as f:
        f.write(bytes([0, 0, 0x0D, 3]) + np.array(floats.shape, dtype=">u4").tobytes() + floats.tobytes())
    inputs.append({"name": "idx_float", "args": ["--images", f"{conv}/floats-idx3", "--labels",
                                                 f"{conv}/labels-idx1-ubyte"],
                   "dtype": "float32", "count": 29, "checksum": checksum(floats, labels)})

    xs, ys = [], []
    for batch, count in enumerate((7, 5)):
        x = rng.integers(0, 256, size=(count, 3, 32, 32), dtype="u1")
        y = rng.integers(0, 10, size=count).astype("u1")
        with open(os.path.join(conv, f"data_batch_{batch + 1}.bin"), "wb") as f:
            for i in range(count):
                f.write(bytes([y[i]]) + x[i].tobytes())
        xs.append(x)
        ys.append(y)
    inputs.append({"name": "cifar10", "args": ["--cifar10", f"{conv}/data_batch_1.bin", f"{conv}/data_batch_2.bin"],
                   "dtype": "uint8", "count": 12, "checksum": checksum(np.concatenate(xs), np.concatenate(ys))})

    # Bad conversion inputs: each must give exit 2 and one error line naming the file.
    bad = []
    data = open(os.path.join(conv, "u1_x.npy"), "rb").read()
    open(os.path.join(conv, "cut_x.npy"), "wb").write(data[:-100])
    bad.append({"args": ["--x", f"{conv}/cut_x.npy", "--y", f"{conv}/u1_y.npy"], "file": f"{conv}/cut_x.npy",
                "expect": "truncated or corrupt"})
    np.save(os.path.join(conv, "fortran_x.npy"), np.asfortranarray(values_for("<f4", 53, rng)))
    bad.append({"args": ["--x", f"{conv}/fortran_x.npy", "--y", f"{conv}/u1_y.npy"],
                "file": f"{conv}/fortran_x.npy", "expect": "Fortran order"})
    np.save(os.path.join(conv, "short_y.npy"), np.zeros(50, dtype="<i8"))
    bad.append({"args": ["--x", f"{conv}/u1_x.npy", "--y", f"{conv}/short_y.npy"], "file": f"{conv}/short_y.npy",
                "expect": "has 50 labels but the inputs have 53 samples"})
    np.save(os.path.join(conv, "float_y.npy"), np.zeros(53, dtype="<f4"))
    bad.append({"args": ["--x", f"{conv}/u1_x.npy", "--y", f"{conv}/float_y.npy"], "file": f"{conv}/float_y.npy",
                "expect": "labels must be a 1-D integer array"})
    with open(os.path.join(conv, "bad.csv"), "w") as f:
        f.write("1,2,3\n4,five,6\n")
    bad.append({"args": ["--csv", f"{conv}/bad.csv"], "file": f"{conv}/bad.csv",
                "expect": "line 2 column 1: 'five' is not a number"})
    with open(os.path.join(conv, "ragged.csv"), "w") as f:
        f.write("1,2,3\n4,5\n")
    bad.append({"args": ["--csv", f"{conv}/ragged.csv"], "file": f"{conv}/ragged.csv",
                "expect": "line 2: 2 columns where the first line has 3"})
    with open(os.path.join(conv, "images.gz"), "wb") as f:
        f.write(b"\x1f\x8b\x08\x00rest")
    bad.append({"args": ["--images", f"{conv}/images.gz", "--labels", f"{conv}/labels-idx1-ubyte"],
                "file": f"{conv}/images.gz", "expect": "gzip-compressed"})
    data = open(os.path.join(conv, "data_batch_1.bin"), "rb").read()
    open(os.path.join(conv, "cut_batch.bin"), "wb").write(data[:-1])
    bad.append({"args": ["--cifar10", f"{conv}/cut_batch.bin"], "file": f"{conv}/cut_batch.bin",
                "expect": "not a whole number of 3073-byte CIFAR-10 records"})
    return inputs, bad


def make(out):
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20240611)
    manifest = {"cases": make_shard_cases(out, rng), "bad": make_bad_files(out, rng)}
    manifest["conversions"], manifest["bad_conversions"] = make_conversion_inputs(out, rng)
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


def checksum_files(x_name, y_name, paths):
    xs, ys = [], []
    for path in paths:
        with h5py.File(path, "r") as f:
            xs.append(f[x_name][...])
            ys.append(f[y_name][...])
    x, y = np.concatenate(xs), np.concatenate(ys)
    print(len(y), x.dtype.name, checksum(x, y))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "make":
        make(sys.argv[2])
    elif len(sys.argv) >= 5 and sys.argv[1] == "checksum":
        checksum_files(sys.argv[2], sys.argv[3], sys.argv[4:])
    else:
        sys.exit(__doc__)
