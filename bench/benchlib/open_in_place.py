"""bench/run open_in_place: a 2 GB table checkpoint (the checkpoint bench's
model, saved with its hash index) opened in place (docs/embedding.md, "Open
in place") against today's restore, which reads and inserts every row.

bench_checkpoint --case=open (bench/checkpoint.cc) builds the model, saves it
with Saver (fsync on, the table's index included), then each round drops the
checkpoint's pages from the page cache before each way and measures:

- serve: the table exported as a SavedModel (`recflow export`'s writer, a
  HashEmbeddingBag signature) and served by an in-process ServerCore: the
  time from ServerCore::Create to the first answered Predict, with
  --open_tables_in_place=false (import) and true;
- import: RestoreTable (serving's way: no slots), then one lookup batch of
  4096 random keys: the time to the first answered batch; then the lookup
  rate of the imported table (kReadOnly, one thread): "full speed";
- open: RestoreTable with open_in_place: the open, the first single-id
  lookup, the first 4096-key batch, then 100 ms windows of batches until one
  runs at >= 90% of full speed (time to full speed), the end of the
  background read-and-checksum pass, and the rate once warm;
- a plain sequential read of the data file (8 MiB reads), cold;
- training: restore (slots too) + one training step (kTrain lookup of 4096
  keys + ApplyAdagrad), import against open.

The peer is today's import restore, in the same process and run. Lookups and
restores only: no BLAS-bound work is timed, so the OpenBLAS variants are not
run. The issue's targets (#27): first lookup within 1 s of the start, full
lookup speed within the time a plain read of the file takes, the training
step at once.
"""

import os
import subprocess

from .common import BUILD, build, cpu_model, die, in_size_gb_dir, med


def _parse(line):
    return {k: v for k, v in (p.split("=", 1) for p in line.split()[1:])}


def open_in_place(args):
    return in_size_gb_dir(args, "open_in_place", _open)


def _open(args, tmp):
    if not args.no_build:
        build("bench_checkpoint")
    binary = os.path.join(BUILD, "bench", "bench_checkpoint")
    if not os.path.exists(binary):
        die("%s is missing; build it (ninja -C build bench_checkpoint)" % binary)
    rounds = args.rounds if args.rounds_explicit else 3
    print("== open_in_place: a %.3g GB checkpoint (hash table dim 16 + Adagrad slot, 80%%; "
          "dense 20%%) saved with the table's hash index; the table restored by import "
          "(today) vs opened in place; page cache dropped before each way" % args.size_gb)
    print("machine: %s, %d CPUs, load average %s; directory %s" % (
        cpu_model(), os.cpu_count(), " ".join("%.2f" % x for x in os.getloadavg()), tmp))
    print("lookups: batches of 4096 random keys, serving mode, one thread; full speed = the "
          "imported table's rate; rounds: %d (one process)" % rounds)
    r = subprocess.run([binary, "--case=open", "--dir=" + tmp, "--size_gb=%g" % args.size_gb,
                        "--threads=%d" % args.threads, "--rounds=%d" % rounds],
                       capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        die("bench_checkpoint --case=open failed (exit %d):\n%s%s"
            % (r.returncode, r.stdout[-3000:], r.stderr[-3000:]))
    rows = []
    serves = []
    for line in r.stdout.splitlines():
        if line.startswith("info "):
            print("  " + line[5:])
        elif line.startswith("serve "):
            kv = _parse(line)
            serves.append(kv)
            print("  round %s: server start to first answered predict: import %.3f s, opened in "
                  "place %.3f s" % (kv["round"], float(kv["import_first_predict_s"]),
                                    float(kv["open_first_predict_s"])))
        elif line.startswith("open "):
            kv = _parse(line)
            rows.append(kv)
            print("  round %s: import+first batch %.3f s (then %.2fM rows/s) | open %.1f ms, "
                  "first id %.1f ms, first batch %.3f s, full speed at %.2f s, pass done at "
                  "%.2f s, warm %.2fM rows/s | plain read %.2f s | train step: import %.3f s, "
                  "open %.3f s" % (
                      kv["round"], float(kv["import_first_lookup_s"]),
                      float(kv["full_rate"]) / 1e6, 1e3 * float(kv["open_s"]),
                      1e3 * float(kv["open_first_id_s"]), float(kv["open_first_lookup_s"]),
                      float(kv["full_speed_s"]), float(kv["verified_s"]),
                      float(kv["open_rate_after"]) / 1e6, float(kv["plain_read_s"]),
                      float(kv["import_train_step_s"]), float(kv["open_train_step_s"])))
    if not rows:
        die("no result lines from bench_checkpoint --case=open:\n" + r.stdout[-2000:])

    def m(key):
        return med([float(kv[key]) for kv in rows])

    if any(float(kv["full_speed_s"]) < 0 for kv in rows):
        die("an opened table never reached 90% of the imported table's lookup rate")
    first_open, first_import = m("open_first_lookup_s"), m("import_first_lookup_s")
    full, read = m("full_speed_s"), m("plain_read_s")
    step_open, step_import = m("open_train_step_s"), m("import_train_step_s")
    warm, dram = m("open_rate_after"), m("full_rate")
    print("medians: first batch %.3f s vs import %.3f s; full speed at %.2f s vs a plain read "
          "of %.2f s; first training step %.3f s vs %.3f s; warm lookups %.2fM vs %.2fM rows/s"
          % (first_open, first_import, full, read, step_open, step_import, warm / 1e6,
             dram / 1e6))
    serve_open = med([float(kv["open_first_predict_s"]) for kv in serves])
    serve_import = med([float(kv["import_first_predict_s"]) for kv in serves])
    print("server start to first predict: %.3f s opened in place vs %.3f s importing"
          % (serve_open, serve_import))
    return [
        "RESULT bench=open_in_place metric=first_predict_s recflow=%.3f peer=import_restore "
        "peer_value=%.3f ratio=%.2f" % (serve_open, serve_import, serve_import / serve_open),
        "RESULT bench=open_in_place metric=first_lookup_s recflow=%.3f peer=import_restore "
        "peer_value=%.3f ratio=%.2f" % (first_open, first_import, first_import / first_open),
        "RESULT bench=open_in_place metric=full_speed_s recflow=%.2f peer=plain_read "
        "peer_value=%.2f ratio=%.2f" % (full, read, read / full),
        "RESULT bench=open_in_place metric=first_train_step_s recflow=%.3f peer=import_restore "
        "peer_value=%.3f ratio=%.2f" % (step_open, step_import, step_import / step_open),
        "RESULT bench=open_in_place metric=warm_lookup_rows_per_s recflow=%.0f "
        "peer=import_restore peer_value=%.0f ratio=%.2f" % (warm, dram, warm / dram),
    ]
