#!/usr/bin/env python3
"""Whisper on the CPU, whole processes: parley f32 / int8, faster-whisper, whisper.cpp (not a test).

    .venv-ref/bin/python bench/whisper_cpu.py [--parley build/parley] [--model DIR]
        [--clips jfk.wav silero_test.wav] [--beams 1 5] [--runs 3] [--threads 2]
        [--short-files 100] [--whispercpp BIN --whispercpp-model FILE] [--engines NAME...]

For every clip (from ../shared/data/audio) and beam size, times whole processes, median of
--runs, in one interleaved loop (so a busy moment hits every engine alike). The workload
"short<N>" (--short-files N, 0: none) is N short files in one process: 2-6 s pieces cut at
seeded offsets from jfk.wav and silero_test.wav (written as 16 kHz WAV to a temporary
folder, the same files for every engine), each engine given all of them at once:
- parley: `parley transcribe --dtype f32|int8 --beam-size B --threads T -f json FILE` (beam 1:
  greedy, `--beam-size 0`), every file of a workload on one command line (greedy batches
  them, `--batch-size` 16);
- faster-whisper (CTranslate2, PyPI): a Python process that loads the same CTranslate2
  tiny.en folder with compute_type int8 or float32 and cpu_threads T, and transcribes the
  files one after the other (beam_size B, temperature 0, language "en", no VAD), consuming
  every segment;
- whisper.cpp (tools/cpu/whispercpp.sh builds it and the ggml files; its rows are left out
  while the default --whispercpp / --whispercpp-model are not there):
  `whisper-cli -m FILE -t T -l en -bs B -sns -np -f FILE [-f FILE ...]` (-bs 1: greedy; whisper.cpp's own
  defaults otherwise, as openai-whisper's: temperature 0 with the 0.2 fallback ladder, best_of
  5 when sampling, timestamps predicted; -sns suppresses the non-speech tokens as
  suppress_tokens="-1" does), its text the segments' text without the printed times.
--engines keeps only the named engines (parley_f32 parley_int8 parley_int8_encoder
faster_whisper_int8 faster_whisper_f32 whisper_cpp; parley_int8_encoder is `--dtype int8
--int8-encoder`). Prints one JSON line per (clip, beam, engine) with the median and all wall
times, and the transcript's text (to compare), then one summary line per (clip, beam) with
the ratios of each parley int8 engine to faster-whisper int8 and f32, whisper.cpp and parley
f32 (< 1: parley int8 faster), those whose two engines ran.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import random
import shutil
import tempfile
import time
import wave

HERE = os.path.dirname(os.path.abspath(__file__))
WCPP_DIR = os.path.join(HERE, "..", ".deps", "whispercpp-cpu")  # tools/cpu/whispercpp.sh's

FW = r"""
import sys
from faster_whisper import WhisperModel
model_dir, compute, beam, threads = sys.argv[1:5]
m = WhisperModel(model_dir, device="cpu", compute_type=compute, cpu_threads=int(threads))
for path in sys.argv[5:]:
    segs, _ = m.transcribe(path, beam_size=int(beam), temperature=0.0, language="en",
                           vad_filter=False, condition_on_previous_text=True)
    print("".join(s.text for s in segs))
"""


def short_files(data, n, folder):
    """n WAV pieces of 2-6 s (16 kHz mono s16) cut at seeded offsets from jfk.wav and
    silero_test.wav, written to folder; their paths."""
    sources = []
    for clip in ("jfk.wav", "silero_test.wav"):
        with wave.open(os.path.join(data, "audio", clip)) as w:
            assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (16000, 1, 2), clip
            sources.append(w.readframes(w.getnframes()))
    rng = random.Random(28)
    paths = []
    for i in range(n):
        pcm = sources[i % 2]
        length = rng.randint(2 * 16000, 6 * 16000)
        start = rng.randint(0, len(pcm) // 2 - length)
        path = os.path.join(folder, f"short{i:03d}.wav")
        with wave.open(path, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(16000)
            w.writeframes(pcm[2 * start:2 * (start + length)])
        paths.append(path)
    return paths


def timed(cmd):
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(" ".join(cmd) + ": " + out.stderr[-500:])
    return dt, out.stdout


def whispercpp_text(out):
    """The segments' text from whisper-cli's stdout ("[00:00:00.000 --> 00:00:11.000]   And so")."""
    return "".join(re.sub(r"^\[[^]]*-->[^]]*\]  ", "", line) for line in out.splitlines())


def run_workload(args, engines, clip, files, beam):
    """Times every engine on files with beam size beam; prints its rows and the summary."""
    times = {e: [] for e in engines}
    texts = {}
    for _ in range(args.runs):
        for name, cmd in engines.items():
            dt, out = timed(cmd(files, beam))
            times[name].append(dt)
            if name.startswith("parley"):
                out = " ".join(json.loads(line)["text"].strip() for line in out.splitlines()
                               if line.strip())
            elif name == "whisper_cpp":
                out = whispercpp_text(out)
            else:
                out = " ".join(line.strip() for line in out.splitlines())
            texts[name] = out.strip()
    med = {e: statistics.median(v) for e, v in times.items()}
    for e in engines:
        row = {"clip": clip, "files": len(files), "beam": beam, "engine": e,
               "median_s": round(med[e], 3), "runs_s": [round(v, 3) for v in times[e]],
               "threads": args.threads, "text": texts[e]}
        if e == "whisper_cpp":
            row["model"] = os.path.basename(args.whispercpp_model)
        print(json.dumps(row), flush=True)
    summary = {"clip": clip, "beam": beam, "summary": True}
    for mine in ("parley_int8", "parley_int8_encoder"):
        for other in ("faster_whisper_int8", "faster_whisper_f32", "whisper_cpp", "parley_f32"):
            if mine in med and other in med:
                summary[mine + "_over_" + other] = round(med[mine] / med[other], 3)
        if mine in texts and "parley_f32" in texts:
            summary["same_text_" + mine[7:] + "_f32"] = texts[mine] == texts["parley_f32"]
    print(json.dumps(summary), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parley", default="build/parley")
    ap.add_argument("--model", default=os.path.expanduser(
        "~/.local/share/parley/models/whisper-tiny.en"))
    ap.add_argument("--data", default=os.path.join(HERE, "..", "..", "shared", "data"))
    ap.add_argument("--clips", nargs="*", default=["jfk.wav", "silero_test.wav"])
    ap.add_argument("--beams", type=int, nargs="+", default=[1, 5])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--whispercpp", default=os.path.join(WCPP_DIR, "build", "whisper-cli"))
    ap.add_argument("--whispercpp-model",
                    default=os.path.join(WCPP_DIR, "ggml-tiny.en-q8_0.bin"))
    ap.add_argument("--short-files", type=int, default=100)
    ap.add_argument("--engines", nargs="+")
    args = ap.parse_args()

    def parley(dtype, *extra):
        return lambda fs, b: [args.parley, "transcribe", "--model", args.model, "--dtype", dtype,
                              *extra, "--beam-size", str(b if b > 1 else 0), "--threads",
                              str(args.threads), "-f", "json", *fs]

    def faster_whisper(compute_type):
        return lambda fs, b: [sys.executable, "-c", FW, args.model, compute_type, str(b),
                              str(args.threads), *fs]

    def whisper_cpp(fs, b):
        cmd = [args.whispercpp, "-m", args.whispercpp_model, "-t", str(args.threads), "-l", "en",
               "-bs", str(b), "-sns", "-np"]
        for f in fs:
            cmd += ["-f", f]
        return cmd

    engines = {
        "parley_f32": parley("f32"),
        "parley_int8": parley("int8"),
        "parley_int8_encoder": parley("int8", "--int8-encoder"),
        "faster_whisper_int8": faster_whisper("int8"),
        "faster_whisper_f32": faster_whisper("float32"),
        "whisper_cpp": whisper_cpp,
    }
    if not (os.path.exists(args.whispercpp) and os.path.exists(args.whispercpp_model)):
        print(f"whisper_cpu: no {args.whispercpp} or {args.whispercpp_model} "
              "(tools/cpu/whispercpp.sh): no whisper.cpp rows", file=sys.stderr)
        del engines["whisper_cpp"]
    if args.engines:
        unknown = set(args.engines) - set(engines)
        if unknown:
            raise SystemExit(f"whisper_cpu: unknown or unavailable engines {sorted(unknown)}")
        engines = {e: engines[e] for e in args.engines}
    workloads = [(clip, [os.path.join(args.data, "audio", clip)]) for clip in args.clips]
    tmp = tempfile.mkdtemp(prefix="whisper_cpu_")
    try:
        if args.short_files > 0:
            workloads.append((f"short{args.short_files}",
                              short_files(args.data, args.short_files, tmp)))
        for clip, files in workloads:
            for beam in args.beams:
                run_workload(args, engines, clip, files, beam)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
