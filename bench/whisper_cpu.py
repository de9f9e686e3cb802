#!/usr/bin/env python3
"""Whisper on the CPU, whole processes: parley f32 and int8 beside faster-whisper (not a test).

    .venv-ref/bin/python bench/whisper_cpu.py [--parley build/parley] [--model DIR]
        [--clips jfk.wav silero_test.wav] [--beams 1 5] [--runs 3] [--threads 2]

For every clip (from ../shared/data/audio) and beam size, times whole processes, median of
--runs, in one interleaved loop (so a busy moment hits every engine alike):
- parley: `parley transcribe --dtype f32|int8 --beam-size B --threads T -f json FILE` (beam 1:
  greedy, `--beam-size 0`);
- faster-whisper (CTranslate2, PyPI): a Python process that loads the same CTranslate2
  tiny.en folder with compute_type int8 or float32 and cpu_threads T, and transcribes the
  file (beam_size B, temperature 0, language "en", no VAD), consuming every segment.
Prints one JSON line per (clip, beam, engine) with the median and all wall times, and the
transcript's text (to compare), then one summary line per (clip, beam) with the ratios
parley int8 / faster-whisper int8 and parley int8 / parley f32 (< 1: parley int8 faster).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

FW = r"""
import sys
from faster_whisper import WhisperModel
model_dir, path, compute, beam, threads = sys.argv[1:6]
m = WhisperModel(model_dir, device="cpu", compute_type=compute, cpu_threads=int(threads))
segs, _ = m.transcribe(path, beam_size=int(beam), temperature=0.0, language="en",
                       vad_filter=False, condition_on_previous_text=True)
print("".join(s.text for s in segs))
"""


def timed(cmd):
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(" ".join(cmd) + ": " + out.stderr[-500:])
    return dt, out.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parley", default="build/parley")
    ap.add_argument("--model", default=os.path.expanduser(
        "~/.local/share/parley/models/whisper-tiny.en"))
    ap.add_argument("--data", default=os.path.join(HERE, "..", "..", "shared", "data"))
    ap.add_argument("--clips", nargs="+", default=["jfk.wav", "silero_test.wav"])
    ap.add_argument("--beams", type=int, nargs="+", default=[1, 5])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    engines = {
        "parley_f32": lambda f, b: [args.parley, "transcribe", "--model", args.model, "--dtype",
                                    "f32", "--beam-size", str(b if b > 1 else 0), "--threads",
                                    str(args.threads), "-f", "json", f],
        "parley_int8": lambda f, b: [args.parley, "transcribe", "--model", args.model, "--dtype",
                                     "int8", "--beam-size", str(b if b > 1 else 0), "--threads",
                                     str(args.threads), "-f", "json", f],
        "faster_whisper_int8": lambda f, b: [sys.executable, "-c", FW, args.model, f, "int8",
                                             str(b), str(args.threads)],
        "faster_whisper_f32": lambda f, b: [sys.executable, "-c", FW, args.model, f, "float32",
                                            str(b), str(args.threads)],
    }
    for clip in args.clips:
        path = os.path.join(args.data, "audio", clip)
        for beam in args.beams:
            times = {e: [] for e in engines}
            texts = {}
            for _ in range(args.runs):
                for name, cmd in engines.items():
                    dt, out = timed(cmd(path, beam))
                    times[name].append(dt)
                    if name.startswith("parley"):
                        out = json.loads(out)["text"]
                    texts[name] = out.strip()
            med = {e: statistics.median(v) for e, v in times.items()}
            for e in engines:
                print(json.dumps({"clip": clip, "beam": beam, "engine": e,
                                  "median_s": round(med[e], 3),
                                  "runs_s": [round(v, 3) for v in times[e]],
                                  "threads": args.threads, "text": texts[e]}), flush=True)
            print(json.dumps({
                "clip": clip, "beam": beam, "summary": True,
                "parley_int8_over_faster_whisper_int8":
                    round(med["parley_int8"] / med["faster_whisper_int8"], 3),
                "parley_int8_over_faster_whisper_f32":
                    round(med["parley_int8"] / med["faster_whisper_f32"], 3),
                "parley_int8_over_parley_f32": round(med["parley_int8"] / med["parley_f32"], 3),
                "same_text_int8_f32": texts["parley_int8"] == texts["parley_f32"]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
