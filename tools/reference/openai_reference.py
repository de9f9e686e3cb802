#!/usr/bin/env python3
"""Runs openai-whisper (the reference) on audio files and prints one JSON line per file.

    openai_reference.py CHECKPOINT.pt FILE... [--dump-dir DIR] [--threads N] [--language L]
        [--device cpu|cuda]

CHECKPOINT is an openai-whisper checkpoint (tools/reference/ct2_to_openai.py makes one
from a CTranslate2 model.bin, hf_to_openai.py from a Hugging Face layout). Each file goes
through
    whisper.transcribe(model, path, temperature=0.0, condition_on_previous_text=True,
                       fp16=False, word_timestamps=False, verbose=None, language="en" on
                       English-only models, or language=L with --language L; otherwise
                       the language is detected from the first window)
fp32 on the CPU (or, with --device cuda, fp32 on the GPU with TF32 off, for large shapes on
the GPU machine); the audio is decoded by whisper.load_audio, i.e. the ffmpeg CLI
(ffmpeg -i FILE -f s16le -ac 1 -ar 16000), as parley's decoder reproduces. Each line:
    {"file", "text", "language", "segments": [{id, seek, start, end, text, tokens,
     avg_logprob, compression_ratio, no_speech_prob, temperature}]}
With --dump-dir, also writes for each file the first window's intermediates as .npy,
named <stem>.<ext>.{mel,encoder,logits}.npy, in the shapes `parley whisper dump` writes:
    mel      f32 [n_mels, 3000]   the first window the decoder sees (zero-padded log-mel)
    encoder  f32 [n_audio_ctx, d] its audio features
    logits   f32 [steps, n_vocab] the raw logits row (before the logit filters) at every
             step of that window's first (temperature 0) decode; row 0 is at the last
             initial token
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
import whisper
import whisper.decoding
import whisper.model


class _Recorder:
    """Captures the first decode() call of a transcribe(): mel, encoder, raw logit rows."""

    def __init__(self):
        self.active = False
        self.reset()

    def reset(self):
        self.calls = 0
        self.mel = None
        self.encoder = None
        self.rows = []

    def install(self):
        rec = self
        orig_decode = whisper.model.Whisper.decode
        orig_logits = whisper.decoding.PyTorchInference.logits

        def decode(model, mel, options=whisper.decoding.DecodingOptions(), **kw):
            first = rec.active and rec.calls == 0
            rec.calls += 1
            if first:
                rec.mel = mel.detach().float().cpu().numpy().copy()
                rec.recording = True
                hook = model.encoder.register_forward_hook(
                    lambda m, i, o: setattr(rec, "encoder", o.detach().float().cpu().numpy().copy())
                )
            try:
                return orig_decode(model, mel, options, **kw)
            finally:
                if first:
                    rec.recording = False
                    hook.remove()

        def logits(inference, tokens, audio_features):
            out = orig_logits(inference, tokens, audio_features)
            if rec.active and getattr(rec, "recording", False):
                rec.rows.append(out[0, -1].detach().float().cpu().numpy().copy())
            return out

        whisper.model.Whisper.decode = decode
        whisper.decoding.PyTorchInference.logits = logits


def transcribe(model, path, language=None):
    opts = dict(temperature=0.0, condition_on_previous_text=True, fp16=False,
                word_timestamps=False, verbose=None)
    if language:
        opts["language"] = language
    elif not model.is_multilingual:
        opts["language"] = "en"
    r = whisper.transcribe(model, path, **opts)
    keys = ("id", "seek", "start", "end", "text", "tokens", "avg_logprob",
            "compression_ratio", "no_speech_prob", "temperature")
    return {
        "file": path,
        "text": r["text"],
        "language": r.get("language"),
        "segments": [{k: s[k] for k in keys} for s in r["segments"]],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--dump-dir", help="write <file>.{mel,encoder,logits}.npy here")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: default)")
    ap.add_argument("--language", help="force this language (default: en on English-only "
                    "models, else detected from the first window)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="where the model runs (cuda: fp32, TF32 off)")
    args = ap.parse_args()
    if args.device == "cuda":
        # fp32 parity: no TF32 in matmuls or in the encoder's convolutions.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    rec = _Recorder()
    if args.dump_dir:
        os.makedirs(args.dump_dir, exist_ok=True)
        rec.install()
    model = whisper.load_model(args.checkpoint, device=args.device)
    model.float()
    for path in args.files:
        rec.reset()
        rec.active = bool(args.dump_dir)
        out = transcribe(model, path, args.language)
        rec.active = False
        if args.dump_dir and rec.mel is not None:
            base = os.path.join(args.dump_dir, os.path.basename(path))
            np.save(base + ".mel.npy", rec.mel.astype(np.float32))
            np.save(base + ".encoder.npy", rec.encoder[0].astype(np.float32))
            np.save(base + ".logits.npy", np.stack(rec.rows).astype(np.float32))
        print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
