#!/usr/bin/env python3
"""Hugging Face transformers' Whisper timed on the same work as `parley bench whisper`.

    transformers_bench.py MODEL_DIR AUDIO [--device cuda|cpu] [--dtype float16|float32]
        [--attn sdpa|eager] [--runs 10] [--warmup 2] [--tokens 30] [--label NAME]

MODEL_DIR is a Hugging Face layout (config.json + model.safetensors), e.g. `parley synth
whisper --shape large-v3-turbo --dtype f16`. WhisperForConditionalGeneration in --dtype with
--attn attention. Prints JSON lines, one per figure, {"system": "transformers", "bench": ...,
"ms": ..., ...}; every figure is the median of --runs timed calls after --warmup untimed ones,
with torch.cuda.synchronize() before the clock starts and before it stops:
  whisper_mel              WhisperFeatureExtractor (NumPy, CPU) on the whole file, ms
  whisper_encoder          model.model.encoder on one 30 s window, ms per window
  whisper_decode           the decoder with its KV cache, one token per call after the sot
                           prefix, argmax on the device, --tokens steps; ms per token
  whisper_decode_beam      the same with 5 rows per call (the cache of the prefix repeated
                           5 times, each row fed its own argmax); ms per step of 5 rows
  whisper_e2e_generate     read the WAV + feature extractor + generate() with exactly --tokens
  whisper_e2e_generate_beam5  new tokens (min_new_tokens = max_new_tokens, so eos cannot end
                           it), greedy / num_beams=5; ms
  whisper_generate_step / whisper_generate_beam5_step
                           (generate(T) - generate(T/3)) / (T - T/3): what one more token
                           costs inside generate(), ms per step
generate() gets language "en" and task "transcribe", no timestamps: its prefix is
sot, en, transcribe, notimestamps (sot, notimestamps for an English-only model).
"""
import argparse
import json
import statistics
import sys
import time
import wave

import numpy as np


def read_wav(path):
    """A 16 kHz mono 16-bit PCM WAV as float32 samples in [-1, 1)."""
    with wave.open(path, "rb") as w:
        if (w.getframerate(), w.getnchannels(), w.getsampwidth()) != (16000, 1, 2):
            raise SystemExit(f"[wav] {path}: want 16 kHz mono 16-bit PCM")
        raw = w.readframes(w.getnframes())
    return np.frombuffer(raw, "<i2").astype(np.float32) / 32768.0


class Bench:
    def __init__(self, args):
        import torch
        import transformers
        from transformers import WhisperFeatureExtractor, WhisperForConditionalGeneration

        self.torch, self.args = torch, args
        self.dev = torch.device(args.device)
        self.dtype = getattr(torch, args.dtype)
        major = int(transformers.__version__.split(".")[0])
        dtype_kw = {"dtype": self.dtype} if major >= 5 else {"torch_dtype": self.dtype}
        t0 = time.perf_counter()
        self.model = WhisperForConditionalGeneration.from_pretrained(
            args.model_dir, attn_implementation=args.attn, **dtype_kw).to(self.dev).eval()
        self.load_ms = (time.perf_counter() - t0) * 1e3
        cfg = self.model.config
        self.fe = WhisperFeatureExtractor(feature_size=cfg.num_mel_bins)
        self.common = {"model": args.label or args.model_dir, "device": args.device,
                       "dtype": args.dtype, "attn": args.attn, "runs": args.runs,
                       "warmup": args.warmup, "transformers": transformers.__version__,
                       "torch": torch.__version__}
        if args.device == "cuda":
            self.common["device_label"] = torch.cuda.get_device_name()
        # Special tokens from the vocabulary's layout (openai's tokenizer.py):
        # eot, sot, the languages, translate, transcribe, startoflm, startofprev, nospeech,
        # notimestamps, then 1501 timestamps.
        self.multilingual = cfg.vocab_size >= 51865
        self.eot = cfg.eos_token_id
        self.sot = self.eot + 1
        n_lang = cfg.vocab_size - 51765 - int(self.multilingual)
        self.translate = self.sot + 1 + n_lang
        self.transcribe = self.translate + 1
        self.prefix = [self.sot, self.sot + 1, self.transcribe] if self.multilingual else [self.sot]
        self.gen = self.generation_config(n_lang)

    def generation_config(self, n_lang):
        from transformers import GenerationConfig

        langs = {}
        if self.multilingual:
            langs = {"lang_to_id": {"<|en|>": self.sot + 1},
                     "task_to_id": {"translate": self.translate, "transcribe": self.transcribe}}
        return GenerationConfig(
            decoder_start_token_id=self.sot, eos_token_id=self.eot, pad_token_id=self.eot,
            no_timestamps_token_id=self.transcribe + 4, is_multilingual=self.multilingual,
            begin_suppress_tokens=[220, self.eot], return_timestamps=False, do_sample=False,
            max_length=self.model.config.max_target_positions, **langs)

    def emit(self, bench, ms, **extra):
        row = {"system": "transformers", "bench": bench, "ms": ms, "unit": "run", **extra,
               **self.common}
        print(json.dumps(row), flush=True)

    def sync(self):
        if self.dev.type == "cuda":
            self.torch.cuda.synchronize()

    def median_ms(self, fn):
        for _ in range(self.args.warmup):
            fn()
        samples = []
        for _ in range(self.args.runs):
            self.sync()
            t0 = time.perf_counter()
            fn()
            self.sync()
            samples.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(samples)

    def features(self, samples):
        x = self.fe(samples, sampling_rate=16000, return_tensors="pt").input_features
        return x.to(self.dev, self.dtype)

    def generate(self, features, beams, tokens):
        lang = {"language": "en", "task": "transcribe"} if self.multilingual else {}
        return self.model.generate(
            features, generation_config=self.gen, num_beams=beams, min_new_tokens=tokens,
            max_new_tokens=tokens, **lang)

    def forced_decode(self, enc, rows, steps):
        """The prefix, then `steps` single-token calls of `rows` rows with the KV cache; returns
        the milliseconds of the steps alone (the device synchronized around them)."""
        torch = self.torch
        dec = self.model.model.decoder
        ids = torch.tensor([self.prefix] * rows, device=self.dev)
        enc_rows = enc.expand(rows, -1, -1)
        try:  # transformers >= 4.4x: the decoder keeps self- and cross-attention K/V in it
            from transformers.cache_utils import DynamicCache, EncoderDecoderCache

            cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
        except (ImportError, TypeError):
            cache = None  # the decoder makes its own
        out = dec(input_ids=ids, encoder_hidden_states=enc_rows, past_key_values=cache,
                  use_cache=True)
        nxt = self.model.proj_out(out.last_hidden_state[:, -1:]).argmax(-1)
        self.sync()
        t0 = time.perf_counter()
        for _ in range(steps):
            out = dec(input_ids=nxt, encoder_hidden_states=enc_rows,
                      past_key_values=out.past_key_values, use_cache=True)
            nxt = self.model.proj_out(out.last_hidden_state).argmax(-1)
        self.sync()
        return (time.perf_counter() - t0) * 1e3

    def run(self):
        torch, a, t = self.torch, self.args, self.args.tokens
        self.emit("whisper_load", self.load_ms)
        samples = read_wav(a.audio)
        audio_s = len(samples) / 16000
        self.emit("whisper_mel", self.median_ms(lambda: self.features(samples)), where="cpu")
        with torch.inference_mode():
            feats = self.features(samples)
            enc_ms = self.median_ms(lambda: self.model.model.encoder(feats))
            self.emit("whisper_encoder", enc_ms, unit="window")
            enc = self.model.model.encoder(feats).last_hidden_state
            for rows in (1, 5):
                per = [self.forced_decode(enc, rows, t) / t
                       for _ in range(a.warmup + a.runs)][a.warmup:]
                name = "whisper_decode" if rows == 1 else "whisper_decode_beam"
                unit = "token" if rows == 1 else "step"
                self.emit(name, statistics.median(per), unit=unit, beam=rows, decode_tokens=t,
                          prefix_tokens=len(self.prefix))
            for beams in (1, 5):
                out = {}

                def e2e(steps):
                    s = read_wav(a.audio)
                    out["seq"] = self.generate(self.features(s), beams, steps)

                full_ms = self.median_ms(lambda: e2e(t))
                seq = out["seq"][0].tolist()
                # generate() returns the new tokens, after the 4 (2) forced ones when it
                # keeps those: sot, en, transcribe, notimestamps.
                new = len(seq) - (len(self.prefix) + 1 if seq[:1] == [self.sot] else 0)
                if new != t:
                    print(f"transformers_bench: generate() gave {new} new tokens, not {t}",
                          file=sys.stderr)
                sfx = "" if beams == 1 else "_beam5"
                self.emit("whisper_e2e_generate" + sfx, full_ms, unit="run", beam=beams,
                          decode_tokens=t, new_tokens=new, returned_tokens=len(seq),
                          audio_seconds=audio_s)
                t_short = t // 3
                short_ms = self.median_ms(lambda: e2e(t_short))
                self.emit("whisper_generate" + sfx + "_step", (full_ms - short_ms) / (t - t_short),
                          unit="step", beam=beams, from_tokens=[t_short, t])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("audio")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--dtype", default="float16", choices=["float16", "bfloat16", "float32"])
    ap.add_argument("--attn", default="sdpa", choices=["sdpa", "eager"])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=30)
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    Bench(args).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
