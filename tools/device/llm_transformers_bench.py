#!/usr/bin/env python3
"""The transformers anchor of `parley bench llm` on the GPU machine (issue 23, item 10).

Loads a Hugging Face chat-model folder (what `parley synth llm` writes) with transformers
and torch in bf16 (sdpa attention, the default dynamic KV cache: what a user gets from
`AutoModelForCausalLM.from_pretrained(..., dtype=torch.bfloat16).cuda()`), and times the
same figures as parley, printed as JSON lines in parley's schema:
  prefill: one forward over a prompt of N seeded-random token ids (logits of the last
           position only, as parley's prefill), ms and tokens/s;
  decode:  B rows of a C-token prompt, then S teacher-forced steps of one token per row
           (random ids: the work does not depend on the text), ms per step.
Medians of --runs timed runs after one warm-up; torch.cuda.synchronize() ends each.

  python3 tools/device/llm_transformers_bench.py --model DIR --prompt-tokens 512 4096 \
      --batch 1 8 64 --decode-context 512 --decode-tokens 32 --runs 3
"""
import argparse
import json
import statistics
import time

import torch
from transformers import AutoModelForCausalLM


def sync_ms(t0):
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1000.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompt-tokens", type=int, nargs="+", default=[512])
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--decode-context", type=int, default=16)
    ap.add_argument("--decode-tokens", type=int, default=32)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--attn", default="sdpa")
    a = ap.parse_args()

    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(
        a.model, dtype=torch.bfloat16, attn_implementation=a.attn).cuda().eval()
    load_ms = sync_ms(t0)
    vocab = model.config.vocab_size
    base = {"bench": "llm", "system": "transformers", "model": a.model,
            "device": "cuda", "dtype": "bf16", "attn": a.attn,
            "gpu": torch.cuda.get_device_name(0),
            "versions": {"torch": torch.__version__,
                         "transformers": __import__("transformers").__version__}}
    print(json.dumps({**base, "phase": "load", "ms": load_ms}), flush=True)
    gen = torch.Generator(device="cpu").manual_seed(7)

    def ids(b, n):
        return torch.randint(0, vocab, (b, n), generator=gen).cuda()

    with torch.inference_mode():
        for n in a.prompt_tokens:
            x = ids(1, n)

            def prefill():
                t = time.perf_counter()
                model(input_ids=x, use_cache=True, logits_to_keep=1)
                return sync_ms(t)

            prefill()
            ms = [prefill() for _ in range(a.runs)]
            med = statistics.median(ms)
            print(json.dumps({**base, "phase": "prefill", "tokens": n, "ms": med,
                              "ms_min": min(ms), "tokens_per_s": n / (med / 1000.0)}),
                  flush=True)
        for b in a.batch:
            def decode():
                prompt = ids(b, a.decode_context)
                steps = ids(b, a.decode_tokens)
                out = model(input_ids=prompt, use_cache=True, logits_to_keep=1)
                cache = out.past_key_values
                torch.cuda.synchronize()
                t = time.perf_counter()
                for s in range(a.decode_tokens):
                    out = model(input_ids=steps[:, s:s + 1], past_key_values=cache,
                                use_cache=True)
                    cache = out.past_key_values
                return sync_ms(t) / a.decode_tokens

            decode()
            ms = [decode() for _ in range(a.runs)]
            med = statistics.median(ms)
            print(json.dumps({**base, "phase": "decode", "batch": b,
                              "context": a.decode_context, "ms_per_step": med,
                              "ms_per_step_min": min(ms), "tokens_per_s": b / (med / 1000.0)}),
                  flush=True)


if __name__ == "__main__":
    main()
