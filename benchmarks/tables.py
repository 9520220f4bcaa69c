#!/usr/bin/env python3
"""BENCHMARKS.md's tables from one benchmarks/run.sh output folder.

First gathers what run.sh wrote into OUT/results.csv: every row of OUT/csv/TABLE@INPUT@SIZE[@PART].csv
(bench --csv) with the table, input, size and commit in front, and the whole frame per topk and
detect step from OUT/json/frame@INPUT@SIZE@STAGE=STEP.json (bench --json; table "frame", the mode
in "kernel").
Then writes OUT/tables.md from results.csv and OUT/list.json (list --json), so the committed
results file alone regenerates the tables. A step that ran another step's code is marked in its
cells ("= v14") and its row says why.
Usage: tables.py OUT [COMMIT] [--keep RESULTS.csv] [--into BENCHMARKS.md]
--into replaces the document's tables between their markers (<!-- tables: stages|playgrounds|
frames|peers|scales ... --> and the end marker); each marker names the commits of its rows.
--keep: after a run of some parts (run.sh's LAB_RUN_PARTS), the committed results' rows of the
tables this run did not make join OUT/results.csv, so every table is regenerated from one file.
The scales table: letterbox's steps (OUT/csv/scales@...) and the frame beside NPP's front
(OUT/json/scale@INPUT@SIZE@npp.json, benchmarks/npp_front.sh) for each photo and plane.
"""
import csv
import glob
import json
import os
import sys

STATE = ["state_source", "gpu_mhz_start", "gpu_mhz_end", "gpu_max_mhz", "mem_mhz_start",
         "mem_mhz_end", "gpu_celsius_start", "gpu_celsius_end", "power_w_start", "power_w_end",
         "power_limit_w", "pstate_start", "pstate_end", "power_mode", "clocks", "throttle_start",
         "throttle_end", "state_warning"]


def json_files(out, kind):
    """(INPUT, SIZE, NAME) and the parsed content of each OUT/json/KIND@INPUT@SIZE@NAME.json; a
    file a timeout cut short is skipped."""
    for path in sorted(glob.glob(os.path.join(out, "json", kind + "@*.json"))):
        try:
            yield tuple(os.path.basename(path)[:-5].split("@")[1:]), json.load(open(path))
        except ValueError:
            continue


def gather(out, commit):
    rows = []
    for path in sorted(glob.glob(os.path.join(out, "csv", "*.csv"))):
        table, inp, size = os.path.basename(path)[:-4].split("@")[:3]
        with open(path, newline="") as g:
            rows += [{"table": table, "input": inp, "size": size, "commit": commit, **r}
                     for r in csv.DictReader(g)]
    for (inp, size, step), j in json_files(out, "frame"):
        for mode in ("frame", "frame_stream", "frame_graph"):
            if mode + "_median_us" in j:
                st = j.get(mode + "_state") or {}
                rows.append({"table": "frame", "input": inp, "size": size, "commit": commit,
                             "stage": "frame", "variant": step, "kernel": mode,
                             "median_us": j[mode + "_median_us"],
                             "p95_us": j.get(mode + "_p95_us", ""), "in_frame": "0",
                             **{k: "" if st.get(k) is None else st[k] for k in STATE}})
    for (inp, size, peer), j in json_files(out, "peer"):
        st = j.get("lab_state") or {}
        for kernel in ("lab_frame_graph_us", "lab_frame_stream_us", "torch_graph_us",
                       "torch_eager_us"):
            rows.append({"table": "peer", "input": inp, "size": size, "commit": commit,
                         "stage": peer, "variant": j.get("torch", ""), "kernel": kernel[:-3],
                         "median_us": j[kernel], "in_frame": "0",
                         **{k: "" if st.get(k) is None else st[k] for k in STATE}})
    for (inp, size, _), j in json_files(out, "scale"):
        st = j.get("lab_state") or {}
        for kernel in ("lab_frame_graph_us", "lab_to_keypoints_us", "npp_front_graph_us",
                       "npp_front_eager_us"):
            if j.get(kernel) is not None:
                rows.append({"table": "scale", "input": inp, "size": size, "commit": commit,
                             "stage": "frame", "variant": "{:.4f}".format(j["scale"]),
                             "kernel": kernel[:-3], "median_us": j[kernel], "in_frame": "0",
                             **{k: "" if st.get(k) is None else st[k] for k in STATE}})
    if rows:
        fields = list(rows[0])
        with open(os.path.join(out, "results.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fields, restval="")
            w.writeheader()
            w.writerows(rows)


def number(x, places=2):
    v = float(x)
    if abs(v) >= 1000:
        return "{:,.0f}".format(v)
    return ("{:.%df}" % places).format(v)


def short(step):
    return step.split("_")[0]


def stage_rows(rows):
    """Each (stage, variant)'s row alone at its default block, precise math: its only launch,
    or the total of several (an empty kernel column)."""
    picked = {}
    for r in rows:
        if r["in_frame"] == "1" or r["math"] != "precise":
            continue
        key = (r["stage"], r["variant"])
        have = picked.get(key)
        if have is None or (r["kernel"] == "" and have["kernel"] != ""):
            picked[key] = r
    return picked


def timed(r):
    if r is None or r.get("median_us", "") == "":
        return "not measured"
    return number(r["median_us"]) + (" = " + short(r["runs"].split(":")[0]) if r.get("runs")
                                     else "")


def value(r, field, places=1):
    if r is None or r.get(field, "") in ("", "-1", "nan", "inf", "0"):
        return "-"
    return number(r[field], places)


def state_line(rows):
    """The device state a table's rows ran in: the range over their starts and ends."""
    rows = [r for r in rows if r.get("state_source")]
    if not rows:
        return "State: not recorded."

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
        parts.append("SM " + sm + (" of {:.0f}".format(float(top)) if top not in ("", "-1")
                                   else ""))
    for a, b, name, unit in (("mem_mhz_start", "mem_mhz_end", "memory", " MHz"),
                             ("gpu_celsius_start", "gpu_celsius_end", "", " °C"),
                             ("power_w_start", "power_w_end", "", " W")):
        s = span(a, b, unit)
        if s:
            parts.append((name + " " if name else "") + s)
    for k in ("pstate_start", "power_mode", "clocks"):
        if rows[0].get(k):
            parts.append(rows[0][k])
    reasons = sorted({r[k] for r in rows for k in ("throttle_start", "throttle_end") if r.get(k)})
    parts.append("throttle: " + (", ".join(reasons) or "none"))
    warnings = sorted({r["state_warning"] for r in rows if r.get("state_warning")})
    return ("State (" + rows[0]["state_source"] + "): " + ", ".join(parts) +
            ("; " + "; ".join(warnings) if warnings else "") + ".")


def merge(results, keep):
    """Adds to results the rows of keep whose table results has no row of."""
    with open(results, newline="") as f:
        rows = list(csv.DictReader(f))
    made = {r["table"] for r in rows}
    with open(keep, newline="") as f:
        rows += [r for r in csv.DictReader(f) if r["table"] not in made]
    fields = []
    for r in rows:
        fields += [k for k in r if k not in fields]
    with open(results, "w", newline="") as f:
        w = csv.DictWriter(f, fields, restval="")
        w.writeheader()
        w.writerows(rows)


def main():
    args = sys.argv[1:]
    into = None
    if "--into" in args:
        k = args.index("--into")
        into = args[k + 1]
        del args[k:k + 2]
    keep = None
    if "--keep" in args:
        k = args.index("--keep")
        keep = args[k + 1]
        del args[k:k + 2]
    out = args[0]
    commit = args[1] if len(args) > 1 else ""
    gather(out, commit)
    if keep:
        merge(os.path.join(out, "results.csv"), keep)
    ops = {o["name"]: o for o in json.load(open(os.path.join(out, "list.json")))}
    tables = {}
    made = {}  # each section's commits: the runs its rows came from
    with open(os.path.join(out, "results.csv"), newline="") as f:
        for r in csv.DictReader(f):
            tables.setdefault((r["table"], r["input"], r["size"]), []).append(r)
            made.setdefault(SECTION.get(r["table"], "playgrounds"), set()).add(r["commit"] or commit)

    sections = {}
    md = sections.setdefault("stages", [])
    stages = {k: stage_rows(v) for k, v in tables.items() if k[0] == "stages"}
    cols = sorted({(k[1], k[2]) for k in stages},
                  key=lambda c: (c[0].startswith("synthetic"), c[1] != "1280x736", c))
    first = cols[0] if cols else None
    heads = [("synthetic " if i.startswith("synthetic") else i.split(".")[0] + " ") +
             ("4K" if s == "3840x2160" else s) for i, s in cols]
    for name, op in ops.items():
        got = {v["name"]: {c: stages[("stages",) + c].get((name, v["name"])) for c in cols}
               for v in op["variants"]}
        if not any(r for by in got.values() for r in by.values()):
            continue
        md += ["### " + name,
               "| step | " + " | ".join("µs " + h for h in heads) +
               " | % of copy | Orin µs~ | what moved |",
               "|---|" + "---:|" * (len(cols) + 2) + "---|"]
        used = []
        for v in op["variants"]:
            by = got[v["name"]]
            ref = by.get(first)
            why = sorted({r["runs"] for r in by.values() if r and r.get("runs")})
            delta = v["delta"] + "".join(" (= " + short(w.split(":")[0]) + w[w.find(":"):] + ")"
                                         for w in why)
            md.append("| " + " | ".join([v["name"]] + [timed(by.get(c)) for c in cols] +
                                        [value(ref, "pct_copy"),
                                         value(ref, "orin_estimate_us"), delta]) + " |")
            used += [r for r in by.values() if r]
        md += ["", state_line(used)]

    md = sections.setdefault("playgrounds", [])
    for (table, inp, size), rows in sorted(tables.items()):
        if table in ("stages", "frame", "peer", "scale", "scales"):
            continue
        picked = stage_rows(rows)
        md += ["### " + table + ", " + size,
               "| step | µs | GB/s | GFLOP/s | % of ceiling | what moved |",
               "|---|---:|---:|---:|---:|---|"]
        for v in ops.get(table, {"variants": []})["variants"]:
            r = next((r for (s, vv), r in picked.items() if vv == v["name"]), None)
            if r is None:
                continue
            ceil = value(r, "pct_ceiling") if value(r, "pct_ceiling") != "-" else \
                value(r, "pct_copy") + " (of copy)" if value(r, "pct_copy") != "-" else "-"
            md.append("| " + " | ".join([v["name"], timed(r), value(r, "gbs", 0),
                                         value(r, "gflops", 0), ceil, v["delta"]]) + " |")
        md += ["", state_line(list(picked.values()))]

    md = sections.setdefault("frames", [])
    rows = [r for k, v in tables.items() if k[0] == "frame" for r in v
            if r["kernel"] == "frame_graph"]
    if rows:
        fcols = sorted({(r["input"], r["size"]) for r in rows},
                       key=lambda c: (c[1] != "1280x736", c))
        at = {(r["input"], r["size"], r["variant"]): r for r in rows}
        md += ["| step | " + " | ".join("µs " + i.split(".")[0] + " " +
                                       ("4K" if s == "3840x2160" else s)
                                       for i, s in fcols) + " |",
               "|---|" + "---:|" * len(fcols)]
        for op in ("topk", "detect"):
            for v in ops[op]["variants"]:
                step = op + "=" + v["name"]
                md.append("| " + op + " " + v["name"] + " | " + " | ".join(
                    number(at[(i, s, step)]["median_us"]) if (i, s, step) in at
                    else "not measured" for i, s in fcols) + " |")
        md += ["", state_line(rows)]
    md = sections.setdefault("peers", [])
    peer = {(r["input"], r["size"], r["kernel"]): r for k, v in tables.items() if k[0] == "peer"
            for r in v}
    if peer:
        md += ["| input → plane | the lab, a graph (µs) | stage by stage | PyTorch graph | ratio | "
               "PyTorch eager |", "|---|---:|---:|---:|---:|---:|"]
        for i, s in sorted({(k[0], k[1]) for k in peer}, key=lambda c: (c[1] != "1280x736", c)):
            us = {m: float(peer[(i, s, m)]["median_us"]) for m in
                  ("lab_frame_graph", "lab_frame_stream", "torch_graph", "torch_eager")
                  if (i, s, m) in peer}
            if len(us) < 4:
                continue
            md.append("| " + i + " → " + s + " | " + " | ".join(
                [number(us["lab_frame_graph"]), number(us["lab_frame_stream"]),
                 number(us["torch_graph"]),
                 "{:.1f}x".format(us["torch_graph"] / us["lab_frame_graph"]),
                 number(us["torch_eager"])]) + " |")
        md += ["", state_line([r for r in peer.values() if r["kernel"] == "lab_frame_graph"])]
    md = sections.setdefault("scales", [])
    frame = {(r["input"], r["size"], r["kernel"]): r for k, v in tables.items()
             if k[0] == "scale" for r in v}
    lb = {k[1:]: stage_rows(v) for k, v in tables.items() if k[0] == "scales"}
    if frame or lb:
        md += ["| input → plane | scale | letterbox v6 µs | v6 % of a copy of its bytes | "
               "the frame, a graph (µs) | NPP's front, a graph (µs) |",
               "|---|---:|---:|---:|---:|---:|"]
        for i, s in sorted(set(lb) | {(k[0], k[1]) for k in frame},
                           key=lambda c: (c[1] != "1280x736", c)):
            by = lb.get((i, s), {})
            six = by.get(("letterbox", "v6_reuse_by_scale"))
            f = frame.get((i, s, "lab_frame_graph"))
            n = frame.get((i, s, "npp_front_graph"))
            scale = float(f["variant"]) if f else None
            how = "-" if scale is None else "1 (identity)" if abs(scale - 1) < 1e-9 else \
                "{:.2f}x {}".format(scale if scale > 1 else 1 / scale,
                                    "up" if scale > 1 else "down")
            md.append("| " + " | ".join([i + " → " + ("4K" if s == "3840x2160" else s), how,
                                         timed(six), value(six, "pct_copy_same_size"),
                                         number(f["median_us"]) if f else "-",
                                         number(n["median_us"]) if n else "not measured"]) + " |")
        md += ["", state_line([r for r in frame.values() if r["kernel"] == "lab_frame_graph"])]
    sections = {k: v for k, v in sections.items() if v}  # a run of some parts: only theirs
    runs = {k: ", ".join(sorted(made.get(k, {commit}))) for k in sections}
    with open(os.path.join(out, "tables.md"), "w") as f:
        for name, lines in sections.items():
            f.write(begin(name, runs[name]) + "\n" + "\n".join(lines) + "\n" + END + "\n\n")
    if into:  # replace each section between its markers in the document
        text = open(into).read()
        for name, lines in sections.items():
            a = text.find(begin(name, "").split(" (")[0])
            b = text.find(END, a)
            if a < 0 or b < 0:  # a part's first run: its section is placed by hand
                print("tables.py: " + into + " has no '" + name + "' markers: its tables are in " +
                      os.path.join(out, "tables.md"), file=sys.stderr)
                continue
            text = text[:a] + begin(name, runs[name]) + "\n" + "\n".join(lines) + "\n" + text[b:]
        open(into, "w").write(text)


END = "<!-- end of generated tables -->"
SECTION = {"stages": "stages", "frame": "frames", "peer": "peers", "scale": "scales",
           "scales": "scales"}  # a results table's section; the others are playgrounds


def begin(name, commit):
    return ("<!-- tables: " + name + " (benchmarks/tables.py, results of " + commit +
            "; edit the script, not the tables) -->")


if __name__ == "__main__":
    main()
