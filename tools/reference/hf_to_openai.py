#!/usr/bin/env python3
"""Converts a Hugging Face layout Whisper directory into an openai-whisper checkpoint (.pt).

    hf_to_openai.py MODEL_DIR OUT.pt

MODEL_DIR holds config.json and model.safetensors with transformers' WhisperForConditional-
Generation names (what `parley synth whisper` writes). The safetensors file is read with
NumPy alone (u64 header length, JSON header, raw little-endian data); F32/F16/BF16 weights
are widened exactly to float32. Renames (openai's whisper/model.py on the right):
    model.encoder.conv{1,2}                  encoder.conv{1,2}
    model.encoder.embed_positions.weight     encoder.positional_embedding (as stored)
    model.{encoder,decoder}.layers.N         {encoder,decoder}.blocks.N
      self_attn.{q,k,v,out}_proj             attn.{query,key,value,out} (key: no bias)
      self_attn_layer_norm                   attn_ln
      encoder_attn.{q,k,v,out}_proj          cross_attn.{query,key,value,out}
      encoder_attn_layer_norm                cross_attn_ln
      fc1 / fc2                              mlp.0 / mlp.2
      final_layer_norm                       mlp_ln
    model.encoder.layer_norm                 encoder.ln_post
    model.decoder.layer_norm                 decoder.ln
    model.decoder.embed_tokens.weight        decoder.token_embedding.weight
    model.decoder.embed_positions.weight     decoder.positional_embedding
openai ties the output projection to the token embedding: a proj_out.weight that differs
from it is an error. A k_proj bias, which openai's key projections lack, must be zero.
"""
import json
import os
import re
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from openai_ckpt import dims_from_state, f32, save  # noqa: E402

_DTYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8"}


def read_safetensors(path):
    """{name: float32 ndarray} from a .safetensors file, NumPy only."""
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack_from("<Q", buf, 0)
    header = json.loads(buf[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = buf[base + begin : base + end]
        dt = info["dtype"]
        if dt == "BF16":
            arr = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
        elif dt in _DTYPES:
            arr = np.frombuffer(raw, _DTYPES[dt])
        else:
            raise ValueError(f"{path}: {name}: dtype {dt} unsupported")
        out[name] = np.array(arr.reshape(info["shape"]), dtype=np.float32)  # writable copy
    return out


_BLOCK = [  # (HF suffix inside layers.N, openai suffix inside blocks.N)
    ("self_attn.q_proj", "attn.query"),
    ("self_attn.k_proj", "attn.key"),
    ("self_attn.v_proj", "attn.value"),
    ("self_attn.out_proj", "attn.out"),
    ("self_attn_layer_norm", "attn_ln"),
    ("encoder_attn.q_proj", "cross_attn.query"),
    ("encoder_attn.k_proj", "cross_attn.key"),
    ("encoder_attn.v_proj", "cross_attn.value"),
    ("encoder_attn.out_proj", "cross_attn.out"),
    ("encoder_attn_layer_norm", "cross_attn_ln"),
    ("fc1", "mlp.0"),
    ("fc2", "mlp.2"),
    ("final_layer_norm", "mlp_ln"),
]
_TOP = {
    "model.encoder.conv1": "encoder.conv1",
    "model.encoder.conv2": "encoder.conv2",
    "model.encoder.layer_norm": "encoder.ln_post",
    "model.decoder.layer_norm": "decoder.ln",
    "model.encoder.embed_positions.weight": "encoder.positional_embedding",
    "model.decoder.embed_positions.weight": "decoder.positional_embedding",
    "model.decoder.embed_tokens.weight": "decoder.token_embedding.weight",
}


def openai_name(hf):
    """openai's name for an HF tensor name, or None for one it has no place for."""
    for src, dst in _TOP.items():
        if hf == src:
            return dst
        if hf.startswith(src + "."):
            return dst + hf[len(src):]
    m = re.match(r"model\.(encoder|decoder)\.layers\.(\d+)\.(.+)\.(weight|bias)$", hf)
    if m:
        side, i, mod, kind = m.groups()
        for src, dst in _BLOCK:
            if mod == src:
                return f"{side}.blocks.{i}.{dst}.{kind}"
    return None


def convert(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("model_type", "whisper") != "whisper":
        raise ValueError(f"{model_dir}: model_type {cfg.get('model_type')!r}, not whisper")
    if cfg.get("scale_embedding"):
        raise ValueError("scale_embedding=true has no openai equivalent")
    t = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    sd = {}
    for name, a in t.items():
        if name == "proj_out.weight":
            if not np.array_equal(a, t["model.decoder.embed_tokens.weight"]):
                raise ValueError("proj_out differs from the token embedding (openai ties them)")
            continue
        dst = openai_name(name)
        if dst is None:
            raise ValueError(f"{name}: no openai-whisper equivalent")
        if dst.endswith(("attn.key.bias", "cross_attn.key.bias")):
            if np.any(a != 0):
                raise ValueError(f"{name}: nonzero key bias (max |b| {np.abs(a).max()})")
            continue
        sd[dst] = a
    dims = dims_from_state(sd, cfg["encoder_attention_heads"], cfg["decoder_attention_heads"])
    return dims, sd


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    dims, sd = convert(argv[1])
    save(dims, sd, argv[2])
    print(f"hf_to_openai: {len(sd)} tensors, dims {dims} -> {argv[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
