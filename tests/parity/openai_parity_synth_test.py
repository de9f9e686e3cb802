#!/usr/bin/env python3
"""Live parity of parley against openai-whisper on a synthetic multilingual model.

    openai_parity_synth_test.py PARLEY_BINARY DATA_DIR [--shape tiny|base] [--seed N]
        [--cache-dir DIR] [--clips ...] [--language en] [--detect] [--no-deep]
        [--tol-mel 1e-4] [--tol-logits 1e-4] [--tol-logits-rel R]

Makes the model with `parley synth whisper --shape SHAPE --seed N --vocab
DATA_DIR/whisper/multilingual.tiktoken` under --cache-dir (kept when present), converts it
with tools/reference/hf_to_openai.py (cached, keyed by model.safetensors' sha256), then
runs openai-whisper (tools/reference/openai_reference.py: temperature 0,
condition_on_previous_text, fp16=False) and `parley transcribe --language LANG` on each
clip. The synthetic weights never emit end-of-text, so every window decodes to the
224-token cap and multi-window clips exercise the previous-text prompt. Per clip it
compares the tokens, segments (seek, start, end) and the openai_parity_test.py
float tolerances, and (unless --no-deep) the first window's mel, encoder output and raw
logits at every step (`parley whisper dump` against the reference's dumps), printing the
max-abs differences in a table. Fails (exit 1) on any token / segment difference, or a
mel or logits max-abs above --tol-mel / --tol-logits (or, with --tol-logits-rel R, above
R times the reference's largest |logit| where that is larger: the synthetic weights give
logits of |x| ~ 35-39, where openai-whisper's own fp32 rows are 1.5e-3..6.3e-3 from a float64
evaluation of the same model, so 1e-4 absolute is below fp32's noise there; --f64 measures that per
clip). With --detect it also transcribes each clip without forcing the language on both sides and reports (and requires) that the
detected languages agree, and, where they do, that the tokens do. Exits 77 when
openai-whisper (scripts/setup_reference.sh) or the data is missing.
"""
import argparse
import concurrent.futures
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from openai_parity_test import (REF_DIR, compare, deep_compare, has_dump, run_parley,  # noqa: E402
                                run_reference, sha256, skip)
from parity_common import synth_model  # noqa: E402,F401

CLIPS = ["jfk.wav", "jfk.mp3", "jfk.flac", "multilingual.mp3", "french.aiff",
         "stereo_diarization.wav"]


def checkpoint_for_hf(model_dir, cache_dir):
    digest = sha256(os.path.join(model_dir, "model.safetensors"))
    ckpt = os.path.join(cache_dir, f"openai-hf-{digest[:16]}.pt")
    if not os.path.exists(ckpt):
        t = time.time()
        subprocess.run([sys.executable, os.path.join(REF_DIR, "hf_to_openai.py"), model_dir,
                        ckpt], check=True, stdout=subprocess.DEVNULL)
        print(f"converted {model_dir} -> {ckpt} in {time.time() - t:.1f}s")
    return ckpt


def transcribe_both(parley, model_dir, ckpt, paths, work, language, dump_dir, ref_device=None):
    """{clip: ref result}, {clip: parley result}, parley seconds; the reference (one
    process) runs beside the sequential parley runs."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        fut = pool.submit(run_reference, ckpt, paths, dump_dir, language, ref_device)
        got, t = {}, time.time()
        for i, p in enumerate(paths):
            got[os.path.basename(p)] = run_parley(
                parley, model_dir, p, os.path.join(work, f"parley-{language or 'detect'}-{i}"),
                language)
        t = time.time() - t
        return fut.result(), got, t


def f64_lines(ckpt, ref_clip, ref_dump, work, clip, language):
    """How far each side's fp32 logits are from float64 on the reference's mel and tokens."""
    toks = [t for sg in ref_clip["segments"] if sg["seek"] == 0 for t in sg["tokens"]]
    ref_logits = os.path.join(ref_dump, f"{clip}.logits.npy")
    ours = os.path.join(work, f"{clip}.parley.logits.npy")
    out = subprocess.run(
        [sys.executable, os.path.join(REF_DIR, "openai_f64_logits.py"), ckpt,
         os.path.join(ref_dump, f"{clip}.mel.npy"), "--tokens", ",".join(map(str, toks[:223])),
         "--language", language or "en", "--compare", ref_logits, ours],
        check=True, capture_output=True, text=True).stdout.splitlines()
    os.remove(ours)
    return [f"    float64: {'reference' if i == 0 else 'parley   '} {line.split(': ', 1)[1]}"
            for i, line in enumerate(out)]


def fmt(x, spec=".2e"):
    return "-" if x is None else format(x, spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("parley")
    ap.add_argument("data_dir")
    ap.add_argument("--shape", default="tiny")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache-dir", default=os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "parley-ref"))
    ap.add_argument("--clips", nargs="*", default=CLIPS)
    ap.add_argument("--language", default="en", help="forced on both sides (default en)")
    ap.add_argument("--detect", action="store_true",
                    help="also run without forcing the language and compare detection")
    ap.add_argument("--no-deep", action="store_true", help="skip the mel/encoder/logits dumps")
    ap.add_argument("--f64", action="store_true",
                    help="also report both sides' first-window logits against a float64 "
                    "evaluation (tools/reference/openai_f64_logits.py) on the reference's mel")
    ap.add_argument("--ref-device", choices=["cpu", "cuda"],
                    help="where openai-whisper runs (cuda: large shapes on the GPU machine)")
    ap.add_argument("--tol-mel", type=float, default=1e-4)
    ap.add_argument("--tol-logits", type=float, default=1e-4)
    ap.add_argument("--tol-logits-rel", type=float, default=0.0,
                    help="allow logits max|d| up to this times the reference's max|logit| "
                    "when that is above --tol-logits (fp32 noise grows with the logits' scale)")
    args = ap.parse_args()

    try:
        import numpy  # noqa: F401
        import torch  # noqa: F401
        import whisper  # noqa: F401
    except Exception as e:  # noqa: BLE001
        skip(f"openai-whisper is not importable ({e}); run scripts/setup_reference.sh")
    vocab = os.path.join(args.data_dir, "whisper", "multilingual.tiktoken")
    paths = [os.path.join(args.data_dir, "audio", c) for c in args.clips]
    missing = [p for p in [vocab, *paths] if not os.path.exists(p)]
    if missing:
        skip(f"missing {missing}")
    if not os.access(args.parley, os.X_OK):
        print(f"FAIL: no parley binary at {args.parley}")
        return 1
    deep = not args.no_deep
    if deep and not has_dump(args.parley):
        print("FAIL: this parley has no `whisper dump`")
        return 1

    t0 = time.time()
    os.makedirs(args.cache_dir, exist_ok=True)
    model_dir = synth_model(args.parley, args.shape, args.seed, vocab, args.cache_dir)
    ckpt = checkpoint_for_hf(model_dir, args.cache_dir)
    t_prep = time.time() - t0
    failures = []
    with tempfile.TemporaryDirectory(prefix="parley-parity-synth-") as work:
        ref_dump = os.path.join(work, "ref-dump") if deep else None
        t = time.time()
        ref, got, t_parley = transcribe_both(args.parley, model_dir, ckpt, paths, work,
                                             args.language, ref_dump, args.ref_device)
        t_transcribe = time.time() - t
        t = time.time()
        print(f"synthetic {args.shape} seed {args.seed}, language {args.language!r} forced "
              f"on both sides; tolerances: mel {args.tol_mel:g}, logits max({args.tol_logits:g}, "
              f"{args.tol_logits_rel:g} x ref max|logit|)")
        print(f"{'clip':24} {'tokens':7} {'1st diff':>8} {'n ref/parley':>12} {'segs':>5} "
              f"{'seeks':>5} {'max|d t|':>9} {'max|d lp|':>9} {'mel max|d|':>10} "
              f"{'enc max|d|':>10} {'logits max|d| (steps)':>22} {'min top2':>9}")
        detail = []
        for p in paths:
            clip = os.path.basename(p)
            ok, r = compare(ref[clip], got[clip])
            st = {}
            if deep:
                detail += [f"  {clip}:"] + deep_compare(args.parley, model_dir, p, ref_dump, work,
                                                        args.language, st, keep=args.f64)
                if args.f64:
                    detail += f64_lines(ckpt, ref[clip], ref_dump, work, clip, args.language)
                if st.get("mel") is None or st["mel"] > args.tol_mel:
                    ok = False
                tol = max(args.tol_logits, args.tol_logits_rel * st.get("logits_ref_max", 0.0))
                if (st.get("logits") is None or st["logits"] > tol
                        or st["logits_steps"][0] != st["logits_steps"][1]):
                    ok = False
            steps = st.get("logits_steps")
            print(f"{clip:24} {'equal' if r['tokens_equal'] else 'DIFFER':7} "
                  f"{'-' if r['first_diff'] is None else r['first_diff']:>8} "
                  f"{r['n_ref']:>5}/{r['n_got']:<6} {r['segs']:>5} "
                  f"{'yes' if r['seeks_equal'] else 'NO':>5} {r['d_time']:>9.1e} "
                  f"{r['d_logprob']:>9.1e} {fmt(st.get('mel')):>10} {fmt(st.get('encoder')):>10} "
                  f"{fmt(st.get('logits')):>10} ({'-' if not steps else '/'.join(map(str, steps))})"
                  f"{'':>3} {fmt(st.get('top2_gap_min'), '.1e'):>9}{'' if ok else '   <-- FAIL'}")
            if r["first_diff"] is not None:
                detail.append(f"  {clip}: ref    ...{r['ref_around']}\n"
                              f"  {clip}: parley ...{r['got_around']}")
            if not ok:
                failures.append(clip)
        for line in detail:
            print(line)
        t_deep = time.time() - t

        t_detect = 0.0
        if args.detect:
            t = time.time()
            ref_d, got_d, _ = transcribe_both(args.parley, model_dir, ckpt, paths, work, None,
                                              None, args.ref_device)
            print("language detection (not forced):")
            for p in paths:
                clip = os.path.basename(p)
                lr, lg = ref_d[clip]["language"], got_d[clip].get("language")
                ok, r = compare(ref_d[clip], got_d[clip])
                agree = lr == lg
                print(f"  {clip:24} ref {lr!s:6} parley {lg!s:6} "
                      f"{'agree' if agree else 'DISAGREE'}; tokens "
                      f"{'equal' if r['tokens_equal'] else 'DIFFER at ' + str(r['first_diff'])}"
                      f"{'' if agree and ok else '   <-- FAIL'}")
                if not (agree and ok) and clip + " (detect)" not in failures:
                    failures.append(clip + " (detect)")
            t_detect = time.time() - t
        print(f"timings: model+checkpoint {t_prep:.1f}s, transcribe (reference beside parley) "
              f"{t_transcribe:.1f}s of which parley {t_parley:.1f}s, dumps+compare {t_deep:.1f}s"
              f", detection {t_detect:.1f}s, total {time.time() - t0:.1f}s")
    if failures:
        print(f"FAIL: {len(failures)} clip(s) differ from openai-whisper on synthetic "
              f"{args.shape}: {', '.join(failures)}")
        return 1
    print(f"OK: {len(paths)}/{len(paths)} clips match openai-whisper on synthetic {args.shape}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
