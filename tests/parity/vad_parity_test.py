#!/usr/bin/env python3
"""Live parity of `parley vad` against silero-vad 6.2.1 + onnxruntime on the same files.

    vad_parity_test.py PARLEY_BINARY DATA_DIR [--cases NAME...]

For every case (clip, sample rate, model file) runs tools/reference/vad_reference.py
(onnxruntime on the same ONNX file through silero-vad's OnnxWrapper, get_speech_timestamps
and VADIterator; for the safetensors export, silero-vad's tinygrad model in torch ops) and
`parley vad --json --probs --events`, and requires: the same number of samples, every
chunk's probability within --tol (1e-4), the same number of segments with each start and
end within one chunk, and the same streaming events within one chunk. Prints the measured
maximum differences. Exit 1 on any mismatch, 77 (ctest SKIP_RETURN_CODE) when
onnxruntime / silero-vad (scripts/setup_reference.sh) or the data is missing.
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity_common import REF_DIR, skip  # noqa: E402

sys.path.insert(0, REF_DIR)

V62 = "vad/silero_vad_v6.2.onnx"
V512 = "vad/silero_vad_v5.1.2.onnx"
ST = "vad/silero_vad_v6.2_16k.safetensors"
# get_speech_timestamps keyword -> `parley vad` flag.
FLAGS = {"threshold": "--threshold", "neg_threshold": "--neg-threshold",
         "min_speech_duration_ms": "--min-speech-ms", "min_silence_duration_ms":
         "--min-silence-ms", "speech_pad_ms": "--speech-pad-ms",
         "max_speech_duration_s": "--max-speech-s"}
# Non-default segmentation: long segments split (at the longest inner silence, or hard),
# other thresholds and padding; the streaming iterator follows threshold, silence, pad.
OPTS_A = {"max_speech_duration_s": 3.0, "min_silence_duration_ms": 300, "speech_pad_ms": 100}
OPTS_B = {"threshold": 0.3, "neg_threshold": 0.2, "max_speech_duration_s": 1.5,
          "min_speech_duration_ms": 100, "speech_pad_ms": 250}
# name: (clip, sample rate, model[, get_speech_timestamps options])
CASES = {
    "jfk-16k": ("audio/jfk.wav", 16000, V62),
    "silero_test-16k": ("audio/silero_test.wav", 16000, V62),
    "multilingual-16k": ("audio/multilingual.mp3", 16000, V62),
    "jfk-8k": ("audio/jfk.wav", 8000, V62),
    "silero_test-8k": ("audio/silero_test.wav", 8000, V62),
    "jfk-16k-v5.1.2": ("audio/jfk.wav", 16000, V512),
    "jfk-8k-v5.1.2": ("audio/jfk.wav", 8000, V512),
    "silero_test-16k-safetensors": ("audio/silero_test.wav", 16000, ST),
    "silero_test-16k-split": ("audio/silero_test.wav", 16000, V62, OPTS_A),
    "multilingual-16k-split": ("audio/multilingual.mp3", 16000, V62, OPTS_B),
    "jfk-8k-split": ("audio/jfk.wav", 8000, V62, OPTS_B),
}


def run_parley(binary, audio, model, rate, opts):
    cmd = [binary, "vad", audio, "--model", model, "--sample-rate", str(rate), "--json",
           "--probs", "--events"]
    for k, v in opts.items():
        cmd += [FLAGS[k], str(v)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr}")
    return json.loads(out.stdout)


def within_chunk(a, b, window):
    return abs(a - b) <= window


def compare(name, ref, got, rate, tol):
    window = 512 if rate == 16000 else 256
    errors = []
    if ref["samples"] != got["samples"]:
        errors.append(f"samples: reference {ref['samples']}, parley {got['samples']}")
        return errors, float("nan")
    if len(ref["probs"]) != len(got["probs"]):
        errors.append(f"chunks: reference {len(ref['probs'])}, parley {len(got['probs'])}")
        return errors, float("nan")
    diffs = [abs(a - b) for a, b in zip(ref["probs"], got["probs"])]
    worst = max(diffs) if diffs else 0.0
    if worst > tol:
        k = diffs.index(worst)
        errors.append(f"probability of chunk {k}: reference {ref['probs'][k]:.6f}, parley "
                      f"{got['probs'][k]:.6f} (|diff| {worst:.2e} > {tol:g})")
    rs, gs = ref["segments"], got["segments"]
    if len(rs) != len(gs):
        errors.append(f"{len(rs)} reference segments, {len(gs)} parley segments: {rs} vs "
                      f"{[{'start': s['start'], 'end': s['end']} for s in gs]}")
    else:
        for i, (r, g) in enumerate(zip(rs, gs)):
            if not (within_chunk(r["start"], g["start"], window)
                    and within_chunk(r["end"], g["end"], window)):
                errors.append(f"segment {i}: reference [{r['start']}, {r['end']}), parley "
                              f"[{g['start']}, {g['end']})")
    re_, ge = ref["events"], got["events"]
    if len(re_) != len(ge) or any(r["kind"] != g["kind"] or
                                  not within_chunk(r["sample"], g["sample"], window)
                                  for r, g in zip(re_, ge)):
        errors.append(f"streaming events differ: reference {re_}, parley {ge}")
    return errors, worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("parley")
    ap.add_argument("data_dir")
    ap.add_argument("--cases", nargs="*", default=list(CASES))
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args()

    try:
        import onnxruntime  # noqa: F401
        import vad_reference
        vad_reference.import_silero_vad()
    except ImportError as e:
        skip(f"{e}; run scripts/setup_reference.sh")
    for name in args.cases:
        clip, _, model = CASES[name][:3]
        for f in (clip, model):
            if not os.path.exists(os.path.join(args.data_dir, f)):
                skip(f"missing {os.path.join(args.data_dir, f)}")

    failed = False
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for name in args.cases:
            clip, rate, model = CASES[name][:3]
            opts = CASES[name][3] if len(CASES[name]) > 3 else {}
            audio = os.path.join(args.data_dir, clip)
            model_path = os.path.join(args.data_dir, model)
            t = time.time()
            got_f = pool.submit(run_parley, args.parley, audio, model_path, rate, opts)
            ref = vad_reference.reference(audio, model_path, rate, opts)
            got = got_f.result()
            errors, worst = compare(name, ref, got, rate, args.tol)
            status = "FAIL" if errors else "ok"
            print(f"{status} {name}: {len(ref['probs'])} chunks, max |prob diff| {worst:.2e}, "
                  f"{len(ref['segments'])} segments, {len(ref['events'])} events "
                  f"({time.time() - t:.1f} s)")
            for e in errors:
                print(f"    {e}")
            failed |= bool(errors)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
