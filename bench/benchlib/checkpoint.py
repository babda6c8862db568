"""bench/run checkpoint: Saver save + restore of a dense + hash-table model,
MB/s, vs torch.save/torch.load and the disk's own rate."""

import os
import shutil
import subprocess
import time

from .common import (
    BUILD, PYTHON, PEERS, die, build, variant_envs, cpu_model, snapshot, med, in_size_gb_dir,
)


def ck_parse(text):
    res = {"info": "", "modes": {}, "checksum": None}
    for line in text.splitlines():
        if line.startswith("info "):
            res["info"] = line[5:]
        elif line.startswith("mode="):
            kv = dict(p.split("=", 1) for p in line.split())
            res["modes"][kv["mode"]] = (float(kv["samples_us"]) * 1e-6, int(kv["bytes"]))
        elif line.startswith("checksum "):
            res["checksum"] = dict(p.split("=", 1) for p in line.split()[1:])
    return res


def checkpoint(args):
    return in_size_gb_dir(args, "checkpoint", _checkpoint)


def _checkpoint(args, tmp):
    size_gb = args.size_gb
    free = shutil.disk_usage(tmp).free
    binary = build("bench_checkpoint") if not args.no_build else \
        os.path.join(BUILD, "bench", "bench_checkpoint")
    if not os.path.exists(binary):
        die("%s is missing; build it (ninja -C build bench_checkpoint)" % binary)
    peer_script = os.path.join(PEERS, "checkpoint_torch.py")
    T = args.threads
    envs, _, _ = variant_envs(T)  # no BLAS involved: one environment
    env = envs["unset"]
    binary = snapshot(binary, os.path.join(tmp, "bin"), {"unset": env})
    work = os.path.join(tmp, "work")
    os.makedirs(work)
    nbytes = int(size_gb * 1e9)

    print("== checkpoint: save + restore of a %.3g GB model (204 dense float variables, 20%%; "
          "a hash table of dim 16 + Adagrad slot, 80%%) with Saver, vs torch.save/torch.load "
          "and the disk's own rate" % size_gb)
    print("machine: %s, %d CPUs, load average %s; directory %s (%.0f GB free)" % (
        cpu_model(), os.cpu_count(), " ".join("%.2f" % x for x in os.getloadavg()), tmp,
        free / 1e9))
    print("fsync: on for every save (recflow Saver: data, index, directory; torch: file and "
          "directory; disk: file and directory). Cold reads: the files' pages are dropped "
          "with posix_fadvise(DONTNEED) after an fdatasync (no root needed; the global "
          "drop_caches is not touched); cached reads: the same read again.")
    print("direct I/O: recflow's Saver writes and reads data files with O_DIRECT (its "
          "default); torch.save/torch.load go through the page cache; the disk is measured "
          "three ways (8 MiB sequential writes/reads: buffered, direct from 4 KiB pages, "
          "direct from huge pages) and its fastest rate is the reference.")
    print("threads: %d (recflow restore_threads and table pool; torch.set_num_threads)" % T)
    print("rounds: %d, alternating recflow, torch, disk; one save + two restores per process"
          % args.rounds)
    print()
    sides = [
        ("recflow", [binary, "--case=recflow", "--dir=" + work, "--size_gb=%g" % size_gb,
                     "--threads=%d" % T]),
        ("torch", [PYTHON, peer_script, "--dir=" + work, "--size_gb=%g" % size_gb,
                   "--threads=%d" % T]),
        ("disk", [binary, "--case=disk", "--dir=" + work, "--bytes=%d" % nbytes]),
    ]
    results = {name: [] for name, _ in sides}
    ok = True
    for rnd in range(args.rounds):
        for name, cmd in sides:
            t0 = time.time()
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
            for f in os.listdir(work):
                os.remove(os.path.join(work, f))
            if r.returncode != 0:
                die("command failed (exit %d): %s\n%s%s" % (
                    r.returncode, " ".join(cmd), r.stdout[-2000:], r.stderr[-3000:]))
            res = ck_parse(r.stdout)
            res["wall_s"] = time.time() - t0
            c = res["checksum"] or {}
            res["ok"] = bool(c) and c["saved"] == c["restored_cold"] == c["restored_cached"]
            ok &= res["ok"]
            results[name].append(res)
            print("  [round %d] %-7s %s  checksum %s  (%.0f s)" % (
                rnd + 1, name, "  ".join("%s %.0f MB/s" % (m, b / t / 1e6)
                                         for m, (t, b) in res["modes"].items()),
                "OK" if res["ok"] else "FAILED", res["wall_s"]), flush=True)
    print()
    rf0, pt0 = results["recflow"][0], results["torch"][0]
    same = rf0["checksum"]["saved"] == pt0["checksum"]["saved"]
    ok &= same
    print("correctness: restored == saved on every side and round: %s; recflow and torch "
          "saved the same bytes (checksum %s vs %s): %s" % (
              "yes" if all(r["ok"] for v in results.values() for r in v) else "NO",
              rf0["checksum"]["saved"], pt0["checksum"]["saved"], "yes" if same else "NO"))
    print("recflow: %s" % rf0["info"])
    print("torch:   %s" % pt0["info"])
    if not ok:
        die("correctness checks failed; not reporting results", 4)

    def rate(name, mode):
        v = [r["modes"][mode][1] / r["modes"][mode][0] / 1e6 for r in results[name]]
        return med(v), v

    print()
    print("MB/s (1 MB = 1e6 bytes of tensor data; medians over rounds; per round in brackets):")
    rows = [("save", "save", "write"), ("restore (cold)", "restore_cold", "read_cold"),
            ("restore (cached)", "restore_cached", "read_cached")]
    table = {}
    for label, mode, disk_mode in rows:
        line = []
        for name, m in (("recflow", mode), ("torch", mode), ("disk", disk_mode)):
            table[(name, mode)] = rate(name, m)
            line.append("%s %7.0f [%s]" % (name, table[(name, mode)][0],
                                           " ".join("%.0f" % x for x in table[(name, mode)][1])))
        print("  %-17s %s" % (label, "   ".join(line)))
    print("  the disk's rate is the fastest of its ways per round (direct: O_DIRECT from a "
          "buffer the kernel may back with 2 MiB pages, as the Saver's; direct_4k: from 4 KiB "
          "pages):")
    for mode in ("write_buffered", "write_direct_4k", "write_direct", "read_cold_buffered",
                 "read_cold_direct_4k", "read_cold_direct"):
        v = [r["modes"][mode][1] / r["modes"][mode][0] / 1e6 for r in results["disk"]
             if mode in r["modes"]]
        if v:
            print("    disk %-19s %7.0f [%s]" % (mode, med(v), " ".join("%.0f" % x for x in v)))
    print()
    print("fraction of the disk's rate (target >= 0.70):")
    for label, mode, _ in rows:
        d = table[("disk", mode)][0]
        print("  %-17s recflow %.2f   torch %.2f" % (
            label, table[("recflow", mode)][0] / d, table[("torch", mode)][0] / d))
    print()
    out = []
    for metric, mode in (("save_MBps", "save"), ("restore_MBps", "restore_cold"),
                         ("restore_cached_MBps", "restore_cached")):
        rf, pt = table[("recflow", mode)][0], table[("torch", mode)][0]
        out.append("RESULT bench=checkpoint metric=%s recflow=%.0f peer=torch peer_value=%.0f "
                   "ratio=%.3f" % (metric, rf, pt, rf / pt))
    return out
