#!/usr/bin/env python3
"""Live parity of parley's decoding options against openai-whisper's transcribe().

    openai_parity_decoding_test.py PARLEY_BINARY MODEL_DIR DATA_DIR [--cache-dir DIR]
        [--cases NAME...] [--synthetic] [--tol-logprob 1e-4] [--tol-nospeech 1e-4]

Each case is one transcribe() keyword set on the reference (tools/reference/openai_cases.py,
one process for all cases) and the same options as `parley transcribe` flags, on the real
tiny.en (MODEL_DIR, converted by ct2_to_openai.py) and, with --synthetic, on a synthetic
multilingual tiny from `parley synth whisper --seed 0` (translation, beam search over
224-token windows). Per case and clip it requires identical tokens, segments (seek, start,
end) and temperatures, and avg_logprob / no_speech_prob / compression_ratio within the
tolerances; it prints the measured maxima. Cases cover beam search (5, with and without
patience, length_penalty), prompts (initial_prompt, carry_initial_prompt, prefix), the
default temperature ladder where the first attempt passes, forced silence skips,
clip_timestamps, sample_len, suppress_tokens/suppress_blank, max_initial_timestamp,
condition_on_previous_text and translation. Sampling (temperature > 0) is not compared
token by token: the reference draws from torch's generator, parley from its own
(src/whisper/sampling.h); parley's own determinism across runs and thread counts is checked
here instead (same seed, --threads 1 vs 2). Exits 77 when openai-whisper or the data is missing.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from openai_parity_test import REF_DIR, checkpoint_for, skip  # noqa: E402
from parity_common import transcribe_json  # noqa: E402

GREEDY = {"temperature": 0.0}
GREEDY_FLAGS = ["--temperature", "0", "--temperature-increment-on-fallback", "none"]
LADDER = [0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]

# name: (clips, reference options, parley flags)
REAL_CASES = {
    "beam5": (["jfk.wav", "english.wav", "hotwords.mp3"], {**GREEDY, "beam_size": 5},
              GREEDY_FLAGS + ["--beam-size", "5"]),
    "beam5_patience2": (["jfk.wav", "english.wav"], {**GREEDY, "beam_size": 5, "patience": 2.0},
                        GREEDY_FLAGS + ["--beam-size", "5", "--patience", "2"]),
    "beam3_length_penalty": (["jfk.wav"], {**GREEDY, "beam_size": 3, "length_penalty": 0.5},
                             GREEDY_FLAGS + ["--beam-size", "3", "--length-penalty", "0.5"]),
    "beam5_long": (["silero_test.wav"], {**GREEDY, "beam_size": 5},
                   GREEDY_FLAGS + ["--beam-size", "5"]),
    "prompt_carry": (["silero_test.wav"],
                     {**GREEDY, "initial_prompt": "Silero, Kubernetes and ComfyUI.",
                      "carry_initial_prompt": True},
                     GREEDY_FLAGS + ["--initial-prompt", "Silero, Kubernetes and ComfyUI.",
                                     "--carry-initial-prompt", "true"]),
    "prompt_no_condition": (["silero_test.wav"],
                            {**GREEDY, "initial_prompt": "Hello.",
                             "condition_on_previous_text": False},
                            GREEDY_FLAGS + ["--initial-prompt", "Hello.",
                                            "--condition-on-previous-text", "false"]),
    "prefix": (["jfk.wav", "english.wav"], {**GREEDY, "prefix": "And so, my"},
               GREEDY_FLAGS + ["--prefix", "And so, my"]),
    "ladder_default": (["jfk.wav", "silero_test.wav"], {"temperature": LADDER}, []),
    "silence_skip": (["silero_test.wav", "jfk.wav"],
                     {**GREEDY, "no_speech_threshold": 0.05, "logprob_threshold": 0.0},
                     GREEDY_FLAGS + ["--no-speech-threshold", "0.05", "--logprob-threshold", "0"]),
    "clip_timestamps": (["silero_test.wav"], {**GREEDY, "clip_timestamps": "1.5,12,31.25,45"},
                        GREEDY_FLAGS + ["--clip-timestamps", "1.5,12,31.25,45"]),
    "sample_len_suppress": (["jfk.wav"],
                            {**GREEDY, "sample_len": 12, "suppress_tokens": "",
                             "suppress_blank": False, "max_initial_timestamp": 0.0},
                            GREEDY_FLAGS + ["--sample-len", "12", "--suppress-tokens", "",
                                            "--suppress-blank", "false",
                                            "--max-initial-timestamp", "0"]),
    # Every attempt fails (avg_logprob < 0 < 0.5): both sides walk the whole ladder and keep
    # the T = 1.0 sample. Sampled tokens differ (SAMPLED below): temperatures are compared.
    "ladder_forced": (["jfk.wav"], {"temperature": LADDER, "logprob_threshold": 0.5,
                                    "no_speech_threshold": None},
                      ["--logprob-threshold", "0.5", "--no-speech-threshold", "none"]),
}
# Cases whose kept results are sampled: only the segments' temperatures are compared.
SAMPLED = {"ladder_forced"}
# --quick (CI): these case/clip pairs only; the full list ran by hand (docs/DECODING.md).
QUICK = {"beam5/jfk.wav", "beam5_patience2/jfk.wav",
         "beam3_length_penalty/jfk.wav", "prompt_carry/silero_test.wav", "prefix/jfk.wav",
         "ladder_default/jfk.wav", "silence_skip/silero_test.wav",
         "clip_timestamps/silero_test.wav", "sample_len_suppress/jfk.wav",
         "synth_translate/french.aiff", "ladder_forced/jfk.wav"}
SYNTH_CASES = {
    "synth_translate": (["french.aiff", "multilingual.mp3"],
                        {**GREEDY, "task": "translate", "language": "fr"},
                        GREEDY_FLAGS + ["--task", "translate", "--language", "fr"]),
    "synth_beam5": (["jfk.wav"], {**GREEDY, "beam_size": 5, "language": "en"},
                    GREEDY_FLAGS + ["--beam-size", "5", "--language", "en"]),
}


def run_parley(parley, model_dir, path, out_dir, flags, threads=None):
    extra = ["--threads", str(threads)] if threads else []
    return transcribe_json(parley, model_dir, path, out_dir, [*flags, *extra])


def compare(ref, got):
    rs, gs = ref["segments"], got["segments"]
    rt = [t for s in rs for t in s["tokens"]]
    gt = [t for s in gs for t in s["tokens"]]
    first = next((i for i, (a, b) in enumerate(zip(rt, gt)) if a != b), None)
    if first is None and len(rt) != len(gt):
        first = min(len(rt), len(gt))
    same = (first is None and len(rs) == len(gs)
            and all(a["tokens"] == b["tokens"] and a["seek"] == b["seek"]
                    and abs(a["start"] - b["start"]) < 1e-6 and abs(a["end"] - b["end"]) < 1e-6
                    and abs(a["temperature"] - b["temperature"]) < 1e-6
                    for a, b in zip(rs, gs)))
    d = {"lp": 0.0, "ns": 0.0, "cr": 0.0}
    for a, b in zip(rs, gs):
        d["lp"] = max(d["lp"], abs(a["avg_logprob"] - b["avg_logprob"]))
        d["ns"] = max(d["ns"], abs(a["no_speech_prob"] - b["no_speech_prob"]))
        d["cr"] = max(d["cr"], abs(a["compression_ratio"] - b["compression_ratio"]))
    return same, first, d, len(rs), len(gs)


def run_cases(parley, model_dir, ckpt, cases, data_dir, work, tag):
    jobs = []
    for name, (clips, opts, _) in cases.items():
        for clip in clips:
            jobs.append({"id": f"{name}/{clip}", "file": os.path.join(data_dir, "audio", clip),
                         "options": opts})
    cases_json = os.path.join(work, f"cases-{tag}.json")
    with open(cases_json, "w") as f:
        json.dump(jobs, f)
    ref_proc = subprocess.Popen([sys.executable, os.path.join(REF_DIR, "openai_cases.py"), ckpt,
                                 cases_json], stdout=subprocess.PIPE, text=True)
    got = {}
    t = time.time()
    for name, (clips, _, flags) in cases.items():
        for i, clip in enumerate(clips):
            got[f"{name}/{clip}"] = run_parley(parley, model_dir,
                                               os.path.join(data_dir, "audio", clip),
                                               os.path.join(work, tag, name, str(i)), flags)
    t_parley = time.time() - t
    out, _ = ref_proc.communicate()
    if ref_proc.returncode != 0:
        raise RuntimeError("the reference failed")
    ref = {r["id"]: r for r in (json.loads(line) for line in out.splitlines()
                                 if line.startswith("{"))}
    return ref, got, t_parley


def sampling_stats(args, work):
    """T = 1.0 on jfk.wav, N seeds per side: the two samples of avg_logprob must agree in
    mean (within 4 standard errors of the difference); prints the shares of transcripts equal
    to the greedy one."""
    import statistics
    n = args.sampling_stats
    clip = os.path.join(args.data_dir, "audio", "jfk.wav")
    ckpt = checkpoint_for(args.model_dir, args.cache_dir)
    opts = {"temperature": 1.0}
    jobs = [{"id": f"s{i}", "file": clip, "options": opts, "seed": i} for i in range(n)]
    cases_json = os.path.join(work, "cases-stats.json")
    with open(cases_json, "w") as f:
        json.dump(jobs, f)
    out = subprocess.run([sys.executable, os.path.join(REF_DIR, "openai_cases.py"), ckpt,
                          cases_json], check=True, capture_output=True, text=True).stdout
    ref = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    flags = ["--temperature", "1", "--temperature-increment-on-fallback", "none"]
    got = [run_parley(args.parley, args.model_dir, clip, os.path.join(work, f"st{i}"),
                      flags + ["--seed", str(i)]) for i in range(n)]
    greedy = (" And so my fellow Americans ask not what your country can do for you ask what you"
              " can do for your country.")

    def summary(results):
        lps = [s["avg_logprob"] for r in results for s in r["segments"][:1]]
        exact = sum(r["text"] == greedy for r in results) / len(results)
        return statistics.mean(lps), statistics.stdev(lps), exact

    mr, sr, er = summary(ref)
    mg, sg, eg = summary(got)
    se = (sr * sr / n + sg * sg / n) ** 0.5
    ok = abs(mr - mg) <= 4 * se
    print(f"sampling statistics, jfk.wav at T=1.0, {n} seeds each: first-window avg_logprob "
          f"mean ref {mr:.4f} (sd {sr:.4f}) parley {mg:.4f} (sd {sg:.4f}), |diff| "
          f"{abs(mr - mg):.4f} vs 4 SE {4 * se:.4f}; transcripts equal to greedy: ref "
          f"{er:.0%} parley {eg:.0%}{'' if ok else '   <-- FAIL'}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("parley")
    ap.add_argument("model_dir")
    ap.add_argument("data_dir")
    ap.add_argument("--cache-dir", default=os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "parley-ref"))
    ap.add_argument("--cases", nargs="*", help="only these case names")
    ap.add_argument("--synthetic", action="store_true", help="also the synthetic tiny cases")
    ap.add_argument("--quick", action="store_true", help="only the QUICK case/clip pairs")
    ap.add_argument("--sampling-stats", type=int, default=0, metavar="N",
                    help="also sample jfk.wav at T=1 with N seeds on both sides and compare "
                    "the mean avg_logprob and the share of exact transcripts (slow; by hand)")
    ap.add_argument("--tol-logprob", type=float, default=1e-4)
    ap.add_argument("--tol-nospeech", type=float, default=1e-4)
    ap.add_argument("--tol-ratio", type=float, default=1e-4)
    args = ap.parse_args()
    try:
        import torch  # noqa: F401
        import whisper  # noqa: F401
    except Exception as e:  # noqa: BLE001
        skip(f"openai-whisper is not importable ({e}); run scripts/setup_reference.sh")
    if not os.path.exists(os.path.join(args.model_dir, "model.bin")):
        skip(f"no tiny.en model at {args.model_dir}")
    if args.quick:
        def keep(cases):
            out = {}
            for name, (clips, opts, flags) in cases.items():
                clips = [c for c in clips if f"{name}/{c}" in QUICK]
                if clips:
                    out[name] = (clips, opts, flags)
            return out
        real_cases, synth_cases = keep(REAL_CASES), keep(SYNTH_CASES)
    else:
        real_cases, synth_cases = REAL_CASES, SYNTH_CASES
    t0 = time.time()
    failures = []
    rows = []
    with tempfile.TemporaryDirectory(prefix="parley-parity-decoding-") as work:
        runs = []
        real = {k: v for k, v in real_cases.items() if not args.cases or k in args.cases}
        if real:
            ckpt = checkpoint_for(args.model_dir, args.cache_dir)
            runs.append(("tiny.en", real) + run_cases(args.parley, args.model_dir, ckpt, real,
                                                      args.data_dir, work, "real"))
        synth = {k: v for k, v in synth_cases.items() if not args.cases or k in args.cases}
        if args.synthetic and synth:
            from openai_parity_synth_test import checkpoint_for_hf, synth_model
            vocab = os.path.join(args.data_dir, "whisper", "multilingual.tiktoken")
            model_dir = synth_model(args.parley, "tiny", 0, vocab, args.cache_dir)
            ckpt = checkpoint_for_hf(model_dir, args.cache_dir)
            runs.append(("synthetic tiny", synth) + run_cases(args.parley, model_dir, ckpt, synth,
                                                              args.data_dir, work, "synth"))
        print(f"{'model':15} {'case/clip':40} {'tokens':7} {'segs':>7} {'max|d lp|':>9} "
              f"{'max|d ns|':>9} {'max|d cr|':>9}  temperatures")
        for model, cases, ref, got, t_parley in runs:
            for cid in [f"{n}/{c}" for n, (clips, _, _) in cases.items() for c in clips]:
                same, first, d, nr, ng = compare(ref[cid], got[cid])
                ok = (same and d["lp"] <= args.tol_logprob and d["ns"] <= args.tol_nospeech
                      and d["cr"] <= args.tol_ratio)
                temps = sorted({s["temperature"] for s in ref[cid]["segments"]})
                if cid.split("/")[0] in SAMPLED:
                    got_temps = sorted({s["temperature"] for s in got[cid]["segments"]})
                    ok = bool(temps) and temps == got_temps
                    print(f"{model:15} {cid:40} sampled: temperatures ref {temps} parley "
                          f"{got_temps}{'' if ok else '   <-- FAIL'}")
                    if not ok:
                        failures.append(f"{model} {cid}")
                    continue
                print(f"{model:15} {cid:40} {'equal' if same else 'DIFFER':7} {nr:>3}/{ng:<3} "
                      f"{d['lp']:9.1e} {d['ns']:9.1e} {d['cr']:9.1e}  {temps}"
                      f"{'' if ok else '   <-- FAIL (first token diff at %s)' % first}")
                if not ok:
                    failures.append(f"{model} {cid}")
            rows.append(f"{model}: parley {t_parley:.1f}s")

        # Sampling: the same seed gives the same transcript on every run and thread count.
        if not args.cases or "sampling" in args.cases:
            clip = os.path.join(args.data_dir, "audio", "jfk.wav")
            flags = ["--temperature", "0.8", "--temperature-increment-on-fallback", "none",
                     "--best-of", "3", "--seed", "42"]
            a = run_parley(args.parley, args.model_dir, clip, os.path.join(work, "s1"), flags, 1)
            b = run_parley(args.parley, args.model_dir, clip, os.path.join(work, "s2"), flags, 2)
            c = run_parley(args.parley, args.model_dir, clip, os.path.join(work, "s3"),
                           flags[:-1] + ["43"], 2)
            same = [s["tokens"] for s in a["segments"]] == [s["tokens"] for s in b["segments"]]
            print(f"sampling T=0.8 best_of 3 seed 42: threads 1 vs 2 "
                  f"{'identical' if same else 'DIFFER   <-- FAIL'}; seed 43 "
                  f"{'differs' if c['text'] != a['text'] else 'is the same'}: {a['text']!r}")
            if not same:
                failures.append("sampling determinism")
        if args.sampling_stats:
            ok = sampling_stats(args, work)
            if not ok:
                failures.append("sampling statistics")
    print(f"timings: {', '.join(rows)}, total {time.time() - t0:.1f}s")
    if failures:
        print(f"FAIL: {len(failures)} case(s) differ from openai-whisper: {', '.join(failures)}")
        return 1
    print("OK: every case matches openai-whisper")
    return 0


if __name__ == "__main__":
    sys.exit(main())
