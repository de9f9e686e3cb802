#!/usr/bin/env python3
"""Runs openai-whisper (the reference) on (file, transcribe options) cases, one model load.

    openai_cases.py CHECKPOINT.pt CASES.json [--threads N]

CASES.json: [{"id": str, "file": path, "options": {transcribe() keyword arguments},
"seed": optional int (torch.manual_seed, default 0)}, ...].
Every case runs
    whisper.transcribe(model, file, fp16=False, word_timestamps=False, verbose=None,
                       **options)
fp32 on the CPU (language "en" on English-only models unless the options name one), and
prints one JSON line {"id", "file", "text", "language", "segments": [{id, seek, start, end,
text, tokens, avg_logprob, compression_ratio, no_speech_prob, temperature}]}. A "temperature"
given as a list becomes the tuple transcribe() expects. torch.manual_seed(seed) before each
case (sampled results are still not comparable with parley's token by token: see
src/whisper/sampling.h).
"""
import argparse
import json
import sys

import torch
import whisper


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("cases")
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    with open(args.cases) as f:
        cases = json.load(f)
    model = whisper.load_model(args.checkpoint, device="cpu")
    model.float()
    keys = ("id", "seek", "start", "end", "text", "tokens", "avg_logprob",
            "compression_ratio", "no_speech_prob", "temperature")
    for case in cases:
        opts = dict(fp16=False, word_timestamps=False, verbose=None)
        opts.update(case["options"])
        if isinstance(opts.get("temperature"), list):
            opts["temperature"] = tuple(opts["temperature"])
        if "language" not in opts and not model.is_multilingual:
            opts["language"] = "en"
        torch.manual_seed(case.get("seed", 0))
        r = whisper.transcribe(model, case["file"], **opts)
        print(json.dumps({"id": case["id"], "file": case["file"], "text": r["text"],
                          "language": r.get("language"),
                          "segments": [{k: s[k] for k in keys} for s in r["segments"]]}),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
