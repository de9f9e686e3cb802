#!/usr/bin/env python3
"""Float64 evaluation of an openai-whisper checkpoint on one window: the yardstick for how
far fp32 logits (openai-whisper's own and parley's) are from exact arithmetic.

    openai_f64_logits.py CHECKPOINT.pt MEL.npy --tokens T0,T1,... [--language en]
        [--out F64_LOGITS.npy] [--compare A.npy B.npy ...]

Runs the encoder on MEL (f32 [n_mels, 3000], e.g. a reference or `parley whisper dump`
mel), then the decoder teacher-forced (one pass, no KV cache) on sot_sequence(language,
transcribe) + TOKENS, all in float64 (whisper's LayerNorm, which forces float32, is made
dtype-preserving). Row i of the result is the logits after the i-th token following the
sot sequence's last, i.e. the layout of openai_reference.py --dump-dir / `parley whisper
dump --what logits` (row 0 at the last initial token). For each --compare file prints
max|d| against it over the common rows.
"""
import argparse
import sys

import numpy as np
import torch
import torch.nn as nn
import whisper


def f64_logits(model, mel, tokens, language, device="cpu"):
    whisper.model.LayerNorm.forward = lambda self, x: nn.LayerNorm.forward(self, x)
    tok = whisper.tokenizer.get_tokenizer(model.is_multilingual,
                                          num_languages=model.num_languages,
                                          language=language, task="transcribe")
    init = list(tok.sot_sequence)
    m = model.double()
    with torch.no_grad():
        af = m.encoder(torch.from_numpy(np.asarray(mel)).double()[None].to(device))
        lg = m.logits(torch.tensor([init + list(tokens)], device=device), af)[0, len(init) - 1:]
    return lg.cpu().numpy()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("mel")
    ap.add_argument("--tokens", required=True, help="comma-separated sampled tokens")
    ap.add_argument("--language", default="en")
    ap.add_argument("--out")
    ap.add_argument("--compare", nargs="*", default=[])
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="where the float64 evaluation runs")
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    model = whisper.load_model(a.checkpoint, device=a.device)
    tokens = [int(t) for t in a.tokens.split(",") if t]
    lg = f64_logits(model, np.load(a.mel), tokens, a.language, a.device)
    if a.out:
        np.save(a.out, lg)
    for path in a.compare:
        b = np.load(path).astype(np.float64)
        n = min(len(b), len(lg))
        print(f"{path}: max|d| vs float64 {np.abs(b[:n] - lg[:n]).max():.3e} over {n} rows "
              f"(max|logit| {np.abs(lg[:n]).max():.3g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
