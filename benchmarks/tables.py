#!/usr/bin/env python3
"""BENCHMARKS.md's tables from one benchmarks/run.sh output folder.

Reads OUT/csv/TABLE@INPUT@SIZE.csv (bench --csv), OUT/json/frame@INPUT@SIZE@STEP.json (bench
--json) and OUT/list.json (list --json); writes OUT/results.csv (every CSV row, with the table,
input, size and commit in front), OUT/frames.csv (the whole frame per topk step) and OUT/tables.md (one table per stage and playground, then the
whole frame). A step that ran another step's code shows it in its cell ("runs v14").
Usage: tables.py OUT COMMIT
"""
import csv
import glob
import json
import os
import sys


def stage_rows(rows):
    """The row that times each (stage, variant) alone at its default block in precise math:
    its only launch, or the total of several (an empty kernel column)."""
    picked = {}
    for r in rows:
        if r["in_frame"] == "1" or r["math"] != "precise":
            continue
        key = (r["stage"], r["variant"])
        total = r["kernel"] == ""
        have = picked.get(key)
        if have is None or (total and have["kernel"] != ""):
            picked[key] = r
    return picked


def cell(r, field="median_us", fmt="{:.2f}"):
    if r is None or r.get(field, "") in ("", "-1", "nan", "inf"):
        return "not measured"
    v = fmt.format(float(r[field]))
    return v + (" (" + r["runs"] + ")" if r.get("runs") else "")


def state_line(rows):
    """The device state the table's rows ran in: the range over their starts and ends."""
    rows = [r for r in rows if r.get("state_source")]
    if not rows:
        return "device state: not recorded"
    src = rows[0]["state_source"]

    def span(a, b, unit):
        vals = [float(r[k]) for r in rows for k in (a, b) if r.get(k, "") not in ("", "-1")]
        if not vals:
            return None
        lo, hi = min(vals), max(vals)
        return ("{:.0f}".format(lo) if lo == hi else "{:.0f}–{:.0f}".format(lo, hi)) + unit

    parts = []
    sm = span("gpu_mhz_start", "gpu_mhz_end", " MHz")
    if sm:
        top = rows[0].get("gpu_max_mhz", "")
        parts.append("SM " + sm + (" of " + top + " MHz" if top not in ("", "-1") else ""))
    for a, b, name, unit in (("mem_mhz_start", "mem_mhz_end", "memory", " MHz"),
                             ("gpu_celsius_start", "gpu_celsius_end", "GPU", " °C"),
                             ("power_w_start", "power_w_end", "power", " W")):
        s = span(a, b, unit)
        if s:
            parts.append(name + " " + s)
    for k in ("pstate_start", "power_mode", "clocks"):
        if rows[0].get(k):
            parts.append(rows[0][k])
    reasons = sorted({r[k] for r in rows for k in ("throttle_start", "throttle_end") if r.get(k)})
    parts.append("throttle reasons: " + (", ".join(reasons) or "none"))
    warnings = sorted({r["state_warning"] for r in rows if r.get("state_warning")})
    line = "device state (" + src + "): " + ", ".join(parts)
    return line + ("; " + "; ".join(warnings) if warnings else "")


def main():
    out, commit = sys.argv[1], sys.argv[2]
    ops = {o["name"]: o for o in json.load(open(os.path.join(out, "list.json")))}
    tables = {}  # (table, input, size) -> rows
    header = None
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = None
        for path in sorted(glob.glob(os.path.join(out, "csv", "*.csv"))):
            table, inp, size = os.path.basename(path)[:-4].split("@")
            with open(path, newline="") as g:
                rows = list(csv.DictReader(g))
            if not rows:
                continue
            if w is None:
                header = ["table", "input", "size", "commit"] + list(rows[0].keys())
                w = csv.DictWriter(f, fieldnames=header)
                w.writeheader()
            for r in rows:
                w.writerow({"table": table, "input": inp, "size": size, "commit": commit, **r})
            tables[(table, inp, size)] = rows

    md = []
    stages = [(k, stage_rows(v), v) for k, v in sorted(tables.items()) if k[0] == "stages"]
    columns = sorted({(k[1], k[2]) for k, _, _ in stages},
                     key=lambda c: (c[0].startswith("synthetic"), c[1] != "1280x736", c))
    first = next((c for c in columns if not c[0].startswith("synthetic")), None)
    for name, op in ops.items():
        if not any(s == name for (_, _, _), p, _ in stages for (s, _) in p):
            continue
        md.append("### " + name + "\n")
        md.append("`benchmarks/run.sh` (`bench --sweep-variants --input INPUT --size WxH`), "
                  "commit `" + commit + "`, L2-warm, median µs; % of copy and the Orin estimate "
                  "at " + (first[1] + " on " + first[0] if first else "the first column") + ".\n")
        head = ["step"] + ["µs, " + i + " → " + s for i, s in columns] + \
            ["% of copy", "Orin µs~", "what moved"]
        md.append("| " + " | ".join(head) + " |")
        md.append("|" + "---|" + "---:|" * (len(head) - 2) + "---|")
        used = []
        for v in op["variants"]:
            cells = []
            at = {}
            for (t, i, s), picked, rows in stages:
                at[(i, s)] = picked.get((name, v["name"]))
            cells = [cell(at.get(c)) for c in columns]
            ref = at.get(first) if first else None
            cells += [cell(ref, "pct_copy", "{:.1f}"), cell(ref, "orin_estimate_us", "{:.1f}")]
            md.append("| " + " | ".join([v["name"]] + cells + [v["delta"]]) + " |")
            used += [r for _, p, _ in stages for (s, vv), r in p.items() if s == name and
                     vv == v["name"]]
        md.append("\n" + state_line(used) + "\n")

    for (table, inp, size), rows in sorted(tables.items()):
        if table == "stages":
            continue
        picked = stage_rows(rows)
        op = ops.get(table, {"variants": []})
        md.append("### " + table + " playground, " + size + "\n")
        md.append("`bench --lab " + table + " --size " + size + " --sweep-variants --warmup 3 "
                  "--reps 20`, commit `" + commit + "`.\n")
        md.append("| step | µs | GB/s | GFLOP/s | % of ceiling | what moved |")
        md.append("|---|---:|---:|---:|---:|---|")
        for v in op["variants"]:
            r = next((r for (s, vv), r in picked.items() if vv == v["name"]), None)
            if r is None:
                continue
            md.append("| " + " | ".join([v["name"], cell(r), cell(r, "gbs", "{:.0f}"),
                                         cell(r, "gflops", "{:.0f}"),
                                         cell(r, "pct_ceiling", "{:.1f}"), v["delta"]]) + " |")
        md.append("\n" + state_line(list(picked.values())) + "\n")

    frames = {}
    for path in sorted(glob.glob(os.path.join(out, "json", "frame@*.json"))):
        _, inp, size, step = os.path.basename(path)[:-5].split("@")
        try:
            frames[(inp, size, step)] = json.load(open(path))
        except ValueError:
            continue
    if frames:
        with open(os.path.join(out, "frames.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["input", "size", "topk_step", "commit", "mode", "median_us", "p95_us"])
            for (i, s, v), j in sorted(frames.items()):
                for mode in ("frame", "frame_stream", "frame_graph"):
                    if mode + "_median_us" in j:
                        w.writerow([i, s, v, commit, mode, j[mode + "_median_us"],
                                    j.get(mode + "_p95_us", "")])
        cols = sorted({(i, s) for i, s, _ in frames}, key=lambda c: (c[1] != "1280x736", c))
        md.append("### The whole frame per topk step\n")
        md.append("`bench --preset examples/presets/fastest.json --variant topk=STEP --reps 200`, "
                  "commit `" + commit + "`; one CUDA graph between one event pair, median µs.\n")
        md.append("| topk step | " + " | ".join(i + " → " + s for i, s in cols) + " |")
        md.append("|---|" + "---:|" * len(cols))
        for v in ops["topk"]["variants"]:
            got = [frames.get((i, s, v["name"]), {}).get("frame_graph_median_us") for i, s in cols]
            md.append("| " + v["name"] + " | " + " | ".join(
                "{:.2f}".format(x) if x is not None else "not measured" for x in got) + " |")
        st = [{k: "" if v is None else str(v) for k, v in j["frame_graph_state"].items()}
              for j in frames.values() if j.get("frame_graph_state")]
        md.append("\n" + state_line(st) + "\n")
    with open(os.path.join(out, "tables.md"), "w") as f:
        f.write("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
