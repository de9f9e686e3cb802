#!/usr/bin/env python3
"""Rewrites a Whisper model in the mlx-community layout or as a whisper.cpp ggml file.

    to_layouts.py mlx  SRC OUT_DIR [--format safetensors|npz] [--dtype float32|float16|bfloat16]
    to_layouts.py ggml SRC OUT.bin [--f32] [--vocab-dir DIR]

SRC is a CTranslate2 directory (model.bin) or a Hugging Face directory (config.json +
model.safetensors); its weights are first put under openai-whisper's names (whisper/model.py)
by ct2_to_openai.py / hf_to_openai.py. NumPy only. The formats follow, in our own code, the
documented behaviour of the two upstream converters:

mlx (ml-explore/mlx-examples whisper/convert.py and mlx_whisper/whisper.py):
  - config.json: asdict(ModelDimensions) (n_mels, n_audio_ctx, n_audio_state, n_audio_head,
    n_audio_layer, n_vocab, n_text_ctx, n_text_state, n_text_head, n_text_layer) plus
    "model_type": "whisper";
  - weights: every parameter of mlx's Whisper module: openai names with mlp.0 / mlp.2 renamed
    mlp1 / mlp2, conv weights swapaxes(1, 2) (channels-last [out, kernel, in]), no
    encoder.positional_embedding (mlx computes the sinusoids), and "alignment_heads", an int64
    [n, 2] array of (layer, head) (the source's own list when it has one, else mlx's
    default: all heads of the last half of the decoder layers). convert.py writes
    weights.safetensors (mx.save_safetensors, metadata {"format": "mlx"}); its older
    version wrote weights.npz (np.savez). --dtype float16 is convert.py's default.
ggml (ggerganov/whisper.cpp models/convert-pt-to-ggml.py):
  - int32 magic 0x67676d6c, the 10 dims in file order (n_vocab, n_audio_ctx, n_audio_state,
    n_audio_head, n_audio_layer, n_text_ctx, n_text_state, n_text_head, n_text_layer, n_mels),
    int32 use_f16;
  - int32 n_mels, int32 201, the mel filters (float32, from mel_filters.npz "mel_{n_mels}");
  - int32 token count, then per token int32 length + bytes: the tiktoken ranks in rank order
    (multilingual.tiktoken, or gpt2.tiktoken for n_vocab < 51865), no special tokens;
  - per tensor (state dict order): int32 n_dims, int32 name length, int32 ftype (0 f32,
    1 f16), the dims innermost first, the name, the data. Conv biases are reshaped [d, 1];
    with f16, 1-D tensors, conv biases and both positional embeddings stay f32.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_VOCAB_DIR = os.path.join(os.path.dirname(ROOT), "shared", "data", "whisper")
GGML_MAGIC = 0x67676D6C


def openai_state(src):
    """(dims, {openai name: float32 array}) from a CTranslate2 or Hugging Face directory."""
    if os.path.exists(os.path.join(src, "model.bin")):
        from ct2_to_openai import convert

        return convert(os.path.join(src, "model.bin"))
    if os.path.exists(os.path.join(src, "model.safetensors")):
        from hf_to_openai import convert

        return convert(src)
    raise SystemExit(f"{src}: no model.bin (CTranslate2) or model.safetensors (Hugging Face)")


def default_alignment_heads(dims):
    """mlx_whisper Whisper.__init__: all heads of the last half of the decoder layers."""
    heads = np.zeros((dims["n_text_layer"], dims["n_text_head"]), dtype=bool)
    heads[dims["n_text_layer"] // 2:] = True
    # C order, as np.array() of an mlx array is (a bare .T would be saved fortran_order).
    return np.ascontiguousarray(np.asarray(heads.nonzero()).T, dtype=np.int64)


def source_alignment_heads(src):
    """The source's own (layer, head) list: CTranslate2's config.json or transformers'
    generation_config.json "alignment_heads"; None when it has none. convert.py likewise
    sets the official models' heads (set_alignment_heads) and keeps the default otherwise."""
    for name in ("config.json", "generation_config.json"):
        path = os.path.join(src, name)
        if os.path.exists(path):
            with open(path) as f:
                heads = json.load(f).get("alignment_heads")
            if heads:
                return np.ascontiguousarray(heads, dtype=np.int64).reshape(-1, 2)
    return None


def cast(a, dtype):
    """float32 array -> float32 / float16 / bfloat16 (as uint16 bits, round to nearest even)."""
    if dtype == "float32":
        return np.ascontiguousarray(a, np.float32), "F32"
    if dtype == "float16":
        return np.ascontiguousarray(a, np.float16), "F16"
    if dtype == "bfloat16":
        bits = np.ascontiguousarray(a, np.float32).view(np.uint32).astype(np.uint64)
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        return rounded.astype(np.uint16), "BF16"
    raise ValueError(f"dtype {dtype}")


def write_safetensors(path, tensors, metadata):
    """tensors: {name: (array, safetensors dtype)}; the safetensors layout (u64 header
    length, JSON header, data), largest dtype first then by name so all stay aligned."""
    header = {"__metadata__": metadata}
    order = sorted(tensors, key=lambda n: (-tensors[n][0].dtype.itemsize, n))
    offset = 0
    for name in order:
        a, dt = tensors[name]
        header[name] = {"dtype": dt, "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for name in order:
            f.write(tensors[name][0].tobytes())
    os.replace(tmp, path)


def to_mlx(src, out_dir, fmt, dtype):
    dims, sd = openai_state(src)
    weights = {}
    for name, a in sd.items():
        if name == "encoder.positional_embedding":
            continue  # mlx computes it
        name = name.replace("mlp.0", "mlp1").replace("mlp.2", "mlp2")
        if "conv" in name and a.ndim == 3:
            a = a.swapaxes(1, 2)  # [out, in, k] -> [out, k, in]
        weights[name] = cast(a, dtype)
    heads = source_alignment_heads(src)
    if heads is None:
        heads = default_alignment_heads(dims)
    os.makedirs(out_dir, exist_ok=True)
    if fmt == "safetensors":
        weights["alignment_heads"] = (heads, "I64")
        write_safetensors(os.path.join(out_dir, "weights.safetensors"), weights,
                          {"format": "mlx"})
    else:
        if dtype == "bfloat16":
            raise SystemExit("npz has no bfloat16")
        arrays = {k: v[0] for k, v in weights.items()}
        arrays["alignment_heads"] = heads
        np.savez(os.path.join(out_dir, "weights.npz"), **arrays)
    config = dict(dims)
    config["model_type"] = "whisper"
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=4)
    print(f"to_layouts: mlx {fmt} {dtype}, {len(weights)} arrays, dims {dims} -> {out_dir}")


def tiktoken_ranks(path):
    """Token bytes in rank order, checked to be ranks 0..n-1."""
    import base64

    tokens = []
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                tok, rank = line.split()
                if int(rank) != len(tokens):
                    raise ValueError(f"{path}: rank {int(rank)} at line {len(tokens) + 1}")
                tokens.append(base64.b64decode(tok))
    return tokens


def to_ggml(src, out, use_f16, vocab_dir):
    dims, sd = openai_state(src)
    n_mels = dims["n_mels"]
    with np.load(os.path.join(vocab_dir, "mel_filters.npz")) as f:
        filters = np.ascontiguousarray(f[f"mel_{n_mels}"], np.float32)
    multilingual = dims["n_vocab"] >= 51865
    tokens = tiktoken_ranks(os.path.join(
        vocab_dir, "multilingual.tiktoken" if multilingual else "gpt2.tiktoken"))
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<i", GGML_MAGIC))
        for key in ("n_vocab", "n_audio_ctx", "n_audio_state", "n_audio_head", "n_audio_layer",
                    "n_text_ctx", "n_text_state", "n_text_head", "n_text_layer", "n_mels"):
            f.write(struct.pack("<i", dims[key]))
        f.write(struct.pack("<i", int(use_f16)))
        f.write(struct.pack("<ii", *filters.shape))
        f.write(filters.tobytes())
        f.write(struct.pack("<i", len(tokens)))
        for t in tokens:
            f.write(struct.pack("<i", len(t)))
            f.write(t)
        for name, a in sd.items():
            if name in ("encoder.conv1.bias", "encoder.conv2.bias"):
                a = a.reshape(a.shape[0], 1)
            keep_f32 = (a.ndim < 2 or name in ("encoder.conv1.bias", "encoder.conv2.bias",
                                               "encoder.positional_embedding",
                                               "decoder.positional_embedding"))
            ftype = 1 if use_f16 and not keep_f32 else 0
            data = np.ascontiguousarray(a, np.float16 if ftype else np.float32)
            raw = name.encode()
            f.write(struct.pack("<iii", a.ndim, len(raw), ftype))
            for d in reversed(a.shape):
                f.write(struct.pack("<i", d))
            f.write(raw)
            f.write(data.tobytes())
    os.replace(tmp, out)
    print(f"to_layouts: ggml {'f16' if use_f16 else 'f32'}, {len(sd)} tensors, "
          f"{len(tokens)} tokens, dims {dims} -> {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("mlx")
    m.add_argument("src")
    m.add_argument("out_dir")
    m.add_argument("--format", choices=["safetensors", "npz"], default="safetensors")
    m.add_argument("--dtype", choices=["float32", "float16", "bfloat16"], default="float16")
    g = sub.add_parser("ggml")
    g.add_argument("src")
    g.add_argument("out")
    g.add_argument("--f32", action="store_true", help="all tensors float32 (use-f32)")
    g.add_argument("--vocab-dir", default=DEFAULT_VOCAB_DIR,
                   help="folder with mel_filters.npz and the .tiktoken ranks")
    args = ap.parse_args()
    if args.cmd == "mlx":
        to_mlx(args.src, args.out_dir, args.format, args.dtype)
    else:
        to_ggml(args.src, args.out, not args.f32, args.vocab_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
