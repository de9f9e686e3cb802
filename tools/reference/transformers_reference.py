#!/usr/bin/env python3
"""Runs Hugging Face transformers' Whisper on one window and writes its intermediates.

    transformers_reference.py MODEL_DIR AUDIO --mel MEL.npy --tokens JSON --out-dir DIR
        [--device cpu|cuda] [--language en] [--max-new-tokens N]

MODEL_DIR is a Hugging Face layout (config.json + model.safetensors), e.g. from `parley synth
whisper`. WhisperForConditionalGeneration runs in float32 with eager attention (transformers
4.48.3 on Debian's torch 1.13; its sdpa path needs torch 2). Writes into DIR:
  mel.npy      f32 [n_mels, 3000]: WhisperFeatureExtractor on AUDIO (decoded by the ffmpeg CLI
               as openai-whisper's load_audio), i.e. the log-mel of the audio zero-padded to
               30 s (transformers' own NumPy STFT)
  encoder.npy  f32 [n_audio_ctx, d]: the encoder on MEL.npy (the window parley decoded)
  logits.npy   f32 [steps, n_vocab]: decoder logits teacher-forced on the token list in
               JSON (initial tokens, then the sampled ones), one row per position from the
               last initial token on, as `parley whisper dump --what logits` writes them
  generate.json {"tokens": [...]}: model.generate() on MEL.npy, greedy (num_beams=1,
               do_sample=False), with timestamps, language forced, openai's suppress set
               (non-speech tokens + specials, from openai-whisper's tokenizer) and
               begin-suppress [space, <|endoftext|>], max initial timestamp 1.0 s: the
               sampled tokens after the initial ones (up to <|endoftext|> exclusive)
JSON is {"initial": [...], "sampled": [...]}.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np


def load_audio(path, sr=16000):
    cmd = ["ffmpeg", "-nostdin", "-threads", "0", "-i", path, "-f", "s16le", "-ac", "1",
           "-acodec", "pcm_s16le", "-ar", str(sr), "-"]
    out = subprocess.run(cmd, capture_output=True, check=True).stdout
    return np.frombuffer(out, np.int16).flatten().astype(np.float32) / 32768.0


def openai_suppress_tokens(multilingual, num_languages):
    """openai-whisper decoding.py _get_suppress_tokens for suppress_tokens="-1"."""
    from whisper.tokenizer import get_tokenizer

    tok = get_tokenizer(multilingual, num_languages=num_languages)
    s = set(tok.non_speech_tokens)
    s.update([tok.transcribe, tok.translate, tok.sot, tok.sot_prev, tok.sot_lm, tok.no_speech])
    return sorted(s), tok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("audio")
    ap.add_argument("--mel", required=True)
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--language", default="en")
    ap.add_argument("--max-new-tokens", type=int, default=224)
    args = ap.parse_args()

    import torch
    from transformers import (GenerationConfig, WhisperFeatureExtractor,
                              WhisperForConditionalGeneration)

    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 parity
        torch.backends.cudnn.allow_tf32 = False
    os.makedirs(args.out_dir, exist_ok=True)
    model = WhisperForConditionalGeneration.from_pretrained(
        args.model_dir, attn_implementation="eager", torch_dtype=torch.float32)
    model.eval().to(args.device)
    cfg = model.config
    fe = WhisperFeatureExtractor(feature_size=cfg.num_mel_bins)
    mel_hf = fe(load_audio(args.audio), sampling_rate=16000, return_tensors="np").input_features[0]
    np.save(os.path.join(args.out_dir, "mel.npy"), mel_hf.astype(np.float32))

    with open(args.tokens) as f:
        toks = json.load(f)
    initial, sampled = toks["initial"], toks["sampled"]
    mel = torch.from_numpy(np.load(args.mel).astype(np.float32))[None].to(args.device)
    with torch.no_grad():
        enc = model.model.encoder(mel).last_hidden_state
        np.save(os.path.join(args.out_dir, "encoder.npy"), enc[0].float().cpu().numpy())
        ids = torch.tensor([initial + sampled], device=args.device)
        out = model(encoder_outputs=(enc,), decoder_input_ids=ids).logits[0]
        rows = out[len(initial) - 1:].float().cpu().numpy()
        np.save(os.path.join(args.out_dir, "logits.npy"), rows)

        multilingual = cfg.vocab_size >= 51865
        num_languages = cfg.vocab_size - 51765 - int(multilingual)
        suppress, tok = openai_suppress_tokens(multilingual, num_languages)
        gen = GenerationConfig(
            decoder_start_token_id=tok.sot, eos_token_id=tok.eot, pad_token_id=tok.eot,
            no_timestamps_token_id=tok.no_timestamps, is_multilingual=multilingual,
            lang_to_id={f"<|{c}|>": i for c, i in zip(tok.all_language_codes,
                                                       tok.all_language_tokens)},
            task_to_id={"transcribe": tok.transcribe, "translate": tok.translate},
            suppress_tokens=suppress, begin_suppress_tokens=[tok.encode(" ")[0], tok.eot],
            max_initial_timestamp_index=50, return_timestamps=True, do_sample=False,
            num_beams=1, max_length=cfg.max_target_positions)
        lang = {"language": args.language, "task": "transcribe"} if multilingual else {}
        seq = model.generate(mel, generation_config=gen, max_new_tokens=args.max_new_tokens,
                             **lang)
        seq = seq[0].tolist()
    # transformers returns the forced initial tokens too when it keeps them; drop them.
    if seq[:len(initial)] == initial:
        seq = seq[len(initial):]
    if tok.eot in seq:
        seq = seq[:seq.index(tok.eot)]
    with open(os.path.join(args.out_dir, "generate.json"), "w") as f:
        json.dump({"tokens": seq}, f)
    print(f"transformers_reference: {len(rows)} logits rows, {len(seq)} generated tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
