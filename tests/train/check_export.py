#!/usr/bin/env python3
"""Checks tools/train/export_gguf.py on a randomly initialised tiny Qwen3 model (no torch).

    check_export.py

Writes a Hugging Face layout folder by hand (config.json as transformers 5 writes it, with
rope_parameters; model.safetensors in BF16; a tokenizer trained by tools/train/tokenizer.py
on a few generated conversations), exports GGUF F16 and Q8_0, and reads both back with
gguf.GGUFReader: architecture and qwen3.* metadata, the tokenizer keys, the exact tensor
name set with GGUF's innermost-first shapes and types, F16 values equal to the BF16 weights,
Q8_0 within a quantization step, and an untied variant that writes output.weight.
Exit 0 when all hold; prints the first failure otherwise.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN = os.path.join(ROOT, "tools", "train")
sys.path.insert(0, TRAIN)

import gguf  # noqa: E402

import data  # noqa: E402
import tokenizer  # noqa: E402

HIDDEN, LAYERS, HEADS, KV, HEAD_DIM, INTER = 64, 2, 4, 2, 32, 96


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def to_bf16_bits(a):
    # Round to nearest even, as torch does when casting to bfloat16.
    u = a.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def write_bf16_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, arr in tensors.items():
        raw = to_bf16_bits(arr).tobytes()
        header[name] = {"dtype": "BF16", "shape": list(arr.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def make_model(folder, tied, rng):
    os.makedirs(folder, exist_ok=True)
    texts = []
    r = __import__("random").Random(3)
    for _ in range(300):
        msgs = data.plain_conversation(r, ["Some prose for the tokenizer. It has two sentences."])
        texts.append(data.render(data.strip(msgs)))
    tok = tokenizer.build(600, texts)
    tok.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump(tokenizer.tokenizer_config(tok), f)
    vocab = -(-tok.get_vocab_size() // 64) * 64
    config = {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "vocab_size": vocab,
        "hidden_size": HIDDEN,
        "intermediate_size": INTER,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV,
        "head_dim": HEAD_DIM,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-6,
        "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
        "tie_word_embeddings": tied,
        "dtype": "bfloat16",
    }
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
    w = {"model.embed_tokens.weight": rng.normal(0, 0.02, (vocab, HIDDEN)), "model.norm.weight": 1 + rng.normal(0, 0.1, HIDDEN)}
    for i in range(LAYERS):
        p = "model.layers.%d." % i
        w[p + "input_layernorm.weight"] = 1 + rng.normal(0, 0.1, HIDDEN)
        w[p + "post_attention_layernorm.weight"] = 1 + rng.normal(0, 0.1, HIDDEN)
        w[p + "self_attn.q_proj.weight"] = rng.normal(0, 0.02, (HEADS * HEAD_DIM, HIDDEN))
        w[p + "self_attn.k_proj.weight"] = rng.normal(0, 0.02, (KV * HEAD_DIM, HIDDEN))
        w[p + "self_attn.v_proj.weight"] = rng.normal(0, 0.02, (KV * HEAD_DIM, HIDDEN))
        w[p + "self_attn.o_proj.weight"] = rng.normal(0, 0.02, (HIDDEN, HEADS * HEAD_DIM))
        w[p + "self_attn.q_norm.weight"] = 1 + rng.normal(0, 0.1, HEAD_DIM)
        w[p + "self_attn.k_norm.weight"] = 1 + rng.normal(0, 0.1, HEAD_DIM)
        w[p + "mlp.gate_proj.weight"] = rng.normal(0, 0.02, (INTER, HIDDEN))
        w[p + "mlp.up_proj.weight"] = rng.normal(0, 0.02, (INTER, HIDDEN))
        w[p + "mlp.down_proj.weight"] = rng.normal(0, 0.02, (HIDDEN, INTER))
    if not tied:
        w["lm_head.weight"] = rng.normal(0, 0.02, (vocab, HIDDEN))
    w = {k: v.astype(np.float32) for k, v in w.items()}
    write_bf16_safetensors(os.path.join(folder, "model.safetensors"), w)
    # What the file holds: the BF16-rounded values.
    return {k: (to_bf16_bits(v).astype(np.uint32) << 16).view(np.float32) for k, v in w.items()}, tok, vocab


def field(reader, key):
    f = reader.get_field(key)
    if f is None:
        fail("missing key " + key)
    return f.contents()


def expected_names(tied):
    names = {"token_embd.weight", "output_norm.weight"} | ({"output.weight"} if not tied else set())
    for i in range(LAYERS):
        for t in ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm", "attn_k_norm", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"):
            names.add("blk.%d.%s.weight" % (i, t))
    return names


HF_OF = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def hf_name(g):
    parts = g[: -len(".weight")].split(".")
    if parts[0] == "blk":
        return "model.layers.%s.%s.weight" % (parts[1], HF_OF[parts[2]])
    return HF_OF[parts[0]] + ".weight"


def check(path, qtype, weights, tok, vocab, tied):
    r = gguf.GGUFReader(path)
    want = {
        "general.architecture": "qwen3",
        "qwen3.embedding_length": HIDDEN,
        "qwen3.block_count": LAYERS,
        "qwen3.feed_forward_length": INTER,
        "qwen3.attention.head_count": HEADS,
        "qwen3.attention.head_count_kv": KV,
        "qwen3.attention.key_length": HEAD_DIM,
        "qwen3.attention.value_length": HEAD_DIM,
        "qwen3.context_length": 4096,
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "qwen2",
        "tokenizer.ggml.eos_token_id": tok.token_to_id("<|im_end|>"),
        "tokenizer.ggml.padding_token_id": tok.token_to_id("<|endoftext|>"),
        "tokenizer.ggml.add_bos_token": False,
        "general.file_type": 1 if qtype == "f16" else 7,
    }
    for k, v in want.items():
        if field(r, k) != v:
            fail("%s: %s = %r, want %r" % (path, k, field(r, k), v))
    if abs(field(r, "qwen3.rope.freq_base") - 1e6) > 1 or abs(field(r, "qwen3.attention.layer_norm_rms_epsilon") - 1e-6) > 1e-9:
        fail("rope base or rms eps wrong")
    tokens = field(r, "tokenizer.ggml.tokens")
    types = field(r, "tokenizer.ggml.token_type")
    if len(tokens) != vocab or len(types) != vocab:
        fail("%d tokens / %d types, want %d" % (len(tokens), len(types), vocab))
    tj = json.load(open(os.path.join(os.path.dirname(path), "model", "tokenizer.json")))
    for t, i in list(tj["model"]["vocab"].items())[:50]:
        if tokens[i] != t or types[i] != 1:
            fail("token %d is %r/%d, want %r/NORMAL" % (i, tokens[i], types[i], t))
    for t, ty in (("<|im_end|>", 3), ("<|im_start|>", 3), ("<think>", 4), ("</tool_call>", 4)):
        if tokens[tok.token_to_id(t)] != t or types[tok.token_to_id(t)] != ty:
            fail("special %s has type %d" % (t, types[tok.token_to_id(t)]))
    if tok.get_vocab_size() < vocab and (types[vocab - 1] != 5 or not tokens[vocab - 1].startswith("[PAD")):
        fail("padding tokens not UNUSED")
    merges = field(r, "tokenizer.ggml.merges")
    if len(merges) != len(tj["model"]["merges"]) or merges[0] != " ".join(tj["model"]["merges"][0]) if not isinstance(tj["model"]["merges"][0], str) else merges[0] != tj["model"]["merges"][0]:
        fail("merges differ")
    if field(r, "tokenizer.chat_template") != open(os.path.join(TRAIN, "chat_template.jinja")).read():
        fail("chat template differs")
    names = {t.name for t in r.tensors}
    if names != expected_names(tied):
        fail("tensor names %s" % sorted(names ^ expected_names(tied)))
    for t in r.tensors:
        src = weights[hf_name(t.name)]
        if list(t.shape) != list(reversed(src.shape)):
            fail("%s shape %s, want %s reversed" % (t.name, list(t.shape), src.shape))
        if src.ndim == 1:
            if t.tensor_type != gguf.GGMLQuantizationType.F32 or not np.array_equal(np.asarray(t.data).reshape(src.shape), src):
                fail("%s: 1-D tensor not exact F32" % t.name)
            continue
        if qtype == "f16":
            if t.tensor_type != gguf.GGMLQuantizationType.F16:
                fail("%s type %s" % (t.name, t.tensor_type))
            got = np.asarray(t.data).reshape(src.shape).astype(np.float32)
            if not np.array_equal(got, src.astype(np.float16).astype(np.float32)):
                fail("%s F16 values differ" % t.name)
        else:
            if t.tensor_type != gguf.GGMLQuantizationType.Q8_0:
                fail("%s type %s" % (t.name, t.tensor_type))
            got = gguf.quants.dequantize(np.asarray(t.data), gguf.GGMLQuantizationType.Q8_0).reshape(src.shape)
            # Values are rounded with the exact scale amax / 127 and dequantized with its f16
            # rounding: half a step plus up to 127 times the scale's rounding error.
            amax = np.abs(src.reshape(-1, 32)).max(axis=1)
            d = amax / 127.0
            d16 = d.astype(np.float16).astype(np.float32)
            tol = 0.5 * d + 127.0 * np.abs(d16 - d) + 1e-7
            err = np.abs(got - src).reshape(-1, 32).max(axis=1)
            if not np.all(err <= tol):
                fail("%s Q8_0 error %.3g of a step" % (t.name, float((err / d).max())))


def main():
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as tmp:
        for tied in (True, False):
            d = os.path.join(tmp, "tied" if tied else "untied")
            weights, tok, vocab = make_model(os.path.join(d, "model"), tied, rng)
            out = subprocess.run(
                [sys.executable, os.path.join(TRAIN, "export_gguf.py"), os.path.join(d, "model"), os.path.join(d, "m")],
                capture_output=True,
                text=True,
            )
            if out.returncode != 0:
                fail("export failed: " + out.stdout + out.stderr)
            for q in ("f16", "q8_0"):
                check(os.path.join(d, "m-%s.gguf" % q), q, weights, tok, vocab, tied)
        # Bad input: a non-qwen3 folder is refused with a message naming the problem.
        cfg = os.path.join(tmp, "tied", "model", "config.json")
        c = json.load(open(cfg))
        c["model_type"] = "llama"
        json.dump(c, open(cfg, "w"))
        out = subprocess.run([sys.executable, os.path.join(TRAIN, "export_gguf.py"), os.path.dirname(cfg), os.path.join(tmp, "x")], capture_output=True, text=True)
        if out.returncode == 0 or "expected qwen3" not in out.stdout + out.stderr:
            fail("a llama config was not refused: " + out.stdout + out.stderr)
    print("export_gguf: tied and untied, F16 and Q8_0 read back with the right names, shapes, types and values")


if __name__ == "__main__":
    main()
