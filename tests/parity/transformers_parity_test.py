#!/usr/bin/env python3
"""Live parity of parley against Hugging Face transformers on a synthetic Whisper model.

    transformers_parity_test.py PARLEY_BINARY DATA_DIR [--shape tiny] [--cache-dir DIR]
        [--clip jfk.wav] [--tol-mel 1e-4] [--tol-enc 1e-3] [--tol-logits-rel 3e-4]

Makes `parley synth whisper --shape SHAPE --seed 0` (Hugging Face layout, multilingual,
cached), runs `parley transcribe --language en -f verbose_json` and `parley whisper dump`
(mel, encoder, logits) on the clip, then tools/reference/transformers_reference.py on the
same directory (transformers 4.48.3, float32, eager attention) and checks:
  - mel: transformers' WhisperFeatureExtractor (the audio zero-padded to 30 s) against
    parley's first window on the audio's own frames (after them parley pads with zeros in
    the log-mel domain, as openai-whisper's transcribe() does; transformers computes the
    padding's log-mel), max|d| <= --tol-mel;
  - encoder output on parley's window: max|d| <= --tol-enc x max|x|;
  - decoder logits teacher-forced on parley's first-window tokens, every step:
    max|d| <= --tol-logits-rel x max|logit| (the synthetic weights give |logits| ~ 35);
  - model.generate() greedy tokens (timestamps, openai's suppress set) equal parley's.
Exits 77 (ctest SKIP_RETURN_CODE) when transformers / torch / openai-whisper are missing.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity_common import REF_DIR, SKIP, synth_model, transcribe_json  # noqa: E402

REF = os.path.join(REF_DIR, "transformers_reference.py")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("parley")
    ap.add_argument("data_dir")
    ap.add_argument("--shape", default="tiny")
    ap.add_argument("--cache-dir", default=os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "parley-ref"))
    ap.add_argument("--clip", default="jfk.wav")
    ap.add_argument("--tol-mel", type=float, default=1e-4)
    ap.add_argument("--tol-enc", type=float, default=1e-4)
    ap.add_argument("--tol-logits-rel", type=float, default=3e-4)
    args = ap.parse_args()
    try:
        import numpy as np
        import torch  # noqa: F401
        import transformers  # noqa: F401
        import whisper  # noqa: F401
    except Exception as e:  # noqa: BLE001
        print(f"SKIP: transformers / torch / openai-whisper not importable ({e}); "
              "run scripts/setup_reference.sh")
        return SKIP
    clip = os.path.join(args.data_dir, "audio", args.clip)
    if not os.path.exists(clip):
        print(f"SKIP: no clip {clip}")
        return SKIP
    t0 = time.time()
    os.makedirs(args.cache_dir, exist_ok=True)
    model = synth_model(args.parley, args.shape, 0,
                        os.path.join(args.data_dir, "whisper", "multilingual.tiktoken"),
                        args.cache_dir, prefix="transformers-synth-whisper")
    failures = []
    with tempfile.TemporaryDirectory(prefix="parley-hf-") as work:
        lang = ["--language", "en"]
        segments = transcribe_json(args.parley, model, clip, work, [
            *lang,
            # generate() is greedy: no temperature fallback
            "--temperature", "0", "--temperature-increment-on-fallback", "none"])["segments"]
        # The first window's sampled tokens as its segments hold them (a trailing part after
        # the last timestamp pair may be cut off, so this is a prefix of the sampled ones).
        sampled = [t for s in segments if s["seek"] == 0 for t in s["tokens"]]
        mine = {}
        for what in ("mel", "encoder", "logits"):
            out = os.path.join(work, f"parley.{what}.npy")
            subprocess.run([args.parley, "whisper", "dump", "--model", model, "--audio", clip,
                            "--what", what, "--out", out, *lang], check=True,
                           stdout=subprocess.DEVNULL)
            mine[what] = np.load(out).astype(np.float64)
        from whisper.tokenizer import get_tokenizer

        # <|startoftranscript|> <|en|> <|transcribe|>, as openai-whisper lays them out.
        initial = list(get_tokenizer(True, language="en", task="transcribe").sot_sequence)
        with open(os.path.join(work, "tokens.json"), "w") as f:
            json.dump({"initial": initial, "sampled": sampled}, f)
        ref_dir = os.path.join(work, "ref")
        subprocess.run([sys.executable, REF, model, clip, "--mel",
                        os.path.join(work, "parley.mel.npy"), "--tokens",
                        os.path.join(work, "tokens.json"), "--out-dir", ref_dir], check=True)
        ref = {w: np.load(os.path.join(ref_dir, f"{w}.npy")).astype(np.float64)
               for w in ("mel", "encoder", "logits")}
        with open(os.path.join(ref_dir, "generate.json")) as f:
            generated = json.load(f)["tokens"]

    # The audio's own frames: where parley's window is not the log-mel zero padding.
    nz = np.nonzero(np.any(mine["mel"] != 0, axis=0))[0]
    content = int(nz[-1]) + 1 if len(nz) else 0
    d_mel = float(np.abs(mine["mel"][:, :content] - ref["mel"][:, :content]).max())
    print(f"mel: {content} content frames, max|d| {d_mel:.3e} (tol {args.tol_mel:.0e})")
    if not d_mel <= args.tol_mel:
        failures.append("mel")
    enc_max = float(np.abs(ref["encoder"]).max())
    d_enc = float(np.abs(mine["encoder"] - ref["encoder"]).max())
    print(f"encoder: max|d| {d_enc:.3e} (max|x| {enc_max:.3g}, tol {args.tol_enc * enc_max:.2e})")
    if not d_enc <= args.tol_enc * enc_max:
        failures.append("encoder")
    n = min(len(mine["logits"]), len(ref["logits"]))
    lmax = float(np.abs(ref["logits"]).max())
    d_log = np.abs(mine["logits"][:n] - ref["logits"][:n]).max(axis=1)
    print(f"logits: {n} steps (parley {len(mine['logits'])}, teacher-forced {len(ref['logits'])}),"
          f" max|d| {d_log.max():.3e} at step {int(d_log.argmax())} (max|logit| {lmax:.3g}, "
          f"tol {args.tol_logits_rel * lmax:.2e})")
    if n < len(sampled) or not d_log.max() <= args.tol_logits_rel * lmax:
        failures.append("logits")
    same = generated[:len(sampled)] == sampled
    print(f"generate: {len(generated)} tokens, parley's first window {len(sampled)} "
          f"(segments' tokens): {'equal' if same else 'DIFFER'}")
    if not same:
        first = next((i for i, (a, b) in enumerate(zip(generated, sampled)) if a != b),
                     min(len(generated), len(sampled)))
        print(f"    first difference at {first}: transformers {generated[first:first + 6]} "
              f"parley {sampled[first:first + 6]}")
        failures.append("generate")
    print(f"total {time.time() - t0:.1f}s")
    if failures:
        print(f"FAIL: {', '.join(failures)} differ from transformers")
        return 1
    print(f"OK: parley matches transformers on synthetic {args.shape} ({args.clip})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
