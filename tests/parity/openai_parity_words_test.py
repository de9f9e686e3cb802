#!/usr/bin/env python3
"""Live parity of word timestamps: `parley transcribe --word-timestamps` against
openai-whisper's transcribe(word_timestamps=True) on the same weights.

    openai_parity_words_test.py PARLEY_BINARY DATA_DIR (--model-dir DIR | --synth SHAPE)
        [--clips ...] [--language L] [--hallucination-silence-threshold S] [--sample-len N]
        [--cache-dir DIR] [--tol-time 0.02] [--tol-prob 1e-3]

--model-dir: a CTranslate2 model (the real tiny.en), converted by
tools/reference/ct2_to_openai.py; the reference gets the alignment heads of the model's
config.json (for tiny.en, _ALIGNMENT_HEADS["tiny.en"]), as parley reads them.
--synth SHAPE: `parley synth whisper --shape SHAPE --seed 0` converted by
hf_to_openai.py; no heads on either side, so both use every head of the later half of
the decoder layers.
Runs tools/reference/openai_words_reference.py and `parley transcribe --word-timestamps
-f verbose_json`, and per clip requires identical tokens, identical segment seeks, the
same words (text) in every segment, and every word start / end and every segment start /
end within --tol-time seconds, word probabilities within --tol-prob. Prints the worst
differences. --sample-len N caps the tokens per window on both sides (the synthetic
models never sample <|endoftext|>, so this bounds their cost). Exits 1 on a failure, 77 when openai-whisper or the inputs are missing.
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from openai_parity_test import REF_DIR, checkpoint_for, skip  # noqa: E402
from openai_parity_synth_test import checkpoint_for_hf  # noqa: E402
from parity_common import synth_model, transcribe_json  # noqa: E402


def run_reference(ckpt, paths, language, heads, threshold, sample_len):
    cmd = [sys.executable, os.path.join(REF_DIR, "openai_words_reference.py"), ckpt, *paths]
    if sample_len:
        cmd += ["--sample-len", str(sample_len)]
    if language:
        cmd += ["--language", language]
    if heads:
        cmd += ["--heads", ",".join(f"{layer}:{head}" for layer, head in heads)]
    if threshold is not None:
        cmd += ["--hallucination-silence-threshold", str(threshold)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    res = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {os.path.basename(r["file"]): r for r in res}


def run_parley(parley, model_dir, path, out_dir, language, threshold, sample_len):
    cmd = ["--word-timestamps",
           # the reference runs temperature=0.0 only (openai_words_reference.py)
           "--temperature", "0", "--temperature-increment-on-fallback", "none"]
    if sample_len:
        cmd += ["--sample-len", str(sample_len)]
    if language:
        cmd += ["--language", language]
    if threshold is not None:
        cmd += ["--hallucination-silence-threshold", str(threshold)]
    return transcribe_json(parley, model_dir, path, out_dir, cmd)


def compare(ref, got, tol_time, tol_prob):
    """(problems, stats) for one clip."""
    problems = []
    rs, gs = ref["segments"], got["segments"]
    if [s["tokens"] for s in rs] != [s["tokens"] for s in gs]:
        problems.append("tokens differ")
    if [s["seek"] for s in rs] != [s["seek"] for s in gs]:
        problems.append(f"seeks differ: {[s['seek'] for s in rs]} vs {[s['seek'] for s in gs]}")
    d_seg = d_word = d_prob = 0.0
    n_words = 0
    for i, (a, b) in enumerate(zip(rs, gs)):
        d_seg = max(d_seg, abs(a["start"] - b["start"]), abs(a["end"] - b["end"]))
        wa, wb = a["words"] or [], b.get("words", [])
        if [w["word"] for w in wa] != [w["word"] for w in wb]:
            problems.append(f"segment {i} words differ:\n      ref    {[w['word'] for w in wa]}"
                            f"\n      parley {[w['word'] for w in wb]}")
            continue
        for x, y in zip(wa, wb):
            n_words += 1
            d_word = max(d_word, abs(x["start"] - y["start"]), abs(x["end"] - y["end"]))
            d_prob = max(d_prob, abs(x["probability"] - y["probability"]))
            if max(abs(x["start"] - y["start"]), abs(x["end"] - y["end"])) > tol_time:
                problems.append(f"segment {i} word {x['word']!r}: ref {x['start']}-{x['end']} "
                                f"parley {y['start']}-{y['end']}")
    if d_seg > tol_time:
        problems.append(f"segment times differ by {d_seg:.3f}s")
    if d_prob > tol_prob:
        problems.append(f"word probabilities differ by {d_prob:.2e}")
    top = [w for s in got["segments"] for w in s.get("words", [])]
    if len(top) != len(got.get("words", [])):
        problems.append("verbose_json top-level words do not match the segments' words")
    return problems, dict(segs=f"{len(rs)}/{len(gs)}", words=n_words, d_seg=d_seg,
                          d_word=d_word, d_prob=d_prob)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("parley")
    ap.add_argument("data_dir")
    ap.add_argument("--model-dir")
    ap.add_argument("--synth")
    ap.add_argument("--clips", nargs="*", default=["jfk.wav"])
    ap.add_argument("--language")
    ap.add_argument("--hallucination-silence-threshold", type=float)
    ap.add_argument("--sample-len", type=int)
    ap.add_argument("--cache-dir", default=os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "parley-ref"))
    ap.add_argument("--tol-time", type=float, default=0.02)
    ap.add_argument("--tol-prob", type=float, default=1e-3)
    args = ap.parse_args()
    if bool(args.model_dir) == bool(args.synth):
        ap.error("give one of --model-dir and --synth")

    try:
        import torch  # noqa: F401
        import whisper  # noqa: F401
    except Exception as e:  # noqa: BLE001
        skip(f"openai-whisper is not importable ({e}); run scripts/setup_reference.sh")
    paths = [os.path.join(args.data_dir, "audio", c) for c in args.clips]
    if any(not os.path.exists(p) for p in paths):
        skip(f"missing clips in {args.data_dir}/audio")
    os.makedirs(args.cache_dir, exist_ok=True)
    t0 = time.time()
    heads = None
    if args.model_dir:
        if not os.path.exists(os.path.join(args.model_dir, "model.bin")):
            skip(f"no model at {args.model_dir}; run scripts/setup.sh")
        model_dir = args.model_dir
        ckpt = checkpoint_for(model_dir, args.cache_dir)
        with open(os.path.join(model_dir, "config.json")) as f:
            heads = json.load(f).get("alignment_heads")
    else:
        vocab = os.path.join(args.data_dir, "whisper", "multilingual.tiktoken")
        model_dir = synth_model(args.parley, args.synth, 0, vocab, args.cache_dir)
        ckpt = checkpoint_for_hf(model_dir, args.cache_dir)

    threshold = args.hallucination_silence_threshold
    with tempfile.TemporaryDirectory(prefix="parley-words-") as work:
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            fut = pool.submit(run_reference, ckpt, paths, args.language, heads, threshold,
                              args.sample_len)
            got = {os.path.basename(p): run_parley(args.parley, model_dir, p,
                                                   os.path.join(work, str(i)), args.language,
                                                   threshold, args.sample_len)
                   for i, p in enumerate(paths)}
            ref = fut.result()

    failed = []
    print(f"{'clip':24} {'segs':>7} {'words':>6} {'max|d seg|':>10} {'max|d word|':>11} "
          f"{'max|d prob|':>11}")
    for p in paths:
        clip = os.path.basename(p)
        problems, st = compare(ref[clip], got[clip], args.tol_time, args.tol_prob)
        print(f"{clip:24} {st['segs']:>7} {st['words']:>6} {st['d_seg']:>10.3f} "
              f"{st['d_word']:>11.3f} {st['d_prob']:>11.2e}{'   <-- FAIL' if problems else ''}")
        for line in problems[:10]:
            print(f"    {line}")
        if problems:
            failed.append(clip)
    print(f"total {time.time() - t0:.1f}s")
    if failed:
        print(f"FAIL: {', '.join(failed)}")
        return 1
    print(f"OK: {len(paths)} clips: word timestamps within {args.tol_time}s of openai-whisper")
    return 0


if __name__ == "__main__":
    sys.exit(main())
