#!/usr/bin/env python3
"""A synthetic chat-model folder (`parley synth llm --dtype bf16`, llama or qwen3) as a BF16
GGUF for llama.cpp's llama-bench, on the GPU machine (issue 23, item 10: the same weights).

    PYTHONPATH=LLAMA_CPP/gguf-py python3 tools/device/llm_synth_gguf.py DIR OUT.gguf

Tensors as llama.cpp's converter lays them out: its names (gguf's TensorNameMap), llama's Q
and K rows permuted for its interleaved RoPE (qwen3 uses NEOX RoPE: not permuted), llama3
RoPE scaling as the rope_freqs tensor; the bf16 bits are copied, never rounded again (the
safetensors file is memory-mapped). A synthetic folder has no tokenizer, and llama.cpp needs
one to load: a byte-level BPE vocabulary of the embedding's size is written (GPT-2's 256
byte tokens, then <|tN|> placeholders, one merge); llama-bench feeds token ids, so the
vocabulary only has to load.
"""
import json
import math
import os
import struct
import sys

import numpy as np
import gguf


def read_bf16(path):
    """{name: (uint16 array view of the bf16 bits, shape)} from a safetensors file."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "BF16":
            raise SystemExit(f"[synth gguf] {name} is {info['dtype']}, not BF16")
        a, b = info["data_offsets"]
        out[name] = mm[8 + n + a:8 + n + b].view(np.uint16).reshape(info["shape"])
    return out


def permute(w, n_head):
    """llama.cpp's converter: rotate-half pairs (i, i + D/2) to interleaved (2i, 2i + 1)."""
    return np.ascontiguousarray(
        w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape))


def llama3_factors(cfg, head_dim):
    rs = cfg["rope_scaling"]
    base = cfg.get("rope_theta", 10000.0)
    factor, low, high = rs["factor"], rs.get("low_freq_factor", 1.0), rs.get("high_freq_factor", 4.0)
    old = rs.get("original_max_position_embeddings", 8192)
    out = []
    for i in range(0, head_dim, 2):
        wav = 2 * math.pi * base ** (i / head_dim)
        if wav < old / high:
            out.append(1.0)
        elif wav > old / low:
            out.append(factor)
        else:
            smooth = (old / wav - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def byte_tokens():
    """GPT-2's byte-to-unicode table: the 256 byte-level token strings."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for _, c in sorted(zip(bs, cs))]


def main():
    folder, path = sys.argv[1], sys.argv[2]
    cfg = json.load(open(os.path.join(folder, "config.json")))
    mt = cfg["model_type"]
    arch = {"llama": gguf.MODEL_ARCH.LLAMA, "qwen3": gguf.MODEL_ARCH.QWEN3}.get(mt)
    if arch is None:
        raise SystemExit(f"[synth gguf] model_type {mt}: llama or qwen3 only")
    t = read_bf16(os.path.join(folder, "model.safetensors"))
    heads, kv, hidden = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["hidden_size"]
    n_layers, vocab = cfg["num_hidden_layers"], cfg["vocab_size"]
    head_dim = cfg.get("head_dim") or hidden // heads
    w = gguf.GGUFWriter(path, gguf.MODEL_ARCH_NAMES[arch])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(hidden)
    w.add_block_count(n_layers)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)
    toks = byte_tokens() + [f"<|t{i}|>" for i in range(256, vocab)]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(toks)
    w.add_token_types([gguf.TokenType.NORMAL] * vocab)
    w.add_token_merges(["Ġ Ġ"])  # llama.cpp requires the key; gguf drops an empty list
    bos = cfg.get("bos_token_id") or 0
    eos = cfg.get("eos_token_id")
    w.add_bos_token_id(int(bos))
    w.add_eos_token_id(int(eos[0] if isinstance(eos, list) else (eos or 0)))
    tmap = gguf.get_tensor_name_map(arch, n_layers)
    bf16 = gguf.GGMLQuantizationType.BF16
    for name, arr in t.items():
        if arch == gguf.MODEL_ARCH.LLAMA and name.endswith("q_proj.weight"):
            arr = permute(arr, heads)
        elif arch == gguf.MODEL_ARCH.LLAMA and name.endswith("k_proj.weight"):
            arr = permute(arr, kv)
        g = tmap.get_name(name, try_suffixes=(".weight", ".bias"))
        if g is None:
            raise SystemExit(f"[synth gguf] no GGUF name for {name}")
        if arr.ndim == 1:  # norms as F32, as llama.cpp's converter keeps them
            f32 = (arr.astype(np.uint32) << 16).view(np.float32)
            w.add_tensor(g, np.ascontiguousarray(f32))
        else:
            w.add_tensor(g, arr, raw_shape=arr.shape, raw_dtype=bf16)
    if (cfg.get("rope_scaling") or {}).get("rope_type") == "llama3":
        w.add_tensor("rope_freqs.weight", llama3_factors(cfg, head_dim))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
