#!/usr/bin/env python3
"""Live parity of `parley transcribe` against faster-whisper on the same CTranslate2 model.

    faster_whisper_parity_test.py PARLEY_BINARY MODEL_DIR DATA_DIR [--clips ...]

Runs tools/reference/faster_whisper_reference.py (faster-whisper on CTranslate2, float32 on
the CPU, greedy at temperature 0 without fallback as openai_reference.py, no VAD,
condition_on_previous_text, timestamps; the audio decoded by the ffmpeg CLI as openai-whisper
does) on MODEL_DIR (the real tiny.en, faster-whisper's own layout, as is) and `parley
transcribe -f verbose_json` on the same English clips, and compares segment by segment:
tokens (timestamp tokens included), seeks and segment times must be identical;
avg_logprob and no_speech_prob within --tol (CTranslate2's float32 kernels and
faster-whisper's NumPy log-mel are not the reference's float summation order).
Exits 77 (ctest SKIP_RETURN_CODE) when faster-whisper (scripts/setup_reference.sh), the model
or a clip is missing.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity_common import REF_DIR, SKIP, transcribe_json  # noqa: E402

REF = os.path.join(REF_DIR, "faster_whisper_reference.py")
CLIPS = ["jfk.wav", "jfk.mp3", "jfk.flac", "english.wav", "stereo_diarization.wav",
         "hotwords.mp3"]


def run_parley(parley, model_dir, path, out_dir):
    return transcribe_json(parley, model_dir, path, out_dir,
                           # the reference side runs temperature 0 without fallback
                           ["--temperature", "0", "--temperature-increment-on-fallback", "none"])


def compare(clip, ref, got, tol):
    rs, gs = ref["segments"], got["segments"]
    tokens_equal = [s["tokens"] for s in rs] == [s["tokens"] for s in gs]
    times_equal = len(rs) == len(gs) and all(
        a["seek"] == b["seek"] and abs(a["start"] - b["start"]) < 1e-6
        and abs(a["end"] - b["end"]) < 1e-6 for a, b in zip(rs, gs))
    d_lp = max((abs(a["avg_logprob"] - b["avg_logprob"]) for a, b in zip(rs, gs)), default=0)
    d_ns = max((abs(a["no_speech_prob"] - b["no_speech_prob"]) for a, b in zip(rs, gs)),
               default=0)
    ok = tokens_equal and times_equal and d_lp <= tol and d_ns <= tol
    n = sum(len(s["tokens"]) for s in gs)
    print(f"{clip:24} {'equal' if tokens_equal else 'DIFFER':7} {n:4} tokens {len(gs):2} segments "
          f"{'equal' if times_equal else 'DIFFER':6} max|d avg_logprob| {d_lp:.2e} "
          f"max|d no_speech| {d_ns:.2e}{'' if ok else '   <-- FAIL'}")
    if not tokens_equal or not times_equal:
        print(f"    faster-whisper: {[(s['seek'], s['start'], s['end'], s['tokens']) for s in rs]}")
        print(f"    parley:         {[(s['seek'], s['start'], s['end'], s['tokens']) for s in gs]}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("parley")
    ap.add_argument("model_dir")
    ap.add_argument("data_dir")
    ap.add_argument("--clips", nargs="*", default=CLIPS)
    ap.add_argument("--tol", type=float, default=5e-3,
                    help="bound on |d avg_logprob| and |d no_speech_prob|")
    args = ap.parse_args()
    try:
        import faster_whisper  # noqa: F401
    except Exception as e:  # noqa: BLE001
        print(f"SKIP: faster-whisper is not importable ({e}); run scripts/setup_reference.sh")
        return SKIP
    if not os.path.exists(os.path.join(args.model_dir, "model.bin")):
        print(f"SKIP: no model at {args.model_dir}; run scripts/setup.sh")
        return SKIP
    paths = [os.path.join(args.data_dir, "audio", c) for c in args.clips]
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        print(f"SKIP: missing clips {missing}")
        return SKIP
    t0 = time.time()
    ref_proc = subprocess.Popen([sys.executable, REF, args.model_dir, *paths],
                                stdout=subprocess.PIPE, text=True)
    with tempfile.TemporaryDirectory(prefix="parley-fw-") as work:
        got = {os.path.basename(p): run_parley(args.parley, args.model_dir, p,
                                               os.path.join(work, str(i)))
               for i, p in enumerate(paths)}
    out, _ = ref_proc.communicate()
    if ref_proc.returncode != 0:
        print(f"FAIL: faster-whisper exited {ref_proc.returncode}")
        return 1
    ref = {os.path.basename(r["file"]): r
           for r in (json.loads(line) for line in out.splitlines() if line.startswith("{"))}
    failures = [c for c in args.clips if not compare(c, ref[c], got[c], args.tol)]
    print(f"total {time.time() - t0:.1f}s")
    if failures:
        print(f"FAIL: {len(failures)}/{len(paths)} clips differ from faster-whisper: "
              f"{', '.join(failures)}")
        return 1
    print(f"OK: {len(paths)}/{len(paths)} clips match faster-whisper")
    return 0


if __name__ == "__main__":
    sys.exit(main())
