#!/usr/bin/env python3
"""Summarize alternated `parley bench whisper` runs (ab_bench.sh's output folder).

Each run is a file ab_<arm>_<round>.jsonl of bench JSON lines. Prints one line per run,
then per arm the range (lowest-highest) over its rounds of each figure: mel, encoder (ms a
window), initial pass, decode (ms a token), greedy e2e, beam step, rows step, beam e2e.

    python3 tools/device/ab_summary.py OUTDIR [--runs]
"""
import argparse
import collections
import glob
import json
import os
import re

# bench name -> (column, field)
FIGURES = [
    ("whisper_mel", "mel", "ms"),
    ("whisper_encoder", "encoder", "ms_per_window"),
    ("whisper_prefix", "prefix", "ms"),
    ("whisper_decode", "decode", "ms_per_token"),
    ("whisper_e2e_forced", "e2e", "ms"),
    ("whisper_decode_beam", "beam_step", "ms_per_step"),
    ("whisper_decode_rows", "rows_step", "ms_per_step"),
    ("whisper_e2e_forced_beam", "beam_e2e", "ms"),
]


def read_run(path):
    """The figures of one run's JSON lines (lines that are not JSON are skipped)."""
    out = {}
    with open(path, errors="replace") as f:
        for line in f:
            try:
                j = json.loads(line)
            except ValueError:
                continue
            for bench, column, field in FIGURES:
                if j.get("bench") == bench and field in j:
                    out[column] = float(j[field])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--runs", action="store_true", help="also print every run")
    a = ap.parse_args()
    runs = collections.defaultdict(list)  # arm -> [(round, figures)]
    for path in glob.glob(os.path.join(a.outdir, "ab_*_*.jsonl")):
        m = re.match(r"ab_(.+)_(\d+)\.jsonl$", os.path.basename(path))
        if m:
            runs[m.group(1)].append((int(m.group(2)), read_run(path)))
    if not runs:
        raise SystemExit(f"no ab_<arm>_<round>.jsonl files in {a.outdir}")
    columns = [c for _, c, _ in FIGURES]
    if a.runs:
        for arm in sorted(runs):
            for rnd, fig in sorted(runs[arm]):
                print(f"{arm} run {rnd}: " + " ".join(f"{c}={fig[c]:.4f}" for c in columns if c in fig))
    print("| arm | rounds | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 2) + "|")
    for arm in sorted(runs):
        cells = []
        for c in columns:
            vals = [fig[c] for _, fig in runs[arm] if c in fig]
            cells.append(f"{min(vals):.4g}-{max(vals):.4g}" if vals else "—")
        print(f"| {arm} | {len(runs[arm])} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
