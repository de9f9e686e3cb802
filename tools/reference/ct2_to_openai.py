#!/usr/bin/env python3
"""Converts a CTranslate2 Whisper model.bin into an openai-whisper checkpoint (.pt).

    ct2_to_openai.py MODEL_DIR_OR_MODEL_BIN OUT.pt

The checkpoint is what whisper.load_model(path) reads: {"dims": {...}, "model_state_dict":
{...}} with openai's parameter names, every weight float32 (the float16 values of the
model.bin widened exactly). CTranslate2's fused self-attention q/k/v ([3d, d]) and
cross-attention k/v ([2d, d]) are split; openai's key projections have no bias, so
CTranslate2's (zero) key biases are dropped after checking they are zero. The encoder's
positional embedding (a persistent buffer in openai's model) is taken from the model.bin's
stored sinusoids, as openai's own checkpoints store theirs.
"""
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ct2_reader import read_ct2  # noqa: E402
from openai_ckpt import dims_from_state, save  # noqa: E402


def convert(model_bin):
    m = read_ct2(model_bin)
    if m["spec"] != "WhisperSpec":
        raise ValueError(f"{model_bin}: spec {m['spec']!r}, not WhisperSpec")
    v = dict(m["variables"])
    for alias, target in m["aliases"].items():
        v.setdefault(alias, v[target])

    def f32(name):
        return np.ascontiguousarray(v[name], dtype=np.float32)

    sd = {}

    def linear(dst, src):
        sd[f"{dst}.weight"] = f32(f"{src}/weight")
        sd[f"{dst}.bias"] = f32(f"{src}/bias")

    def ln(dst, src):
        sd[f"{dst}.weight"] = f32(f"{src}/gamma")
        sd[f"{dst}.bias"] = f32(f"{src}/beta")

    def split(src, parts):
        w, b = f32(f"{src}/weight"), f32(f"{src}/bias")
        d = w.shape[0] // len(parts)
        for i, dst in enumerate(parts):
            sd[f"{dst}.weight"] = np.ascontiguousarray(w[i * d : (i + 1) * d])
            bi = b[i * d : (i + 1) * d]
            if dst.endswith(".key"):
                if np.any(bi != 0):
                    raise ValueError(f"{src}: nonzero key bias (max |b| {np.abs(bi).max()})")
            else:
                sd[f"{dst}.bias"] = np.ascontiguousarray(bi)

    # The self-attention and feed-forward halves every encoder and decoder block shares.
    def self_attention(d, s):
        ln(f"{d}.attn_ln", f"{s}/self_attention/layer_norm")
        split(f"{s}/self_attention/linear_0", [f"{d}.attn.query", f"{d}.attn.key", f"{d}.attn.value"])
        linear(f"{d}.attn.out", f"{s}/self_attention/linear_1")

    def mlp(d, s):
        ln(f"{d}.mlp_ln", f"{s}/ffn/layer_norm")
        linear(f"{d}.mlp.0", f"{s}/ffn/linear_0")
        linear(f"{d}.mlp.2", f"{s}/ffn/linear_1")

    def n_layers(prefix):
        ids = {int(mm.group(1)) for k in v for mm in [re.match(prefix + r"/layer_(\d+)/", k)] if mm}
        return max(ids) + 1 if ids else 0

    n_enc, n_dec = n_layers("encoder"), n_layers("decoder")
    # Encoder.
    for c in ("conv1", "conv2"):
        linear(f"encoder.{c}", f"encoder/{c}")
    sd["encoder.positional_embedding"] = f32("encoder/position_encodings/encodings")
    for i in range(n_enc):
        s, d = f"encoder/layer_{i}", f"encoder.blocks.{i}"
        self_attention(d, s)
        mlp(d, s)
    ln("encoder.ln_post", "encoder/layer_norm")
    # Decoder.
    sd["decoder.token_embedding.weight"] = f32("decoder/embeddings/weight")
    sd["decoder.positional_embedding"] = f32("decoder/position_encodings/encodings")
    for i in range(n_dec):
        s, d = f"decoder/layer_{i}", f"decoder.blocks.{i}"
        self_attention(d, s)
        ln(f"{d}.cross_attn_ln", f"{s}/attention/layer_norm")
        linear(f"{d}.cross_attn.query", f"{s}/attention/linear_0")
        split(f"{s}/attention/linear_1", [f"{d}.cross_attn.key", f"{d}.cross_attn.value"])
        linear(f"{d}.cross_attn.out", f"{s}/attention/linear_2")
        mlp(d, s)
    ln("decoder.ln", "decoder/layer_norm")
    if "decoder/projection/weight" in v and not np.array_equal(
        v["decoder/projection/weight"], v["decoder/embeddings/weight"]
    ):
        raise ValueError("output projection differs from the token embedding (openai ties them)")

    dims = dims_from_state(sd, v["encoder/num_heads"], v["decoder/num_heads"])
    return dims, sd


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    src = argv[1]
    if os.path.isdir(src):
        src = os.path.join(src, "model.bin")
    dims, sd = convert(src)
    save(dims, sd, argv[2])
    print(f"ct2_to_openai: {len(sd)} tensors, dims {dims} -> {argv[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
