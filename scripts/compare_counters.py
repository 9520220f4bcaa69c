#!/usr/bin/env python3
"""The lab's hardware counters against Nsight Compute's, on the same binary and input.

Both sides start each kernel from the lab's L2 flush (ncu profiles `run --frames 1 --cold`,
which flushes before every launch as the lab's counters do; the flush kernels are left out by
name), and ncu flushes once more (--cache-control all). For each stage given, runs
`kernel-lab bench --stage S --counters --json` (the lab's CUPTI range profiler) and the command
`kernel-lab bench --print-ncu` prints for it (the stage's kernels picked by their NVTX range),
then compares, kernel by kernel in launch order, DRAM bytes read and written and achieved
occupancy. Library calls (CUB) are one range in the lab and several kernels in ncu: they are
left out. Exits 1 when a value differs by more than --tolerance (default 5 %) and by more than
--floor bytes (default 64 KiB, so that a few stray sectors of a kernel that stays in the L2 do
not count as a disagreement).

  compare_counters.py --lab bundle/bin/kernel-lab -- --input data/box_in_scene.png --size 1280x736
"""
import argparse
import csv
import io
import json
import re
import shlex
import subprocess
import sys


EXTRA = []  # extra ncu options (--ncu-option)
NO_KERNEL_FILTER = False  # --no-kernel-filter
BY_NAME = True  # --nvtx-only: compare with the printed (NVTX) command's own run


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stdout + p.stderr)
        raise SystemExit(f"failed ({p.returncode}): {' '.join(cmd)}")
    return p.stdout


def lab_rows(lab, stage, args):
    out = run([lab, "bench", "--stage", stage, "--counters", "--json", "--warmup", "2",
               "--reps", "10"] + args)
    rows = []
    for r in json.loads(out)["launches"]:
        if r["library"] or r["total"] or "counters" not in r:
            continue
        c = r["counters"]
        rows.append((r["kernel"], c["dram_read_bytes"], c["dram_write_bytes"],
                     c["achieved_occupancy_pct"]))
    return rows


def ncu_rows(lab, stage, args):
    line = [l for l in run([lab, "bench", "--print-ncu", "--stage", stage] + args).splitlines()
            if l.startswith("ncu ")][0]
    cmd = shlex.split(line.split("  #")[0])
    if NO_KERNEL_FILTER:  # the command's --kernel-name regex left out
        i = cmd.index("--kernel-name")
        del cmd[i:i + 2]
    for opt in EXTRA:  # --name=value replaces the command's own --name value
        name, _, value = opt.partition("=")
        if value and name in cmd[:cmd.index("--metrics")]:
            cmd[cmd.index(name) + 1] = value
        else:
            cmd[1:1] = [opt]
    cmd[1:1] = ["--csv", "--print-units", "base", "--print-kernel-base", "function"]
    first = parse(run(cmd))
    if not BY_NAME or not first:
        return first, " ".join(shlex.quote(c) for c in cmd)
    # Under --nvtx with the full metric set, ncu counted about 2.5 MB more DRAM writes for every
    # kernel larger than the L2, and the first kernel a process profiles shows the same: the
    # DRAM bytes come from a second run of the kernels the first found, by name, without --nvtx,
    # one pass (DRAM bytes only), in the second of two frames; occupancy from the first.
    names = sorted({row[0] for row in first})
    again = list(cmd)
    for opt in ("--nvtx-include", "--kernel-name", "--launch-count"):
        if opt in again:
            i = again.index(opt)
            del again[i:i + 2]
    again.remove("--nvtx")
    again[again.index("--frames") + 1] = "2"
    again[again.index("--metrics") + 1] = "dram__bytes_read.sum,dram__bytes_write.sum"
    regex = "regex:^(" + "|".join(re.escape(n) for n in names) + ")$"
    again[1:1] = ["--kernel-name", regex, "--launch-count", str(2 * len(first))]
    second = parse(run(again))[-len(first):]
    rows = [(f[0], d[1], d[2], f[3]) for f, d in zip(first, second)]
    return rows, " && ".join(" ".join(shlex.quote(c) for c in c2) for c2 in (cmd, again))


def parse(out):
    table = out[out.index('"ID"'):]
    kernels = {}
    order = []
    for rec in csv.DictReader(io.StringIO(table)):
        name = rec["Kernel Name"]
        if "cub::" in name or "thrust::" in name:
            continue  # CUB's kernels: one range of the lab's
        if "flush_kernel" in name or "discard_kernel" in name:
            continue  # run --cold's L2 flush (where --kernel-name did not leave it out)
        key = rec["ID"]
        if key not in kernels:
            kernels[key] = {"name": name}
            order.append(key)
        kernels[key][rec["Metric Name"]] = float(rec["Metric Value"].replace(",", ""))
    return [(kernels[k]["name"], kernels[k].get("dram__bytes_read.sum", float("nan")),
             kernels[k].get("dram__bytes_write.sum", float("nan")),
             kernels[k].get("sm__warps_active.avg.pct_of_peak_sustained_active", float("nan")))
            for k in order]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lab", required=True)
    ap.add_argument("--stages", default="blur,harris,nms,topk")
    ap.add_argument("--tolerance", type=float, default=0.05)
    ap.add_argument("--floor", type=float, default=65536)
    ap.add_argument("--ncu-option", action="append", default=[],
                    help="an extra ncu option, e.g. --ncu-option=--replay-mode=application")
    ap.add_argument("args", nargs="*", help="input and configuration options (after --)")
    ap.add_argument("--no-kernel-filter", action="store_true",
                    help="drop the command's --kernel-name regex (an ncu that rejects it)")
    ap.add_argument("--nvtx-only", action="store_true",
                    help="compare with the printed command's run (its --nvtx mode adds DRAM "
                         "writes) instead of a second run of the same kernels by name")
    a = ap.parse_args()
    EXTRA.extend(a.ncu_option)
    global NO_KERNEL_FILTER, BY_NAME
    NO_KERNEL_FILTER = a.no_kernel_filter
    BY_NAME = not a.nvtx_only
    bad = 0
    for stage in a.stages.split(","):
        ours = lab_rows(a.lab, stage, a.args)
        theirs, cmd = ncu_rows(a.lab, stage, a.args)
        print(f"== {stage} {' '.join(a.args)}\n   ncu: {cmd}")
        if len(ours) != len(theirs):
            print(f"   {len(ours)} kernels in the lab, {len(theirs)} in ncu: FAIL")
            bad += 1
            continue
        for (k, rd, wr, occ), (nk, nrd, nwr, nocc) in zip(ours, theirs):
            def cmp(x, y, floor):
                ok = abs(x - y) <= max(a.tolerance * abs(y), floor)
                return ok, (f"{x:.4g} vs {y:.4g} ({100 * (x / y - 1):+.1f} %)" if y else
                            f"{x:.4g} vs {y:.4g}")
            r = [cmp(rd, nrd, a.floor), cmp(wr, nwr, a.floor), cmp(occ, nocc, 0.5)]
            ok = all(x[0] for x in r)
            bad += not ok
            print(f"   {k}: DRAM read {r[0][1]}, written {r[1][1]}, achieved occupancy "
                  f"{r[2][1]}: {'ok' if ok else 'FAIL'}")
    print(f"{'all within' if not bad else str(bad) + ' outside'} {100 * a.tolerance:.0f} %")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
