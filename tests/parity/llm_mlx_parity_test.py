#!/usr/bin/env python3
"""Chat-model parity against mlx-lm (CPU, f32) on synthetic tiny models.

For each family: `parley synth llm --shape tiny-<family>` writes a Hugging Face directory;
`parley llm dump` runs a seeded random prompt through parley's batched paged forward
(every position's logits as .npy, then greedy decode steps); mlx-lm loads the same
directory (mlx_lm.models.<arch>.Model(ModelArgs.from_dict(config)), weights after the
module's sanitize) and runs the same prompt. Checks: every position's logits within
--tol abs or --tol-rel x max|logit| (whichever is larger), and the greedy continuation
identical. Prints the measured max abs difference per family; exits 1 on any failure.

usage: llm_mlx_parity_test.py PARLEY_BIN --work-dir DIR [--families ...] [--layers N]
       [--prompt 256] [--greedy 64] [--tol 1e-4] [--tol-rel 0]
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

from llm_common import require_mlx_lm

FAMILIES = {  # shape -> mlx_lm.models module
    "tiny-llama": "llama",
    "tiny-qwen2": "qwen2",
    "tiny-qwen3": "qwen3",
    "tiny-qwen3_moe": "qwen3_moe",
    "tiny-gemma3": "gemma3_text",
    # Real shapes (by hand, with --layers: the full vocabularies make them slow for CI).
    "qwen3-0.6b": "qwen3",
    "qwen2-0.5b": "qwen2",
    "llama-3.2-1b": "llama",
    "gemma-3-1b": "gemma3_text",
    "qwen3-moe-tiny": "qwen3_moe",
}
TINY = [k for k in FAMILIES if k.startswith("tiny-")]


def mlx_model(model_dir, module_name):
    import importlib

    import mlx.core as mx

    mx.set_default_device(mx.cpu)
    module = importlib.import_module(f"mlx_lm.models.{module_name}")
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    model = module.Model(module.ModelArgs.from_dict(config))
    weights = mx.load(os.path.join(model_dir, "model.safetensors"))
    weights = {k: v.astype(mx.float32) for k, v in weights.items()}
    if hasattr(model, "sanitize"):
        weights = model.sanitize(weights)
    model.load_weights(list(weights.items()), strict=True)
    mx.eval(model.parameters())
    return model


def mlx_reference(model, ids, n_greedy):
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    prompt = mx.array(np.asarray(ids, dtype=np.int32))[None]
    logits_all = np.array(model(prompt).astype(mx.float32))[0]
    cache = make_prompt_cache(model)
    logits = model(prompt, cache=cache)
    greedy = []
    for step in range(n_greedy):
        tok = int(mx.argmax(logits[0, -1]).item())
        greedy.append(tok)
        if step + 1 == n_greedy:
            break
        logits = model(mx.array([[tok]], dtype=mx.int32), cache=cache)
    return logits_all, greedy


def run_family(args, shape, module_name):
    model_dir = os.path.join(args.work_dir, shape)
    synth = [args.parley, "synth", "llm", "--shape", shape, "--seed", str(args.seed),
             "--out", model_dir]
    if args.layers:
        synth += ["--layers", str(args.layers)]
    subprocess.run(synth, check=True, capture_output=True)
    with open(os.path.join(model_dir, "config.json")) as f:
        vocab = json.load(f)["vocab_size"]
    rng = np.random.default_rng(args.seed + 1)
    ids = rng.integers(3, vocab, size=args.prompt).tolist()
    ids_file = os.path.join(model_dir, "prompt_ids.txt")
    with open(ids_file, "w") as f:
        f.write(",".join(map(str, ids)))
    out_npy = os.path.join(model_dir, "parley_logits.npy")
    t0 = time.time()
    res = subprocess.run([args.parley, "llm", "dump", "--model", model_dir, "--ids-file", ids_file,
                          "--out", out_npy, "--greedy", str(args.greedy)],
                         check=True, capture_output=True, text=True)
    t_parley = time.time() - t0
    ours = np.load(out_npy)
    our_greedy = json.loads(res.stdout)["greedy"]
    t0 = time.time()
    ref_logits, ref_greedy = mlx_reference(mlx_model(model_dir, module_name), ids, args.greedy)
    t_mlx = time.time() - t0
    ok = True
    if ours.shape != ref_logits.shape:
        print(f"FAIL {shape}: logits shape {ours.shape} vs mlx {ref_logits.shape}")
        return False
    diff = float(np.max(np.abs(ours - ref_logits)))
    scale = float(np.max(np.abs(ref_logits)))
    tol = max(args.tol, args.tol_rel * scale)
    worst_pos = int(np.argmax(np.max(np.abs(ours - ref_logits), axis=1)))
    status = "ok" if diff <= tol else "FAIL"
    ok &= diff <= tol
    print(f"{status} {shape}: logits max|diff| {diff:.3g} (max|logit| {scale:.3g}, rel "
          f"{diff / scale:.3g}, worst at position {worst_pos}), tolerance {tol:.3g}")
    same = our_greedy == ref_greedy
    ok &= same
    first = next((i for i, (a, b) in enumerate(zip(our_greedy, ref_greedy)) if a != b), None)
    print(f"{'ok' if same else 'FAIL'} {shape}: greedy {len(our_greedy)} tokens "
          f"{'identical' if same else f'differ from step {first}'}"
          f" (parley {t_parley:.1f} s, mlx {t_mlx:.1f} s)")
    if not same:
        print(f"  parley {our_greedy}\n  mlx    {ref_greedy}")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("parley")
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--families", nargs="*", default=TINY)
    ap.add_argument("--layers", type=int, default=0, help="synth --layers (0: the shape's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prompt", type=int, default=256)
    ap.add_argument("--greedy", type=int, default=64)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--tol-rel", type=float, default=0.0)
    args = ap.parse_args()
    require_mlx_lm()
    os.makedirs(args.work_dir, exist_ok=True)
    ok = True
    for shape in args.families:
        if shape not in FAMILIES:
            print(f"unknown family shape {shape}; known: {', '.join(FAMILIES)}")
            return 2
        ok &= run_family(args, shape, FAMILIES[shape])
    print("PASS" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
