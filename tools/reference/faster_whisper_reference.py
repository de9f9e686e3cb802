#!/usr/bin/env python3
"""Runs faster-whisper (CTranslate2) on audio files and prints one JSON line per file.

    faster_whisper_reference.py MODEL_DIR FILE... [--device cpu|cuda] [--compute-type float32]
        [--language L] [--threads N]

MODEL_DIR is a CTranslate2 Whisper directory (model.bin, config.json, tokenizer.json), such
as the real tiny.en. Each file is decoded as openai-whisper's load_audio does (the ffmpeg CLI:
-f s16le -ac 1 -acodec pcm_s16le -ar 16000, divided by 32768; the samples parley's decoder
reproduces) and passed to WhisperModel.transcribe as an array, with the options that make it
follow openai-whisper's transcribe() as parley does:
    beam_size=1, best_of=1, temperature=0.0 (greedy, no fallback: openai_reference.py's
    setting and `parley transcribe`'s default; sampling at temperature > 0 draws from each
    implementation's own random generator, so it cannot be compared token for token),
    condition_on_previous_text=True, without_timestamps=False, vad_filter=False,
    word_timestamps=False, compression_ratio_threshold=2.4, log_prob_threshold=-1.0,
    no_speech_threshold=0.6, language="en" on English-only models (or L)
Each line has the shape openai_reference.py prints:
    {"file", "text", "language", "segments": [{id, seek, start, end, text, tokens,
     avg_logprob, compression_ratio, no_speech_prob, temperature}]}
(faster-whisper's seek is in frames, as openai's; tokens hold the segment's timestamp tokens
as openai's do.)
"""
import argparse
import json
import subprocess
import sys

import numpy as np


def load_audio(path, sr=16000):
    """openai-whisper whisper/audio.py load_audio: the ffmpeg CLI, s16le mono 16 kHz."""
    cmd = ["ffmpeg", "-nostdin", "-threads", "0", "-i", path, "-f", "s16le", "-ac", "1",
           "-acodec", "pcm_s16le", "-ar", str(sr), "-"]
    out = subprocess.run(cmd, capture_output=True, check=True).stdout
    return np.frombuffer(out, np.int16).flatten().astype(np.float32) / 32768.0


def transcribe(model, path, language):
    segments, info = model.transcribe(
        load_audio(path), language=language, task="transcribe", beam_size=1, best_of=1,
        temperature=0.0, condition_on_previous_text=True,
        without_timestamps=False, vad_filter=False, word_timestamps=False,
        compression_ratio_threshold=2.4, log_prob_threshold=-1.0, no_speech_threshold=0.6)
    segs = []
    for s in segments:  # a generator: decoding happens here
        segs.append({"id": s.id, "seek": s.seek, "start": s.start,
                     "end": s.end, "text": s.text, "tokens": list(s.tokens),
                     "avg_logprob": s.avg_logprob, "compression_ratio": s.compression_ratio,
                     "no_speech_prob": s.no_speech_prob, "temperature": s.temperature})
    return {"file": path, "text": "".join(s["text"] for s in segs),
            "language": info.language, "segments": segs}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--compute-type", default="float32")
    ap.add_argument("--language", help="force this language (default: en on English-only "
                    "models, else detected)")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: CTranslate2's)")
    args = ap.parse_args()
    from faster_whisper import WhisperModel

    model = WhisperModel(args.model_dir, device=args.device, compute_type=args.compute_type,
                         cpu_threads=args.threads)
    language = args.language or (None if model.model.is_multilingual else "en")
    for path in args.files:
        print(json.dumps(transcribe(model, path, language)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
