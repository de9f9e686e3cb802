#!/usr/bin/env python3
"""Runs openai-whisper's transcribe(word_timestamps=True) and prints one JSON line per file.

    openai_words_reference.py CHECKPOINT.pt FILE... [--language L] [--heads L:H,L:H...]
        [--hallucination-silence-threshold S] [--sample-len N] [--threads N]

As openai_reference.py (temperature 0, condition_on_previous_text, fp16=False, fp32 on the
CPU, language "en" on English-only models unless --language), with word_timestamps=True.
A checkpoint loaded from a file gets the reference's default alignment heads (every head
of the later half of the decoder layers); --heads sets others (e.g. the real tiny.en's
from its CTranslate2 config.json, which are _ALIGNMENT_HEADS["tiny.en"]). Each line:
    {"file", "text", "language", "segments": [{id, seek, start, end, text, tokens,
     avg_logprob, compression_ratio, no_speech_prob, temperature,
     words: [{word, start, end, probability}]}]}
"""
import argparse
import json
import sys

import torch
import whisper


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--language")
    ap.add_argument("--heads", help="alignment heads as layer:head,layer:head,...")
    ap.add_argument("--hallucination-silence-threshold", type=float)
    ap.add_argument("--sample-len", type=int, help="DecodingOptions.sample_len (tokens per window)")
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    model = whisper.load_model(args.checkpoint, device="cpu")
    model.float()
    if args.heads:
        mask = torch.zeros(model.dims.n_text_layer, model.dims.n_text_head, dtype=torch.bool)
        for pair in args.heads.split(","):
            layer, head = map(int, pair.split(":"))
            mask[layer, head] = True
        model.register_buffer("alignment_heads", mask.to_sparse(), persistent=False)
    for path in args.files:
        opts = dict(temperature=0.0, condition_on_previous_text=True, fp16=False,
                    word_timestamps=True, verbose=None,
                    hallucination_silence_threshold=args.hallucination_silence_threshold)
        if args.sample_len:
            opts["sample_len"] = args.sample_len
        if args.language:
            opts["language"] = args.language
        elif not model.is_multilingual:
            opts["language"] = "en"
        r = whisper.transcribe(model, path, **opts)
        keys = ("id", "seek", "start", "end", "text", "tokens", "avg_logprob",
                "compression_ratio", "no_speech_prob", "temperature", "words")
        out = {"file": path, "text": r["text"], "language": r.get("language"),
               "segments": [{k: s.get(k) for k in keys} for s in r["segments"]]}
        print(json.dumps(out, default=float), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
