#!/usr/bin/env python3
"""onnxruntime's speed on a Silero VAD ONNX model, one thread: the anchor for
`parley vad --json --runs N` in bench/RESULTS.md.

    vad_ort_bench.py MODEL.onnx AUDIO.wav [--runs 3]

AUDIO must be 16 kHz mono PCM s16. A plain loop over session.run with 64 context samples
and the state carried, as silero-vad's OnnxWrapper does (without its torch overhead).
Prints one JSON line: wall and CPU seconds per run.
"""
import argparse
import json
import time
import wave

import numpy as np
import onnxruntime as ort


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("audio")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    opts = ort.SessionOptions()
    opts.inter_op_num_threads = 1
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(args.model, providers=["CPUExecutionProvider"], sess_options=opts)
    with wave.open(args.audio) as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2
        a = np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float32) / 32768
    runs = []
    for _ in range(args.runs):
        state = np.zeros((2, 1, 128), np.float32)
        ctx = np.zeros((1, 64), np.float32)
        sr = np.array(16000, np.int64)
        t, c = time.perf_counter(), time.process_time()
        for i in range(0, len(a) - 511, 512):
            x = np.concatenate([ctx, a[None, i:i + 512]], 1)
            _, state = sess.run(None, {"input": x, "state": state, "sr": sr})
            ctx = x[:, -64:]
        runs.append({"wall_s": time.perf_counter() - t, "cpu_s": time.process_time() - c})
    print(json.dumps({"onnxruntime": ort.__version__, "audio_s": len(a) / 16000, "runs": runs}))


if __name__ == "__main__":
    main()
