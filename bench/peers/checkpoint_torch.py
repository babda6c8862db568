#!/usr/bin/python3
"""PyTorch peer of bench/checkpoint.cc (see bench/README.md).

  /usr/bin/python3 bench/peers/checkpoint_torch.py --dir=D --size_gb=2 --threads=2

Builds the same tensors as bench_checkpoint --case=recflow (same shapes, same
bytes: the dense variables, and the hash table's rows as emb/keys,
emb/values, emb/slots, emb/frequencies, emb/versions), then

  save            torch.save(dict of tensors, file) + flush + fsync of the
                  file and of the directory (recflow's Saver fsyncs too)
  restore_cold    drop the file's pages (posix_fadvise DONTNEED), torch.load
  restore_cached  torch.load again

and checks the loaded tensors against the saved ones with the same checksum
as the C++ side (sum mod 2^64 of every tensor's bytes as uint32 words).
Output lines match bench_checkpoint's.
"""

import argparse
import os
import sys
import time

import numpy as np
import torch

DIM = 16
BYTES_PER_ROW = 8 + 4 * DIM + 4 * DIM + 8 + 8
CHUNK = 1 << 22


def gen_into(seed, out, start=0):
    """out[k] = Gen(seed, start + k) for a flat float32 array, in chunks."""
    n = out.size
    for b in range(0, n, CHUNK):
        e = min(n, b + CHUNK)
        i = np.arange(start + b, start + e, dtype=np.uint64) + np.uint64(seed << 32)
        with np.errstate(over="ignore"):
            h = i * np.uint64(0x9E3779B97F4A7C15)
            h ^= h >> np.uint64(29)
            h *= np.uint64(0xBF58476D1CE4E5B9)
            h ^= h >> np.uint64(32)
        top = (h >> np.uint64(40)).astype(np.float64)
        out[b:e] = (top / 8388608.0 - 1.0).astype(np.float32)


def build(size_gb):
    size = size_gb * 1e9
    tensors = {}
    for t in range(204):
        large = t < 4
        cols = 1024 if large else 100
        rows = max(1, int((0.04 if large else 0.0002) * size / 4 / cols))
        a = np.empty(rows * cols, dtype=np.float32)
        gen_into(10 + t, a)
        name = ("dense/large_%d" if large else "dense/small_%d") % t
        tensors[name] = torch.from_numpy(a.reshape(rows, cols))
    n = max(1, int(0.8 * size / BYTES_PER_ROW))
    i = np.arange(n, dtype=np.int64)
    values = np.empty(n * DIM, dtype=np.float32)
    gen_into(1, values)
    slots = np.empty(n * DIM, dtype=np.float32)
    gen_into(2, slots)
    tensors["emb/keys"] = torch.from_numpy(3 * i + 1)
    tensors["emb/values"] = torch.from_numpy(values.reshape(n, DIM))
    tensors["emb/slots"] = torch.from_numpy(slots.reshape(n, 1, DIM))
    tensors["emb/frequencies"] = torch.from_numpy(i % 100)
    tensors["emb/versions"] = torch.from_numpy(1 + i % 10)
    return tensors, n


def word_sum(t):
    a = t.contiguous().numpy().reshape(-1).view(np.uint32)
    return int(a.sum(dtype=np.uint64))


def checksum(tensors):
    return sum(word_sum(t) for t in tensors.values()) % (1 << 64)


def nbytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors.values())


def drop_cache(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--size_gb", type=float, default=2)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    t0 = time.time()
    tensors, rows = build(args.size_gb)
    saved = checksum(tensors)
    total = nbytes(tensors)
    print("info torch=%s rows=%d dense_tensors=204 bytes=%d build_s=%.1f sync=1 "
          "cache_drop=posix_fadvise(DONTNEED)" % (torch.__version__, rows, total, time.time() - t0))
    path = os.path.join(args.dir, "model.pt")

    t0 = time.perf_counter()
    with open(path, "wb") as f:
        torch.save(tensors, f)
        f.flush()
        os.fsync(f.fileno())
    dfd = os.open(args.dir, os.O_RDONLY)
    os.fsync(dfd)
    os.close(dfd)
    print("mode=save samples_us=%.0f bytes=%d" % ((time.perf_counter() - t0) * 1e6, total),
          flush=True)
    del tensors

    sums = []
    for mode in ("restore_cold", "restore_cached"):
        if mode == "restore_cold":
            drop_cache(path)
        t0 = time.perf_counter()
        loaded = torch.load(path)
        dt = time.perf_counter() - t0
        print("mode=%s samples_us=%.0f bytes=%d" % (mode, dt * 1e6, total), flush=True)
        if len(loaded) != 209:
            sys.exit("torch.load returned %d tensors, expected 209" % len(loaded))
        sums.append(checksum(loaded))
        del loaded
    os.remove(path)
    print("checksum saved=%d restored_cold=%d restored_cached=%d" % (saved, sums[0], sums[1]))
    if sums[0] != saved or sums[1] != saved:
        sys.exit("restored values differ from the saved ones")


if __name__ == "__main__":
    main()
