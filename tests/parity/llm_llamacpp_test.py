#!/usr/bin/env python3
"""parley's GGUF path against llama.cpp (llama-cpp-python, the GGUF reference) on the same files.

    llm_llamacpp_test.py PARLEY_BINARY MODELS_DIR [--steps 32] [--tol-f32 ..] [--tol-q8_0 ..]
                         [--tol-q4_k ..]

models/parley-chat-target (Qwen3, bf16) written as GGUF F32 (here, from the safetensors, with
tools/train/export_gguf.py's vocabulary and names), Q8_0 (export_gguf.py, gguf.quants) and
Q4_K (llama.cpp's own llama_model_quantize of the F32 file, ftype Q4_K_S with `pure`: every
2-D tensor Q4_K where its rows allow; rows of 384 are not a multiple of Q4_K's 256-value
super-blocks, so llama.cpp itself falls those back to Q5_0 and only ffn_down stays Q4_K; the
counts are printed). For each file and each of 4 held-out prompts (tools/train/data.py eval
--seed 2, the first json, tool_call, tool_answer and sort turns, tokenized with the model's
tokenizer.json):
- the same token ids go to llama-cpp-python (logits_all, 2 threads, F32 KV cache, no flash
  attention) and to `parley llm dump`; the max |logit difference| over every prompt position
  must be within the type's tolerance;
- --steps greedy tokens (argmax, one decode step each, past EOS too) must be identical;
- parley's logits over prompt + greedy tokens (one prefill) against llama.cpp's decode-step
  logits at the same positions: within the same tolerance.
Tolerances (measured on 2026-12-05, AMD EPYC Zen 2, llama-cpp-python 0.3.36): F32 1.3e-4
(tol 5e-4); Q8_0 0.20 (tol 0.4); Q4_K 0.26 (tol 0.5). The quantized figures are what
rounding activations to 8 bits does to two correct implementations: llama.cpp differs from
itself by 0.13 (Q8_0, the prompt in one batch against one token per call) and 0.17 (the Q4_K
file, n_ubatch 512 against 7), as a last-bit difference flips an 8-bit rounding in the next
layer (parley keeps the activations' block scales in f32, llama.cpp's Q8_0 rounds them to
f16). The prompts are those whose greedy paths have clear winners: llama.cpp's smallest
top-2 margin over the 32 steps is 1.65 (sort) to 9.9 (json), far above that noise; the other
held-out tasks reach near ties (< 0.1) after their EOS, where either token is right.
Exits 77 when llama_cpp (or gguf, tokenizers) cannot be imported or the model is missing.
"""
import argparse
import ctypes
import os
import subprocess
import sys
import tempfile
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llm_common import TRAIN, held_out_items, skip  # noqa: E402
from llm_common import parley_dump as dump  # noqa: E402

sys.path.insert(0, TRAIN)

TASKS = ("json", "tool_call", "tool_answer", "sort")


def write_f32(model_dir, path):
    """model_dir as a GGUF F32 file: export_gguf.py's metadata, vocabulary and names."""
    import json

    import gguf
    import numpy as np
    from export_gguf import _block_order, hf_to_gguf_names, load_vocab, read_safetensors, rope_theta

    config = json.load(open(os.path.join(model_dir, "config.json")))
    weights = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    n_layers, hidden = int(config["num_hidden_layers"]), int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    head_dim = int(config.get("head_dim") or hidden // heads)
    tokens, types, merges, ids, template = load_vocab(
        model_dir, weights["model.embed_tokens.weight"].shape[0])
    w = gguf.GGUFWriter(path, "qwen3")
    w.add_name(os.path.basename(os.path.normpath(model_dir)))
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
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
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
    for hf in sorted(weights, key=lambda n: (names[n].startswith("blk."), _block_order(names[n]))):
        w.add_tensor(names[hf], np.ascontiguousarray(weights[hf], dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def quantize(src, dst, ftype):
    """llama.cpp's llama_model_quantize, every 2-D tensor at ftype's type (`pure`)."""
    import llama_cpp
    from llama_cpp._utils import suppress_stdout_stderr
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = ftype
    p.nthread = 2
    p.pure = True
    with suppress_stdout_stderr(disable=False):  # a line per tensor
        rc = llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(p))
    if rc != 0:
        raise SystemExit(f"FAIL: llama_model_quantize {src} -> {dst} returned {rc}")


def tensor_types(path):
    import gguf
    return dict(Counter(t.tensor_type.name for t in gguf.GGUFReader(path).tensors))


def llama_cpp_run(llm, ids, steps):
    """(logits at the prompt positions, greedy ids, logits at prompt + greedy[:-1]) from llama.cpp:
    the prompt in one batch, then one decode call per greedy token."""
    import numpy as np
    llm.reset()
    llm.eval(ids)
    prompt = llm.scores[: len(ids)].copy()
    greedy = []
    for step in range(steps):
        greedy.append(int(np.argmax(llm.scores[llm.n_tokens - 1])))
        if step + 1 < steps:
            llm.eval([greedy[-1]])
    return prompt, greedy, llm.scores[: llm.n_tokens].copy()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("parley")
    ap.add_argument("models")
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--tol-f32", type=float, default=5e-4)
    ap.add_argument("--tol-q8_0", type=float, default=0.4)
    ap.add_argument("--tol-q4_k", type=float, default=0.5)
    args = ap.parse_args()
    try:
        import gguf  # noqa: F401
        import numpy as np
        from tokenizers import Tokenizer
    except Exception as e:  # noqa: BLE001
        skip(f"gguf / tokenizers not importable ({e}); run scripts/setup_llm_reference.sh")
    try:
        import llama_cpp
        from llama_cpp import Llama
    except Exception as e:  # noqa: BLE001
        skip(f"llama_cpp not importable ({e}); run scripts/setup_llm_reference.sh")
    target = os.path.join(args.models, "parley-chat-target")
    if not os.path.exists(os.path.join(target, "model.safetensors")):
        skip(f"no {target}")

    failures = []
    with tempfile.TemporaryDirectory(prefix="parley-llamacpp-") as work:
        prefix = os.path.join(work, "target")
        files = {"f32": prefix + "-f32.gguf", "q8_0": prefix + "-q8_0.gguf",
                 "q4_k": prefix + "-q4_k.gguf"}
        write_f32(target, files["f32"])
        subprocess.run([sys.executable, os.path.join(TRAIN, "export_gguf.py"), target, prefix,
                        "--types", "q8_0"], check=True, stdout=subprocess.DEVNULL)
        quantize(files["f32"], files["q4_k"], llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_S)

        items = held_out_items(work, 2)
        prompts = [next(it for it in items if it["task"] == t) for t in TASKS]
        tok = Tokenizer.from_file(os.path.join(target, "tokenizer.json"))
        id_lists = [tok.encode(it["prompt"], add_special_tokens=False).ids for it in prompts]

        for qtype, path in files.items():
            tol = getattr(args, "tol_" + qtype)
            llm = Llama(model_path=path, n_ctx=1024, n_batch=512, n_ubatch=512, n_threads=2,
                        n_threads_batch=2, logits_all=True, type_k=0, type_v=0,  # GGML_TYPE_F32
                        flash_attn=False, verbose=False)
            worst_prompt = worst_steps = 0.0
            margin = float("inf")  # llama.cpp's smallest top-2 logit gap along its greedy path
            same = 0
            for task, ids in zip(TASKS, id_lists):
                ref, ref_g, ref_all = llama_cpp_run(llm, ids, args.steps)
                top2 = np.sort(ref_all[len(ids) - 1:], axis=1)[:, -2:]
                margin = min(margin, float((top2[:, 1] - top2[:, 0]).min()))
                got, got_g = dump(args.parley, path, ids, args.steps, work)
                got_all, _ = dump(args.parley, path, ids + got_g[:-1], 0, work)
                d = float(np.abs(ref - got).max())
                worst_prompt = max(worst_prompt, d)
                equal = got_g == ref_g
                same += int(equal)
                if equal:  # same positions on both sides only while the tokens agree
                    worst_steps = max(worst_steps, float(np.abs(ref_all - got_all).max()))
                else:
                    k = next(i for i, (a, b) in enumerate(zip(got_g, ref_g)) if a != b)
                    top = np.argsort(-ref_all[len(ids) + k - 1])[:2]
                    failures.append(
                        f"{qtype} {task}: greedy differs at step {k} (parley {got_g[k]}, "
                        f"llama.cpp {ref_g[k]}; llama.cpp's top-2 margin there "
                        f"{ref_all[len(ids) + k - 1][top[0]] - ref_all[len(ids) + k - 1][top[1]]:.3g})")
                if d > tol:
                    failures.append(f"{qtype} {task}: prompt logits differ by {d:.3g} (tol {tol})")
            del llm
            if worst_steps > tol:
                failures.append(f"{qtype}: logits over the greedy steps differ by {worst_steps:.3g} "
                                f"(tol {tol})")
            print(f"{qtype} ({tensor_types(path)}): max |logit(parley) - logit(llama.cpp)| "
                  f"{worst_prompt:.2e} over {sum(map(len, id_lists))} prompt positions, "
                  f"{worst_steps:.2e} over the greedy steps (tol {tol:g}); greedy equal "
                  f"{same}/{len(TASKS)} over {args.steps} steps (smallest top-2 margin {margin:.2f})")
    if failures:
        print("FAIL:", "; ".join(failures))
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
