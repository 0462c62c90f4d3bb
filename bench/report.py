#!/usr/bin/env python3
"""Markdown report and PNG plots from `quanta bench --json` output.

    python3 bench/report.py ROWS.jsonl OUT_DIR [--title TEXT] [--command TEXT]

Writes OUT_DIR/report.md and OUT_DIR/*.png: for each (op, layout, dtype, shape) swept over M,
the effective GB/s of every kernel and format against M with the measured read roof and the
dense baseline, and the time per call against M; for dequantize, GB/s per format. `quanta
bench --report DIR` runs this script on the rows it just wrote.
"""

import argparse
import json
import math
import os
import re
import sys
from collections import OrderedDict, defaultdict

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402


def load(path):
    header, rows = None, []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            obj = json.loads(line)
            if obj.get("type") == "header":
                header = obj
            else:
                rows.append(obj)
    if header is None:
        sys.exit(f"report.py: {path} has no header object")
    return header, rows


def num(v, fmt="{:.2f}"):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return fmt.format(v)


def slug(text):
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")


def group_rows(rows):
    """(op, layout, dtype, shape) -> rows, in first-seen order."""
    groups = OrderedDict()
    for r in rows:
        key = (r["op"], r["layout"], r["dtype"], r["shape"])
        groups.setdefault(key, []).append(r)
    return groups


def series(rows, y):
    """label -> sorted [(M, value)] for rows that were timed."""
    out = defaultdict(list)
    for r in rows:
        v = r.get(y)
        if v is None:
            continue
        label = r["format"] if r["requested"] == "auto" else f'{r["kernel"]} {r["format"]}'
        out[label].append((r["M"], v))
    return {k: sorted(v) for k, v in sorted(out.items())}


def baseline_series(rows, y):
    seen = {}
    for r in rows:
        if r.get(y) is not None:
            seen[r["M"]] = r[y]
    return sorted(seen.items())


def title_of(key, rows):
    op, layout, dtype, shape = key
    r = rows[0]
    experts = f', {r["experts"]} experts' if r["experts"] > 1 else ""
    return f'{op} ({layout}) {dtype}: {shape} N={r["N"]} K={r["K"]}{experts}'


def plot_sweep(key, rows, header, out_dir):
    """Two PNGs for an M sweep: GB/s vs M (roof, baseline) and time vs M."""
    made = []
    roof = (header.get("roof") or {}).get("read_gbps")
    base_name = next((r["baseline"] for r in rows if r.get("baseline")), "baseline")
    stem = slug("_".join(key))

    fig, ax = plt.subplots(figsize=(8, 5))
    for label, pts in series(rows, "gbps").items():
        ax.plot([m for m, _ in pts], [v for _, v in pts], marker="o", ms=3, lw=1.2, label=label)
    base = baseline_series(rows, "baseline_gbps")
    if base:
        ax.plot([m for m, _ in base], [v for _, v in base], color="black", ls="--", lw=1.5,
                label=f"{base_name} (dense)")
    if roof:
        ax.axhline(roof, color="red", lw=1.5, label=f"measured read roof {roof:.0f} GB/s")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("M (rows of x)")
    ax.set_ylabel("effective GB/s (weights + scales + x + y)")
    ax.set_title(title_of(key, rows), fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    name = f"gbps_{stem}.png"
    fig.savefig(os.path.join(out_dir, name), dpi=110)
    plt.close(fig)
    made.append(name)

    fig, ax = plt.subplots(figsize=(8, 5))
    for label, pts in series(rows, "median_us").items():
        ax.plot([m for m, _ in pts], [v for _, v in pts], marker="o", ms=3, lw=1.2, label=label)
    base = baseline_series(rows, "baseline_us")
    if base:
        ax.plot([m for m, _ in base], [v for _, v in base], color="black", ls="--", lw=1.5,
                label=f"{base_name} (dense)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("M (rows of x)")
    ax.set_ylabel("median time per call (us)")
    ax.set_title(title_of(key, rows), fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    name = f"time_{stem}.png"
    fig.savefig(os.path.join(out_dir, name), dpi=110)
    plt.close(fig)
    made.append(name)
    return made


def plot_bars(key, rows, header, out_dir):
    """One PNG for a single-M group (dequantize): GB/s per kernel and format."""
    timed = [r for r in rows if r.get("gbps") is not None]
    if not timed:
        return []
    labels = [f'{r["kernel"]}\n{r["format"]}' for r in timed]
    fig, ax = plt.subplots(figsize=(max(6, 0.7 * len(timed) + 2), 5))
    ax.bar(range(len(timed)), [r["gbps"] for r in timed], color="tab:blue", label="kernel")
    base = [r.get("baseline_gbps") for r in timed]
    if any(b is not None for b in base):
        ax.scatter(range(len(timed)), [b if b is not None else float("nan") for b in base],
                   color="black", marker="_", s=300, label=timed[0].get("baseline", "baseline"))
    roof = (header.get("roof") or {}).get("read_gbps")
    if roof:
        ax.axhline(roof, color="red", lw=1.5, label=f"measured read roof {roof:.0f} GB/s")
    ax.set_xticks(range(len(timed)))
    ax.set_xticklabels(labels, fontsize=6, rotation=60, ha="right")
    ax.set_ylabel("effective GB/s (packed weights + dense output)")
    ax.set_title(title_of(key, rows), fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    name = f"gbps_{slug('_'.join(key))}.png"
    fig.savefig(os.path.join(out_dir, name), dpi=110)
    plt.close(fig)
    return [name]


def write_report(header, rows, out_dir, title, command):
    groups = group_rows(rows)
    passed = sum(1 for r in rows if r["pass"])
    lines = [f"# {title}", ""]
    if command:
        lines += ["Made with:", "", f"    {command}", ""]
    roof = header.get("roof") or {}
    lines += [
        "| | |",
        "|---|---|",
        f'| device | {header.get("device")}: {header.get("device_name")} |',
        f'| details | {header.get("device_details")} |',
        f'| read roof | {num(roof.get("read_gbps"), "{:.1f}")} GB/s |',
        f'| compute roof | {num(roof.get("compute_tflops"), "{:.3f}")} TFLOP/s |',
        f'| roof method | {roof.get("method", "")} |',
        f'| suite | {header.get("suite")} (M = {", ".join(str(m) for m in header.get("ms", []))}) |',
        f'| build | quanta {header.get("version")} {header.get("build_type")}, git {header.get("git_revision")} |',
        f'| started | {header.get("started")} |',
        f'| warning | {header.get("warning") or "none"} |',
        f"| rows | {len(rows)}, {passed} pass their check, {len(rows) - passed} fail |",
        "",
        "Each row: the kernel checked against the fp64 oracle on a small problem of the same "
        "kind (rel-L2 within the dtype's bound, no NaN, output poisoned first), then timed at "
        "the full shape (median of >= 20 runs, operands rotated past the last-level cache). "
        "GB/s counts packed weights + scales/biases + x + y once; roof % is the share of the "
        "roofline bound max(bytes / read roof, flops / compute roof) reached; speedup = "
        "baseline time / kernel time.",
        "",
    ]
    failed = [r for r in rows if not r["pass"]]
    if failed:
        lines += ["## Failed rows", ""]
        for r in failed:
            why = r.get("error") or f'rel_l2 {num(r.get("rel_l2"), "{:.2e}")} > {r.get("bound")}'
            lines.append(f'- {r["op"]} {r["kernel"]} {r["format"]} {r["dtype"]} M={r["M"]} '
                         f'N={r["N"]} K={r["K"]}: {why}')
        lines.append("")

    untimed = [r for r in rows if r["pass"] and r.get("note")]
    if untimed:
        lines += ["## Rows not timed", ""]
        for r in untimed:
            lines.append(f'- {r["op"]} {r["kernel"]} {r["format"]} {r["dtype"]} M={r["M"]} '
                         f'N={r["N"]} K={r["K"]}: {r["note"]}')
        lines.append("")

    lines += ["## Plots", ""]
    for key, grows in groups.items():
        ms = {r["M"] for r in grows}
        made = (plot_sweep if len(ms) > 1 else plot_bars)(key, grows, header, out_dir)
        for name in made:
            lines.append(f"![{title_of(key, grows)}]({name})")
        if made:
            lines.append("")

    lines += ["## Rows", ""]
    for key, grows in groups.items():
        lines += [f"### {title_of(key, grows)}", ""]
        src = grows[0].get("shape_source")
        if src:
            lines += [f"Shape source: {src}", ""]
        lines += [
            "| kernel | format | M | check | rel-L2 | median us | min us | max us | GB/s "
            "| TFLOP/s | roof % | baseline | baseline us | speedup |",
            "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|",
        ]
        for r in grows:
            lines.append(
                f'| {r["kernel"]} | {r["format"]} | {r["M"]} | {"pass" if r["pass"] else "**FAIL**"} '
                f'| {num(r.get("rel_l2"), "{:.1e}")} | {num(r.get("median_us"), "{:.1f}")} '
                f'| {num(r.get("min_us"), "{:.1f}")} | {num(r.get("max_us"), "{:.1f}")} '
                f'| {num(r.get("gbps"))} | {num(r.get("tflops"), "{:.4f}")} '
                f'| {num(r.get("roof_pct"), "{:.1f}")} | {r.get("baseline") or "-"} '
                f'| {num(r.get("baseline_us"), "{:.1f}")} | {num(r.get("speedup"))} |')
        lines.append("")
    path = os.path.join(out_dir, "report.md")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", help="JSON lines from quanta bench --json")
    ap.add_argument("out_dir")
    ap.add_argument("--title", default=None)
    ap.add_argument("--command", default=None, help="the command that made the rows")
    a = ap.parse_args()
    header, rows = load(a.rows)
    os.makedirs(a.out_dir, exist_ok=True)
    title = a.title or f'quanta bench: {header.get("suite")} on {header.get("device_name")}'
    path = write_report(header, rows, a.out_dir, title, a.command)
    print(f"report: {path}")


if __name__ == "__main__":
    main()
