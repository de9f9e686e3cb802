#!/usr/bin/env python3
"""parley's grammar engine against llguidance: token-mask time on the JSON Schema corpus (not a test).

    .venv-llm/bin/python bench/grammar_masks.py [--parley build/parley | --fake-parley]
        [--corpus corpus.jsonl | --count 560] [--valid 2] [--invalid 2] [--llg-forcing] [--json-out F]

Builds the corpus of tools/grammar/schema_corpus.py (560 schemas by default, at least 500)
and two valid and two invalid documents per schema (tools/grammar/documents.py), and runs
every document through `parley grammar masks` and through llguidance in the same run
(tools/grammar/llguidance_masks.py, which compares the masks as it goes). Times, per engine,
in microseconds:
- mask_us: the masks after the first one (steps 1..n of every document): mean, p50, p99, max;
- first_us: the mask at step 0, which includes compiling the grammar (parley's own figure;
  llguidance: grammar_from_json_schema + LLMatcher construction + the first mask);
- the same two by corpus category (hand, enum_large, deep, refs, ...), mean and p99.
parley's times are the `us` it reports; llguidance's are taken in Python around one
fill_next_token_bitmask call (a microsecond or two of binding overhead included) on the
same thread, one request at a time for both. llguidance computes the language's masks
(no_forcing, through a Lark wrapper that adds about 0.5 ms to its compile); --llg-forcing
times its default path instead (grammar_from_json_schema, forced bytes as canonical tokens),
whose masks differ from parley's by design. Prints JSON lines: one per engine and figure
({"engine", "figure", "n", "mean", "p50", "p99", "max"}), one per category, then a summary
line (ratios parley / llguidance, > 1: parley slower; the comparison's counts). --json-out
writes all of it with the machine and the command. --fake-parley answers parley's side with
llguidance (a dry run of the benchmark itself).
"""
import argparse
import datetime
import json
import os
import platform
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools", "grammar"))

import llguidance_masks as lm  # noqa: E402


def emit(doc):
    print(json.dumps(doc), flush=True)


def category(case_id):
    """"gen/0042-enum_large" -> enum_large; "hand/x" -> hand; "extra/regex_phone" -> extra."""
    if case_id.startswith("gen/"):
        return case_id.split("-", 1)[1]
    return case_id.split("/", 1)[0]


def by_category(h):
    groups = {}
    for case_id, t in h.case_times.items():
        g = groups.setdefault(category(case_id), {k: [] for k in t})
        for k, v in t.items():
            g[k].extend(v)
    out = {}
    for name, g in sorted(groups.items()):
        out[name] = {}
        for k, v in g.items():
            s = lm.stats(v)
            out[name][k] = None if s is None else {"mean": round(s["mean"], 1), "p99": round(s["p99"], 1)}
    return out


def ratio(a, b, key):
    return round(a[key] / b[key], 3) if a and b and b[key] else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    lm.add_arguments(ap)
    args = ap.parse_args()
    if not args.corpus and args.count < 500 and not args.limit:
        print("[bench] fewer than 500 schemas: not the benchmark's corpus", file=sys.stderr)
    h = lm.run(args, log=lambda line: print(line, file=sys.stderr))
    figures = {}
    for engine in ("parley", "llguidance"):
        for fig in ("mask_us", "first_us"):
            s = lm.stats(h.times[f"{engine}_{fig}"])
            figures[f"{engine}_{fig}"] = s
            emit({"engine": engine, "figure": fig, **({k: round(v, 1) for k, v in s.items()} if s else {})})
    s = lm.stats(h.times["llguidance_compile_us"])
    emit({"engine": "llguidance", "figure": "compile_us", **({k: round(v, 1) for k, v in s.items()} if s else {})})
    cats = by_category(h)
    for name, c in cats.items():
        emit({"category": name, **c})
    pm, lmask = figures["parley_mask_us"], figures["llguidance_mask_us"]
    pf, lf = figures["parley_first_us"], figures["llguidance_first_us"]
    summary = {
        "schemas": sum(1 for r in h.records if not r["id"].startswith("extra/")),
        "documents": h.counts["documents"], "tokens": h.counts["tokens"],
        "mask_mean_ratio": ratio(pm, lmask, "mean"), "mask_p50_ratio": ratio(pm, lmask, "p50"),
        "mask_p99_ratio": ratio(pm, lmask, "p99"), "first_mean_ratio": ratio(pf, lf, "mean"),
        "first_p99_ratio": ratio(pf, lf, "p99"),
        "differences": h.counts["differences"], "differing_cases": h.counts["differing_cases"],
        "parley_errors": h.counts["parley_errors"], "wall_s": round(h.wall_s, 1), "fake_parley": args.fake_parley,
    }
    emit({"summary": summary})
    if args.json_out:
        import llguidance
        doc = {"date": datetime.date.today().isoformat(), "command": " ".join(sys.argv),
               "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                           "python": platform.python_version(), "llguidance": llguidance.__version__},
               "summary": summary, "figures": figures, "categories": cats, "counts": h.counts,
               "llguidance_options": lm.LLG_JSON_OPTIONS, "llguidance_forcing": args.llg_forcing,
               "stop": lm.STOP_IDS,
               "differing": [r for r in h.records if r["differences"]][:50]}
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
