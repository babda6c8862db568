"""Shared helpers of bench/run: paths, environment checks and variants, building,
snapshots of the binaries, running one side, statistics and checks.

Module-level constants (REPO, BUILD, PYTHON, PEERS, VARIANT_VARS) are defined
here once; the benchmark modules import them from here."""

import os
import platform
import shutil
import statistics
import subprocess
import sys
import time


# This file is bench/benchlib/common.py: three levels below the repository.
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("RECFLOW_BENCH_BUILD") or os.path.join(REPO, "build")  # override: a private build dir
PYTHON = "/usr/bin/python3"  # Debian's interpreter, where python3-torch lives
PEERS = os.path.join(REPO, "bench", "peers")
VARIANT_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def die(msg, code=1):
    print("bench/run: " + msg, file=sys.stderr)
    sys.exit(code)


# --- environment ---------------------------------------------------------------

def check_torch():
    r = subprocess.run([PYTHON, "-c", "import torch, numpy"], capture_output=True, text=True)
    if r.returncode != 0:
        die("PyTorch is not importable by %s:\n%s\n"
            "Install Debian's build with:  apt-get install python3-torch python3-numpy"
            % (PYTHON, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "?"), 3)


def build(target):
    if not os.path.exists(os.path.join(BUILD, "build.ninja")):
        r = subprocess.run(["cmake", "-G", "Ninja", "-S", REPO, "-B", BUILD,
                            "-DCMAKE_BUILD_TYPE=Release"], capture_output=True, text=True)
        if r.returncode != 0:
            die("cmake configure failed:\n" + r.stdout[-3000:] + r.stderr[-3000:])
    # Others may be editing sources while this runs; a broken build is retried.
    for attempt in range(3):
        r = subprocess.run(["ninja", "-j2", "-C", BUILD, target], capture_output=True, text=True)
        if r.returncode == 0:
            return os.path.join(BUILD, "bench", target)
        if attempt < 2:
            print("build of %s failed; retrying in 20 s" % target, file=sys.stderr)
            time.sleep(20)
    die("build of %s failed:\n%s" % (target, (r.stdout + r.stderr)[-4000:]))


def try_build(target):
    """Like build(), but returns False instead of dying (for optional targets)."""
    if not os.path.exists(os.path.join(BUILD, "build.ninja")):
        return False
    r = subprocess.run(["ninja", "-j2", "-C", BUILD, target], capture_output=True, text=True)
    return r.returncode == 0


def machine_l2_bytes():
    """Per-core L2 size in bytes from sysfs (e.g. 2048K -> 2097152)."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for idx in sorted(os.listdir(base)):
            d = os.path.join(base, idx)
            if not idx.startswith("index"):
                continue
            with open(os.path.join(d, "level")) as f:
                if f.read().strip() != "2":
                    continue
            with open(os.path.join(d, "size")) as f:
                s = f.read().strip()
            mult = {"K": 1024, "M": 1024 * 1024}.get(s[-1], 1)
            return str(int(s.rstrip("KM")) * mult)
    except (OSError, ValueError):
        pass
    return "262144"


def variant_envs(threads):
    """{"set": env, "unset": env} and a description of the "set" values."""
    base = dict(os.environ)
    set_values = {
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE") or "Haswell",
        "OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE") or machine_l2_bytes(),
    }
    for v in VARIANT_VARS:
        base.pop(v, None)
    # Same thread count on both sides (recflow pins OpenBLAS to 1 thread
    # itself and splits work over its own intra-op pool of T threads).
    base["OMP_NUM_THREADS"] = str(threads)
    base["OPENBLAS_NUM_THREADS"] = str(threads)
    env_set = dict(base)
    env_set.update(set_values)
    origin = {v: ("from environment" if os.environ.get(v) else "default") for v in VARIANT_VARS}
    return {"set": env_set, "unset": base}, set_values, origin


def blas_alternative():
    try:
        r = subprocess.run(["update-alternatives", "--display", "libblas.so.3-x86_64-linux-gnu"],
                           capture_output=True, text=True)
        for line in r.stdout.splitlines():
            if "currently points to" in line:
                return line.split("points to", 1)[1].strip()
    except OSError:
        pass
    return "?"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def snapshot(binary, dest, envs):
    """Copies `binary` and build/lib/librecflow_*.so into `dest`; points each
    env's LD_LIBRARY_PATH there. Returns the copied binary's path."""
    os.makedirs(dest)
    libdir = os.path.join(BUILD, "lib")
    for name in os.listdir(libdir):
        if name.startswith("librecflow_") and ".so" in name:
            shutil.copy2(os.path.join(libdir, name), dest)
    copy = os.path.join(dest, os.path.basename(binary))
    shutil.copy2(binary, copy)
    for env in envs.values():
        old = env.get("LD_LIBRARY_PATH")
        env["LD_LIBRARY_PATH"] = dest + (":" + old if old else "")
    return copy


# --- running one side ----------------------------------------------------------

def parse_output(text):
    res = {"info": "", "output": None, "checksum": None, "abs_checksum": None, "modes": {}}
    for line in text.splitlines():
        if line.startswith("info "):
            res["info"] = line[5:]
        elif line.startswith("output="):
            res["output"] = [float(v) for v in line[7:].split(",")]
        elif line.startswith("mode="):
            kv = dict(p.split("=", 1) for p in line.split())
            res["modes"][kv["mode"]] = [float(v) for v in kv["samples_us"].split(",")]
        elif line.startswith("zero_copy "):
            res["zero_copy"] = line[len("zero_copy "):]
        elif "checksum=" in line:
            kv = dict(p.split("=", 1) for p in line.split())
            res["checksum"] = float(kv["checksum"])
            res["abs_checksum"] = float(kv["abs_checksum"])
    return res


def info_field(info, key):
    for p in info.split():
        if p.startswith(key + "="):
            return p.split("=", 1)[1].strip('"')
    return "?"


def run_side(cmd, env, timeout=300):
    t0 = time.time()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        die("command failed (exit %d): %s\n%s%s" % (r.returncode, " ".join(cmd),
                                                     r.stdout[-2000:], r.stderr[-3000:]))
    res = parse_output(r.stdout)
    res["wall_s"] = time.time() - t0
    if not res["modes"]:
        die("no timing lines from: %s\n%s" % (" ".join(cmd), r.stdout[-2000:]))
    return res


# --- statistics and checks -----------------------------------------------------

def med(v):
    return statistics.median(v)


def check_close(name, got, ref, rtol=1e-3):
    """Max abs diff of got vs ref (numpy arrays) within rtol * max|ref|."""
    import numpy as np
    if got.shape != ref.shape:
        die("%s: shape %s, expected %s" % (name, got.shape, ref.shape))
    diff = float(np.max(np.abs(got.astype(np.float64) - ref)))
    scale = float(np.max(np.abs(ref)))
    ok = diff <= rtol * scale
    print("  check %-38s max_abs_diff=%.3g (tolerance %.3g = %g * max|ref| %.4g)  %s"
          % (name, diff, rtol * scale, rtol, scale, "OK" if ok else "FAILED"))
    return ok


def in_size_gb_dir(args, name, run):
    """Runs run(args, tmp) in a fresh directory under --dir (or the system's
    temporary directory) that has room for 3x --size_gb, and removes it
    afterwards; `name` names the benchmark in messages and the directory."""
    import tempfile
    base = args.dir or tempfile.gettempdir()
    if not os.path.isdir(base):
        die("--dir %s is not a directory" % base, 2)
    tmp = tempfile.mkdtemp(prefix="bench_%s." % name, dir=base)
    try:
        need = 3 * args.size_gb * 1e9
        free = shutil.disk_usage(tmp).free
        if free < need:
            die("%s has %.1f GB free; the %s bench needs %.1f GB (3x --size_gb=%g)"
                % (tmp, free / 1e9, name, need / 1e9, args.size_gb))
        return run(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
