#!/usr/bin/env python3
"""parley's GGUF chat-model loader against the same weights in Hugging Face layout.

    llm_gguf_test.py PARLEY_BINARY MODELS_DIR [--tol-f16 1e-2] [--tol-llama 1e-4]

1. models/parley-chat-target (Qwen3, bf16) exported by tools/train/export_gguf.py as GGUF
   F16 and Q8_0. On held-out prompts (tools/train/data.py eval --seed 2) parley's logits
   (`parley llm dump`) at every position on the F16 file are within --tol-f16 of those on the
   Hugging Face folder (bf16 -> f16 rounding of the weights) with identical greedy answers;
   on the Q8_0 file the greedy answers to 12 held-out 3-digit additions are >= 90 % right
   (the max logit difference to the folder is printed).
2. Llama: `parley synth llm --shape tiny-llama` (f32, llama3 RoPE scaling) written here as a
   GGUF the way llama.cpp's converter writes llama (gguf.GGUFWriter, llama.cpp's tensor
   names, Q and K rows permuted for interleaved RoPE, llama3 scaling as rope_freqs): parley's
   logits on it equal those on the folder within --tol-llama, which checks the un-permute;
   with Q8_0 linear weights (kept in blocks, rows moved by the un-permute) within
   --tol-llama-q8 and the same argmax at >= 90 % of positions (no un-permute: off by ~13).
3. tiny-qwen2, tiny-qwen3_moe and tiny-gemma3 written the same way (experts stacked, Gemma's
   norms as 1 + w, its window / pattern / linear scaling / attention.scale): within
   --tol-llama of their folders, greedy equal.
Exits 77 without the gguf / tokenizers packages or without the models.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llm_common import EOS, TRAIN, held_out_items, skip, until_eos  # noqa: E402
from llm_common import parley_dump as dump  # noqa: E402

sys.path.insert(0, TRAIN)
from export_gguf import read_safetensors  # noqa: E402  (tools/train: {name: f32 array})


def permute(w, n_head):
    """llama.cpp's converter (LlamaModel.permute): rows of each head reordered from
    transformers' rotate-half pairs (i, i + D/2) to interleaved pairs (2i, 2i + 1)."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
             .swapaxes(1, 2).reshape(w.shape))


def llama3_factors(cfg, head_dim):
    """rope_freqs as llama.cpp's converter writes them for rope_type llama3."""
    rs = cfg["rope_scaling"]
    base = cfg.get("rope_theta", 10000.0)
    factor, low, high = rs["factor"], rs.get("low_freq_factor", 1.0), rs.get("high_freq_factor", 4.0)
    old = rs.get("original_max_position_embeddings", 8192)
    low_wav, high_wav = old / low, old / high
    out = []
    for i in range(0, head_dim, 2):
        freq = 1.0 / (base ** (i / head_dim))
        wav = 2 * math.pi / freq
        if wav < high_wav:
            out.append(1.0)
        elif wav > low_wav:
            out.append(factor)
        else:
            smooth = (old / wav - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return out


def write_llama_gguf(folder, path, q8=False):
    import gguf
    import numpy as np
    cfg = json.load(open(os.path.join(folder, "config.json")))
    t = read_safetensors(os.path.join(folder, "model.safetensors"))
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hidden = cfg["hidden_size"]
    head_dim = cfg.get("head_dim") or hidden // heads
    w = gguf.GGUFWriter(path, "llama")
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(hidden)
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, cfg["num_hidden_layers"])
    for name, arr in t.items():
        if name.endswith(("q_proj.weight", "q_proj.bias")):
            arr = permute(arr, heads)
        elif name.endswith(("k_proj.weight", "k_proj.bias")):
            arr = permute(arr, kv)
        g = tmap.get_name(name, try_suffixes=(".weight", ".bias"))
        assert g, name
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        if q8 and arr.ndim == 2 and "embed_tokens" not in name and "lm_head" not in name:
            q = gguf.quants.quantize(arr, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(g, q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(g, arr)
    if cfg.get("rope_scaling", {}).get("rope_type") == "llama3":
        w.add_tensor("rope_freqs.weight", np.array(llama3_factors(cfg, head_dim), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


FAMILIES = {  # synth shape -> gguf architecture
    "tiny-qwen2": "QWEN2",
    "tiny-qwen3_moe": "QWEN3MOE",
    "tiny-gemma3": "GEMMA3",
}


def write_family_gguf(folder, path, arch_name):
    """Another family's synth folder as llama.cpp's converter lays it out (f32): experts
    stacked as ffn_*_exps, Gemma's norms stored as 1 + w, its window, pattern, linear RoPE
    scaling and score scale (attention.scale) in the metadata."""
    import gguf
    import numpy as np
    arch = getattr(gguf.MODEL_ARCH, arch_name)
    cfg = json.load(open(os.path.join(folder, "config.json")))
    t = read_safetensors(os.path.join(folder, "model.safetensors"))
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hidden, n_layers = cfg["hidden_size"], cfg["num_hidden_layers"]
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
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    gemma = arch_name == "GEMMA3"
    if "num_experts" in cfg:
        w.add_expert_count(cfg["num_experts"])
        w.add_expert_used_count(cfg["num_experts_per_tok"])
        w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
        w.add_expert_weights_norm(bool(cfg.get("norm_topk_prob", False)))
    if gemma:
        w.add_sliding_window(cfg["sliding_window"])
        w.add_sliding_window_pattern(int(cfg["sliding_window_pattern"]))
        w.add_attention_scale(cfg["query_pre_attn_scalar"] ** -0.5)
        rs = cfg.get("rope_scaling") or {}
        if rs.get("rope_type") == "linear":
            w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
            w.add_rope_scaling_factor(rs["factor"])
    tmap = gguf.get_tensor_name_map(arch, n_layers)
    experts = {}
    for name, arr in t.items():
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        if ".mlp.experts." in name:  # model.layers.L.mlp.experts.X.gate_proj.weight
            parts = name.split(".")
            experts.setdefault((int(parts[2]), parts[6]), {})[int(parts[5])] = arr
            continue
        if gemma and name.endswith("norm.weight"):
            arr = arr + np.float32(1.0)  # the converter's norm_shift
        g = tmap.get_name(name, try_suffixes=(".weight", ".bias"))
        if g is None and ".mlp." in name:  # a dense layer of an MoE model (mlp_only_layers)
            parts = name.split(".")
            dense = {"gate_proj": "ffn_gate", "up_proj": "ffn_up", "down_proj": "ffn_down"}
            g = f"blk.{parts[2]}.{dense[parts[4]]}.weight"
        assert g, name
        w.add_tensor(g, arr)
    for (layer, proj), per in sorted(experts.items()):
        base = {"gate_proj": "ffn_gate_exps", "up_proj": "ffn_up_exps", "down_proj": "ffn_down_exps"}
        w.add_tensor(f"blk.{layer}.{base[proj]}.weight", np.stack([per[e] for e in sorted(per)]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("parley")
    ap.add_argument("models")
    ap.add_argument("--tol-f16", type=float, default=1e-2)
    ap.add_argument("--tol-llama", type=float, default=1e-4)
    ap.add_argument("--tol-llama-q8", type=float, default=0.5)
    args = ap.parse_args()
    try:
        import gguf  # noqa: F401
        import numpy as np
        from tokenizers import Tokenizer
    except Exception as e:  # noqa: BLE001
        skip(f"gguf / tokenizers not importable ({e}); run scripts/setup_llm_reference.sh")
    target = os.path.join(args.models, "parley-chat-target")
    if not os.path.exists(os.path.join(target, "model.safetensors")):
        skip(f"no {target}")
    failures = []
    with tempfile.TemporaryDirectory(prefix="parley-gguf-") as work:
        # 2. Llama with the converter's Q/K permutation.
        llama = os.path.join(work, "tiny-llama")
        subprocess.run([args.parley, "synth", "llm", "--shape", "tiny-llama", "--out", llama],
                       check=True, stdout=subprocess.DEVNULL)
        llama_gguf = os.path.join(work, "tiny-llama.gguf")
        write_llama_gguf(llama, llama_gguf)
        ids = [(i * 7919 + 13) % 2048 for i in range(48)]
        ref, ref_g = dump(args.parley, llama, ids, 8, work)
        got, got_g = dump(args.parley, llama_gguf, ids, 8, work)
        d = float(np.abs(ref - got).max())
        print(f"tiny-llama: max |logit(gguf) - logit(folder)| {d:.2e} over {len(ids)} positions; "
              f"greedy equal {ref_g == got_g}")
        if not d <= args.tol_llama or ref_g != got_g:
            failures.append(f"tiny-llama: logits differ by {d:.2e} (tol {args.tol_llama}) or "
                            "greedy differs")
        # The same with Q8_0 linear weights (kept in blocks; the un-permute moves their rows).
        llama_q8 = os.path.join(work, "tiny-llama-q8_0.gguf")
        write_llama_gguf(llama, llama_q8, q8=True)
        got, got_g = dump(args.parley, llama_q8, ids, 8, work)
        d8 = float(np.abs(ref - got).max())
        scale = float(np.abs(ref).max())
        # Random weights have near ties, so the argmax is compared per position, not greedy runs.
        agree = float((ref.argmax(-1) == got.argmax(-1)).mean())
        print(f"tiny-llama q8_0: max |logit(gguf) - logit(folder)| {d8:.2e} (logits up to "
              f"{scale:.1f}); argmax equal at {agree:.0%} of positions")
        if not d8 <= args.tol_llama_q8 or agree < 0.9:
            failures.append(f"tiny-llama q8_0: logits differ by {d8:.2e} (tol "
                            f"{args.tol_llama_q8}) or argmax equal at only {agree:.0%}")

        # 3. The other families' layouts (f32): the same logits.
        ids = [(i * 7919 + 13) % 2048 for i in range(80)]  # past gemma's 64-token window
        for shape, arch_name in FAMILIES.items():
            folder = os.path.join(work, shape)
            subprocess.run([args.parley, "synth", "llm", "--shape", shape, "--out", folder],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            path = folder + ".gguf"
            write_family_gguf(folder, path, arch_name)
            ref, ref_g = dump(args.parley, folder, ids, 8, work)
            got, got_g = dump(args.parley, path, ids, 8, work)
            d = float(np.abs(ref - got).max())
            print(f"{shape}: max |logit(gguf) - logit(folder)| {d:.2e} over {len(ids)} positions; "
                  f"greedy equal {ref_g == got_g}")
            if not d <= args.tol_llama or ref_g != got_g:
                failures.append(f"{shape}: logits differ by {d:.2e} (tol {args.tol_llama}) or "
                                "greedy differs")

        # 1. The trained Qwen3 as F16 and Q8_0.
        prefix = os.path.join(work, "target")
        subprocess.run([sys.executable, os.path.join(TRAIN, "export_gguf.py"), target, prefix,
                        "--types", "f16,q8_0"], check=True, stdout=subprocess.DEVNULL)
        items = held_out_items(work, 12)
        adds = [it for it in items if it["task"] == "add3"][:12]
        tok = Tokenizer.from_file(os.path.join(target, "tokenizer.json"))
        eos = tok.token_to_id(EOS)
        worst16, worst8, same16, exact8 = 0.0, 0.0, 0, 0
        for i, it in enumerate(adds):
            ids = tok.encode(it["prompt"], add_special_tokens=False).ids
            ref, ref_g = dump(args.parley, target, ids, 12, work)
            if i < 4:
                l16, g16 = dump(args.parley, prefix + "-f16.gguf", ids, 12, work)
                worst16 = max(worst16, float(np.abs(ref - l16).max()))
                same16 += int(until_eos(g16, eos) == until_eos(ref_g, eos))
            l8, g8 = dump(args.parley, prefix + "-q8_0.gguf", ids, 12, work)
            worst8 = max(worst8, float(np.abs(ref - l8).max()))
            text = tok.decode([t for t in until_eos(g8, eos) if t != eos], skip_special_tokens=False)
            exact8 += int(text == it["answer"])
        print(f"parley-chat-target f16.gguf: max |logit - folder| {worst16:.2e} over 4 prompts, "
              f"greedy equal {same16}/4")
        print(f"parley-chat-target q8_0.gguf: max |logit - folder| {worst8:.2e}; add3 exact "
              f"{exact8}/{len(adds)}")
        if not worst16 <= args.tol_f16 or same16 != 4:
            failures.append(f"f16: logits differ by {worst16:.2e} (tol {args.tol_f16}) or "
                            f"{4 - same16} greedy answers differ")
        if exact8 < 0.9 * len(adds):
            failures.append(f"q8_0: add3 {exact8}/{len(adds)} below 90 %")
    if failures:
        print("FAIL:", "; ".join(failures))
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
