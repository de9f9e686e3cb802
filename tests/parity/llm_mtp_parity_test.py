#!/usr/bin/env python3
"""MTP modules (llm/mtp.h) against a reference built from mlx-lm's own layers (CPU, f32).

No library runs an MTP module (transformers drops the weights; mlx-lm has none), so the
reference composes the module as vLLM's deepseek_mtp.py and mimo_mtp.py compute it, from
mlx-lm's pieces: the target's hidden states from the mlx-lm model (after model.norm for
DeepSeek-V3's layout, before it for MiMo's), the embedding of the next token (zeroed at
position 0), the two RMSNorms and the projection of their concatenation (embedding first
for DeepSeek-V3, hidden first for MiMo), the family's mlx-lm TransformerBlock as the
module's decoder layer (causal, RoPE at the target's positions), then the final norm and
the head (DeepSeek-V3: shared_head.head; MiMo: the target's lm_head).

For each (shape, layout): `parley synth llm --shape S --mtp L` writes the checkpoint,
`parley llm dump --mtp-out` writes the module's logits at positions 0 .. n-2, and they must
match the reference within --tol. Exits 1 on a failure, 77 without mlx-lm.

usage: llm_mtp_parity_test.py PARLEY_BIN --work-dir DIR [--prompt 128] [--tol 1e-4]
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

from llm_common import require_mlx_lm

CASES = [  # (shape, layout, mlx_lm.models module)
    ("tiny-qwen3", "deepseek_v3", "qwen3"),
    ("tiny-llama", "deepseek_v3", "llama"),
    ("tiny-qwen2", "mimo", "qwen2"),
]


def reference(model_dir, module_name, layout, ids):
    import importlib

    import mlx.core as mx
    import mlx.nn as nn
    from mlx.utils import tree_unflatten
    from mlx_lm.models.base import create_attention_mask

    mx.set_default_device(mx.cpu)
    module = importlib.import_module(f"mlx_lm.models.{module_name}")
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    args = module.ModelArgs.from_dict(config)
    n_layers = config["num_hidden_layers"]
    weights = {k: v.astype(mx.float32)
               for k, v in mx.load(os.path.join(model_dir, "model.safetensors")).items()}
    prefix = (f"model.layers.{n_layers}." if layout == "deepseek_v3" else "model.mtp_layers.0.")
    mtp = {k[len(prefix):]: v for k, v in weights.items() if k.startswith(prefix)}
    base = {k: v for k, v in weights.items() if not k.startswith(prefix)}
    model = module.Model(args)
    if hasattr(model, "sanitize"):
        base = model.sanitize(base)
    model.load_weights(list(base.items()), strict=True)

    tokens = mx.array(np.asarray(ids, dtype=np.int32))[None]
    # The target's hidden states: the residual stream after the last layer, normed or not.
    h = model.model.embed_tokens(tokens)
    mask = create_attention_mask(h, None)
    for layer in model.model.layers:
        h = layer(h, mask, None)
    if layout == "deepseek_v3":
        h = model.model.norm(h)
    h = h[:, :-1]  # positions 0 .. n-2
    e = model.model.embed_tokens(tokens[:, 1:])  # the token after each position
    e = mx.concatenate([mx.zeros_like(e[:, :1]), e[:, 1:]], axis=1)  # position 0 zeroed
    eps = args.rms_norm_eps

    def rms(x, name):
        return mx.fast.rms_norm(x, mtp[name], eps)

    if layout == "deepseek_v3":
        x = mx.concatenate([rms(e, "enorm.weight"), rms(h, "hnorm.weight")], axis=-1)
        x = x @ mtp["eh_proj.weight"].T
        final, head = "shared_head.norm.weight", mtp["shared_head.head.weight"]
    else:
        x = mx.concatenate([rms(h, "hidden_layernorm.weight"), rms(e, "token_layernorm.weight")],
                           axis=-1)
        x = x @ mtp["input_proj.weight"].T
        final = "final_layernorm.weight"
        head = base["lm_head.weight"] if "lm_head.weight" in base else base[
            "model.embed_tokens.weight"]
    block = module.TransformerBlock(args)
    block_weights = {k: v for k, v in mtp.items()
                     if k.split(".")[0] in ("self_attn", "mlp", "input_layernorm",
                                            "post_attention_layernorm")}
    block.update(tree_unflatten(list(block_weights.items())))
    y = block(x, create_attention_mask(x, None), None)
    logits = rms(y, final) @ head.T
    return np.array(logits.astype(mx.float32))[0]


def run_case(args, shape, layout, module_name):
    model_dir = os.path.join(args.work_dir, f"{shape}-{layout}")
    subprocess.run([args.parley, "synth", "llm", "--shape", shape, "--seed", "3", "--mtp", layout,
                    "--out", model_dir], check=True, capture_output=True)
    with open(os.path.join(model_dir, "config.json")) as f:
        vocab = json.load(f)["vocab_size"]
    ids = np.random.default_rng(5).integers(3, vocab, size=args.prompt).tolist()
    out = os.path.join(model_dir, "mtp_logits.npy")
    subprocess.run([args.parley, "llm", "dump", "--model", model_dir,
                    "--ids", ",".join(map(str, ids)), "--out",
                    os.path.join(model_dir, "logits.npy"), "--mtp-out", out],
                   check=True, capture_output=True)
    ours = np.load(out)
    ref = reference(model_dir, module_name, layout, ids)
    if ours.shape != ref.shape:
        print(f"FAIL {shape} {layout}: shape {ours.shape} vs reference {ref.shape}")
        return False
    diff = float(np.max(np.abs(ours - ref)))
    scale = float(np.max(np.abs(ref)))
    top = float(np.mean(np.argmax(ours, 1) == np.argmax(ref, 1)))
    ok = diff <= args.tol and top == 1.0
    print(f"{'ok' if ok else 'FAIL'} {shape} {layout}: MTP logits at {ours.shape[0]} positions, "
          f"max|diff| {diff:.3g} (max|logit| {scale:.3g}), top-1 equal {top:.3f}")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("parley")
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args()
    require_mlx_lm()
    os.makedirs(args.work_dir, exist_ok=True)
    ok = True
    for shape, layout, module_name in CASES:
        ok &= run_case(args, shape, layout, module_name)
    print("PASS" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
