#!/usr/bin/env python3
"""The side-by-side anchors (tools/device/anchors.sh) as markdown tables for bench/RESULTS.md.

    summarize.py ANCHORS.jsonl                 markdown: one table per model, then the texts
    summarize.py --from-parley LABEL <IN >OUT  `parley bench whisper` JSON lines rewritten in
                                               the anchors' schema (system, bench, ms, ...)

Every row of ANCHORS.jsonl is {"system": "parley" | "whisper.cpp" | "transformers",
"bench": ..., "ms": ..., "model": LABEL, ...}: "ms" is the figure in the row's unit (per
window, token, step or run). Lines that are not JSON objects are skipped, so raw logs can be
fed in. Ratios are other / parley: above 1, parley is faster.
"""
import argparse
import json
import sys

SYSTEMS = ("parley", "whisper.cpp", "transformers")

# parley's field holding the figure of each of its rows (`parley bench whisper`).
PARLEY_FIGURE = {
    "whisper_encoder": ("ms_per_window", "window"),
    "whisper_decode": ("ms_per_token", "token"),
    "whisper_decode_beam": ("ms_per_step", "step"),
}

# (label, {system: (bench, ...fallbacks)}, note). The first bench a system has is shown.
FIGURES = [
    ("log-mel of jfk.wav, ms (parley on the device, the others on the CPU)", {s: ("whisper_mel",) for s in SYSTEMS}, ""),
    ("encoder, ms per 30 s window",
     {"parley": ("whisper_encoder",), "whisper.cpp": ("whisper_encoder",),
      "transformers": ("whisper_encoder",)}, ""),
    ("decode, ms per token, beam 1",
     {"parley": ("whisper_decode",), "whisper.cpp": ("whisper_decode",),
      "transformers": ("whisper_decode",)},
     "--tokens (30) single-token steps after the sot prefix with the KV cache"),
    ("decode, ms per step of 5 rows (beam 5)",
     {"parley": ("whisper_decode_beam",),
      "whisper.cpp": ("whisper_full_beam5_decode_call", "whisper_full_beam5_step"),
      "transformers": ("whisper_decode_beam",)},
     "parley: a beam step chained on the device (the rows' pass, each row's top 6, "
     "beam_step, slot copies; PARLEY_BEAM_PIPELINE=0: decode_rows + host pick + "
     "reorder_rows); whisper.cpp: its own timing of the "
     "5-row decoder calls inside whisper_full's beam search (whisper_get_timings; its public "
     "API has no multi-sequence decode); transformers: decoder call of 5 rows with the cache"),
    ("jfk e2e, 30 forced greedy tokens, ms",
     {"parley": ("whisper_e2e_forced",), "whisper.cpp": ("whisper_e2e_forced",),
      "transformers": ("whisper_e2e_generate",)},
     "read + mel + encode + prefix + 30 steps; transformers: feature extractor + generate()"),
    ("jfk e2e, beam 5, 30 forced steps, ms",
     {"parley": ("whisper_e2e_forced_beam",), "whisper.cpp": ("whisper_full_beam5",),
      "transformers": ("whisper_e2e_generate_beam5",)},
     "whisper.cpp: whisper_full (beam 5, eot banned, max_tokens 30); transformers: generate()"),
    ("greedy inside the system's own loop, 30 tokens, ms",
     {"whisper.cpp": ("whisper_full_greedy",), "transformers": ("whisper_e2e_generate",)},
     "whisper_full / generate() with their sampling machinery"),
    ("whisper_full's own timing of a 1-row decoder call, ms",
     {"whisper.cpp": ("whisper_full_greedy_decode_call",)}, "whisper_get_timings, one run"),
    ("one more greedy step inside that loop, ms",
     {"whisper.cpp": ("whisper_full_greedy_step",),
      "transformers": ("whisper_generate_step",)}, "(run(T) - run(T/3)) / (T - T/3), T = --tokens"),
    ("one more beam-5 step inside that loop, ms",
     {"whisper.cpp": ("whisper_full_beam5_step",),
      "transformers": ("whisper_generate_beam5_step",)}, "(run(T) - run(T/3)) / (T - T/3), T = --tokens"),
    ("jfk transcription as a user runs it, ms",
     {"parley": ("whisper_transcribe",), "whisper.cpp": ("whisper_transcribe",)},
     "real models only (shown where whisper.cpp has the row): greedy, timestamps, fallback"),
    ("whisper-bench: encoder, ms (one run)", {"whisper.cpp": ("wcpp_bench_encode",)}, ""),
    ("whisper-bench: decode, ms per token (positions 0-255)",
     {"whisper.cpp": ("wcpp_bench_decode",)}, ""),
    ("whisper-bench: 5-token calls, ms per token",
     {"whisper.cpp": ("wcpp_bench_batchd",)}, "one sequence, 5 tokens at once"),
    ("whisper-bench: 256-token prompt, ms per token", {"whisper.cpp": ("wcpp_bench_prompt",)},
     ""),
]


def from_parley(label, lines):
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        j = json.loads(line)
        bench = j.get("bench", "")
        field, unit = PARLEY_FIGURE.get(bench, ("ms", "run"))
        if field not in j:
            continue
        row = {"system": "parley", "bench": bench, "ms": j[field], "unit": unit}
        row.update({k: v for k, v in j.items() if k not in row})
        row["model"] = label
        row["model_dir"] = j.get("model", "")
        yield row


def read_rows(path):
    rows = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    j = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if j.get("system") in SYSTEMS and "ms" in j:
                    rows.append(j)
    return rows


def fmt(ms):
    if ms is None:
        return "—"
    return f"{ms:.3g}" if abs(ms) < 100 else f"{ms:.0f}"


def table(rows):
    by = {(r["system"], r["bench"]): r for r in rows}
    out = ["| figure | parley | whisper.cpp | transformers | whisper.cpp / parley | "
           "transformers / parley |", "|---|---|---|---|---|---|"]
    notes = []
    for label, benches, note in FIGURES:
        vals = {}
        for s in SYSTEMS:
            for b in benches.get(s, ()):
                if (s, b) in by:
                    vals[s] = by[(s, b)]["ms"]
                    break
        if not vals or (benches.get("parley") == ("whisper_transcribe",)
                        and "whisper.cpp" not in vals):
            continue
        p = vals.get("parley")
        ratio = [f"{vals[s] / p:.2f}x" if p and s in vals else "—"
                 for s in ("whisper.cpp", "transformers")]
        mark = ""
        if note:
            if note not in notes:
                notes.append(note)
            mark = f" ({notes.index(note) + 1})"
        out.append(f"| {label}{mark} | " + " | ".join(fmt(vals.get(s)) for s in SYSTEMS) +
                   " | " + " | ".join(ratio) + " |")
    out += [""] + [f"({i}) {n}" for i, n in enumerate(notes, 1)]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("jsonl", nargs="?")
    ap.add_argument("--from-parley", metavar="LABEL")
    args = ap.parse_args()
    if args.from_parley:
        for row in from_parley(args.from_parley, sys.stdin):
            print(json.dumps(row))
        return 0
    if not args.jsonl:
        ap.error("give ANCHORS.jsonl or --from-parley LABEL")
    rows = read_rows(args.jsonl)
    models = list(dict.fromkeys(r.get("model", "") for r in rows))
    lines = []
    for m in models:
        mrows = [r for r in rows if r.get("model", "") == m]
        setup = []
        for s in SYSTEMS:
            r = next((r for r in mrows if r["system"] == s), None)
            if r:
                keys = ("dtype", "device_label", "attn", "version", "transformers", "torch",
                        "runs", "warmup", "threads", "flash_attn")
                setup.append(f"{s}: " + ", ".join(f"{k} {r[k]}" for k in keys if k in r))
        lines += [f"### {m}", "", "; ".join(setup), ""] + table(mrows) + [""]
        texts = [(r["system"], r["bench"], r["text"]) for r in mrows if r.get("text")]
        for s, b, t in texts:
            lines.append(f"- {s} `{b}`: {t.strip()[:200]}")
        if texts:
            lines.append("")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
