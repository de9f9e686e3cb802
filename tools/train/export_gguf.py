#!/usr/bin/env python3
"""Writes a trained Qwen3 model folder (Hugging Face layout) as GGUF F16 and Q8_0 files.

    export_gguf.py MODEL_DIR OUT_PREFIX [--types f16,q8_0] [--name NAME]

Writes OUT_PREFIX-f16.gguf and OUT_PREFIX-q8_0.gguf with llama.cpp's qwen3 layout, using the
`gguf` package (its GGUFWriter, its TensorNameMap for the tensor names and gguf.quants for
Q8_0), and needs neither torch nor transformers: model.safetensors is read with NumPy (F32,
F16 or BF16). Metadata: general.architecture "qwen3" and the qwen3.* hyper-parameters
(context_length, embedding_length, block_count, feed_forward_length, attention.head_count,
attention.head_count_kv, attention.key_length / value_length = head_dim,
attention.layer_norm_rms_epsilon, rope.freq_base), general.file_type, and the byte-level BPE
tokenizer as llama.cpp's converter writes Qwen's: tokenizer.ggml.model "gpt2", pre "qwen2",
tokens (padded with [PADn] up to the embedding rows), token_type (NORMAL; CONTROL for
<|...|> specials; USER_DEFINED for the other added tokens; UNUSED for padding), merges,
eos = <|im_end|>, padding and bos = <|endoftext|> with add_bos_token false (as in Qwen3's own
GGUF files), and tokenizer.chat_template.

Tensors keep transformers' [out, in] layout (GGUF lists dimensions innermost first, so a
q_proj of [heads*head_dim, hidden] reads back as (hidden, heads*head_dim)); Q and K are not
permuted, since llama.cpp's qwen3 uses NEOX-style RoPE, which pairs (i, i + d/2) like
transformers. 1-D tensors (the norms) stay F32 in both files, as llama.cpp's converter
keeps them; the 2-D ones are F16 or Q8_0 (every row length here is a multiple of 32).
Without lm_head.weight (tied embeddings) no output tensor is written and llama.cpp reuses
token_embd.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

_DTYPES = {"F32": np.float32, "F16": np.float16}


def read_safetensors(path):
    """{name: float32 array} from a .safetensors file."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        base = 8 + n
        out = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            a, b = info["data_offsets"]
            f.seek(base + a)
            raw = f.read(b - a)
            dt = info["dtype"]
            if dt == "BF16":
                arr = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
            elif dt in _DTYPES:
                arr = np.frombuffer(raw, dtype=np.dtype(_DTYPES[dt]).newbyteorder("<")).astype(np.float32)
            else:
                raise SystemExit("[export] %s: unsupported dtype %s for %s" % (path, dt, name))
            out[name] = arr.reshape(info["shape"])
    return out


def rope_theta(config):
    rp = config.get("rope_parameters")
    if isinstance(rp, dict) and "rope_theta" in rp:
        if rp.get("rope_type", "default") != "default":
            raise SystemExit("[export] rope_type %s is not supported" % rp.get("rope_type"))
        return float(rp["rope_theta"])
    if config.get("rope_scaling"):
        raise SystemExit("[export] rope_scaling is not supported")
    return float(config.get("rope_theta", 10000.0))


def load_vocab(model_dir, n_rows):
    import gguf

    with open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    with open(os.path.join(model_dir, "tokenizer_config.json"), encoding="utf-8") as f:
        tc = json.load(f)
    if tj["model"]["type"] != "BPE":
        raise SystemExit("[export] tokenizer model %s is not BPE" % tj["model"]["type"])
    by_id = {i: t for t, i in tj["model"]["vocab"].items()}
    added = {t["id"]: t for t in tj["added_tokens"]}
    for i, t in added.items():
        by_id[i] = t["content"]
    if max(by_id) >= n_rows:
        raise SystemExit("[export] token id %d beyond the %d embedding rows" % (max(by_id), n_rows))
    tokens, types = [], []
    for i in range(n_rows):
        if i not in by_id:
            tokens.append("[PAD%d]" % i)
            types.append(gguf.TokenType.UNUSED)
        elif i in added:
            c = added[i]["content"]
            special = added[i]["special"] or (c.startswith("<|") and c.endswith("|>"))
            tokens.append(c)
            types.append(gguf.TokenType.CONTROL if special else gguf.TokenType.USER_DEFINED)
        else:
            tokens.append(by_id[i])
            types.append(gguf.TokenType.NORMAL)
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    ids = {t["content"]: t["id"] for t in tj["added_tokens"]}
    return tokens, types, merges, ids, tc.get("chat_template")


def hf_to_gguf_names(names, n_layers):
    import gguf

    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH.QWEN3, n_layers)
    allowed = {gguf.TENSOR_NAMES[t] for t in gguf.MODEL_TENSORS[gguf.MODEL_ARCH.QWEN3]}
    out = {}
    for name in names:
        if not name.endswith(".weight"):
            raise SystemExit("[export] unexpected tensor %s (biases are not part of qwen3)" % name)
        g = tmap.get_name(name[: -len(".weight")])
        if g is None:
            raise SystemExit("[export] no qwen3 GGUF name for %s" % name)
        generic = g if not g.startswith("blk.") else "blk.{bid}." + g.split(".", 2)[2]
        if generic not in allowed:
            raise SystemExit("[export] %s maps to %s, which qwen3 lacks" % (name, g))
        out[name] = g + ".weight"
    return out


def write(model_dir, path, qtype, name):
    import gguf

    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    if config.get("model_type") != "qwen3":
        raise SystemExit("[export] %s: model_type %r, expected qwen3" % (model_dir, config.get("model_type")))
    weights = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    tied = "lm_head.weight" not in weights
    if tied and not config.get("tie_word_embeddings", False):
        raise SystemExit("[export] lm_head.weight missing but tie_word_embeddings is false")
    n_layers = int(config["num_hidden_layers"])
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    head_dim = int(config.get("head_dim") or hidden // heads)
    n_rows = weights["model.embed_tokens.weight"].shape[0]
    tokens, types, merges, ids, template = load_vocab(model_dir, n_rows)

    ftype = gguf.LlamaFileType.MOSTLY_F16 if qtype == "f16" else gguf.LlamaFileType.MOSTLY_Q8_0
    w = gguf.GGUFWriter(path, "qwen3")
    w.add_name(name)
    w.add_context_length(int(config.get("max_position_embeddings", 4096)))
    w.add_embedding_length(hidden)
    w.add_block_count(n_layers)
    w.add_feed_forward_length(int(config["intermediate_size"]))
    w.add_head_count(heads)
    w.add_head_count_kv(int(config.get("num_key_value_heads") or heads))
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_layer_norm_rms_eps(float(config.get("rms_norm_eps", 1e-6)))
    w.add_rope_freq_base(rope_theta(config))
    w.add_file_type(ftype)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(ids["<|endoftext|>"])
    w.add_eos_token_id(ids["<|im_end|>"])
    w.add_pad_token_id(ids["<|endoftext|>"])
    w.add_add_bos_token(False)
    if template:
        w.add_chat_template(template)

    names = hf_to_gguf_names(sorted(weights), n_layers)
    for hf_name in sorted(weights, key=lambda n: (names[n].startswith("blk."), _block_order(names[n]))):
        arr = weights[hf_name]
        g = names[hf_name]
        if arr.ndim == 1:
            w.add_tensor(g, arr.astype(np.float32))
        elif qtype == "f16":
            w.add_tensor(g, arr.astype(np.float16))
        else:
            if arr.shape[-1] % 32:
                raise SystemExit("[export] %s: rows of %d are not a multiple of 32 for Q8_0" % (hf_name, arr.shape[-1]))
            q = gguf.quants.quantize(arr, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(g, q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _block_order(g):
    parts = g.split(".")
    return (int(parts[1]), g) if parts[0] == "blk" else (-1, g)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("out_prefix")
    ap.add_argument("--types", default="f16,q8_0")
    ap.add_argument("--name", default=None)
    args = ap.parse_args()
    name = args.name or os.path.basename(os.path.normpath(args.model_dir))
    for t in args.types.split(","):
        if t not in ("f16", "q8_0"):
            raise SystemExit("[export] unknown type %s (f16, q8_0)" % t)
        path = write(args.model_dir, "%s-%s.gguf" % (args.out_prefix, t), t, name)
        print("[export] wrote %s (%d bytes)" % (path, os.path.getsize(path)))


if __name__ == "__main__":
    sys.exit(main())
