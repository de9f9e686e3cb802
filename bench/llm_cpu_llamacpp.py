#!/usr/bin/env python3
"""parley against llama.cpp (llama-cpp-python) on the CPU, on the same Q8_0 and Q4_K GGUF files.

    .venv-llm/bin/python bench/llm_cpu_llamacpp.py [--parley build/parley] [--shape qwen3-0.6b]
        [--prompt-tokens 256] [--decode-tokens 32] [--runs 3] [--threads 2] [--work DIR]

Makes `parley synth llm --shape SHAPE` (seeded weights at the real shape), writes it as GGUF
F32 with gguf's writer (llama.cpp's tensor names, no vocabulary: tokenizer.ggml.model "none"
and {arch}.vocab_size, which llama.cpp accepts) and quantizes that with llama.cpp's
llama_model_quantize to Q8_0 and Q4_K (ftype Q8_0 / Q4_K_S with `pure`: every 2-D tensor,
tied embeddings included, at that type). The files stay in --work and are reused. Then for
each type, on the same file, with the same thread count:
- parley: `parley bench llm --prompt-tokens P --batch 1 --decode-tokens D --runs R` (prefill
  of P random ids in one call; decode: a 16-token prompt, then D steps of one token; medians);
- llama.cpp: llama-cpp-python `Llama(...)` (its defaults: F16 KV cache, no flash attention,
  n_batch 512), `eval` of the same P-token prompt, and a 16-token prompt then D single-token
  `eval` calls; one warm-up, median of R runs.
Prints JSON lines: one per engine, type and phase ({"engine", "type", "phase": "prefill",
"tokens", "ms", "tokens_per_s"} / {"phase": "decode", "steps", "ms_per_token",
"tokens_per_s"}), then a summary line per type with parley / llama.cpp ratios (> 1: parley
slower).
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools", "train"))

ARCHS = {"qwen3": "QWEN3", "qwen2": "QWEN2", "llama": "LLAMA"}


def emit(doc):
    print(json.dumps(doc), flush=True)


def write_f32_gguf(folder, path):
    """A synth folder (Hugging Face layout) as GGUF F32 without a vocabulary. Qwen only: llama's
    Q / K permutation is not done here."""
    import gguf
    import numpy as np
    from export_gguf import read_safetensors

    cfg = json.load(open(os.path.join(folder, "config.json")))
    arch = getattr(gguf.MODEL_ARCH, ARCHS[cfg["model_type"]])
    if cfg["model_type"] == "llama":
        raise SystemExit("[bench] llama shapes need the Q / K permutation; use a qwen shape")
    heads, n_layers, hidden = cfg["num_attention_heads"], cfg["num_hidden_layers"], cfg["hidden_size"]
    head_dim = cfg.get("head_dim") or hidden // heads
    w = gguf.GGUFWriter(path, gguf.MODEL_ARCH_NAMES[arch])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(hidden)
    w.add_block_count(n_layers)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(heads)
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_vocab_size(cfg["vocab_size"])
    w.add_tokenizer_model("none")
    tmap = gguf.get_tensor_name_map(arch, n_layers)
    t = read_safetensors(os.path.join(folder, "model.safetensors"))
    for name in sorted(t):
        g = tmap.get_name(name, try_suffixes=(".weight", ".bias"))
        assert g, name
        w.add_tensor(g, np.ascontiguousarray(t.pop(name), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def quantize(src, dst, ftype, threads):
    import llama_cpp
    from llama_cpp._utils import suppress_stdout_stderr
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = ftype
    p.nthread = threads
    p.pure = True
    with suppress_stdout_stderr(disable=False):  # a line per tensor
        rc = llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(p))
    if rc != 0:
        raise SystemExit(f"[bench] llama_model_quantize {src} -> {dst} failed")


def make_files(args):
    """{type: path} of the Q8_0 and Q4_K files, made once in --work."""
    import llama_cpp
    os.makedirs(args.work, exist_ok=True)
    base = os.path.join(args.work, args.shape)
    files = {"q8_0": base + "-q8_0.gguf", "q4_k": base + "-q4_k.gguf"}
    if all(os.path.exists(p) for p in files.values()):
        return files
    folder, f32 = base + "-hf", base + "-f32.gguf"
    subprocess.run([args.parley, "synth", "llm", "--shape", args.shape, "--out", folder],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    write_f32_gguf(folder, f32)
    ftypes = {"q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0, "q4_k": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_S}
    for qtype, path in files.items():
        quantize(f32, path + ".tmp", ftypes[qtype], args.threads)
        os.replace(path + ".tmp", path)
    os.remove(f32)
    subprocess.run(["rm", "-rf", folder], check=True)
    return files


def bench_parley(args, qtype, path):
    r = subprocess.run([args.parley, "bench", "llm", "--model", path, "--prompt-tokens",
                        str(args.prompt_tokens), "--batch", "1", "--decode-tokens",
                        str(args.decode_tokens), "--runs", str(args.runs), "--threads",
                        str(args.threads)], check=True, capture_output=True, text=True)
    out = {}
    for line in r.stdout.splitlines():
        d = json.loads(line)
        if d.get("phase") == "prefill":
            out["prefill"] = d["ms"]
        elif d.get("phase") == "decode":
            out["decode"] = d["ms_per_step"]
    return out


def bench_llama_cpp(args, qtype, path):
    import numpy as np
    from llama_cpp import Llama

    llm = Llama(model_path=path, n_ctx=max(args.prompt_tokens, 16 + args.decode_tokens) + 16,
                n_batch=512, n_ubatch=512, n_threads=args.threads, n_threads_batch=args.threads,
                verbose=False)
    rng = np.random.default_rng(7)
    prompt = rng.integers(0, llm.n_vocab(), args.prompt_tokens).tolist()
    steps = rng.integers(0, llm.n_vocab(), 16 + args.decode_tokens).tolist()

    def prefill():
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(prompt)
        return (time.perf_counter() - t0) * 1e3

    def decode():
        llm.reset()
        llm.eval(steps[:16])
        t0 = time.perf_counter()
        for tok in steps[16:]:
            llm.eval([tok])
        return (time.perf_counter() - t0) * 1e3 / args.decode_tokens

    prefill()  # warm-up, as parley's bench does
    decode()
    out = {"prefill": statistics.median(prefill() for _ in range(args.runs)),
           "decode": statistics.median(decode() for _ in range(args.runs))}
    del llm
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parley", default=os.path.join(HERE, "..", "build", "parley"))
    ap.add_argument("--shape", default="qwen3-0.6b")
    ap.add_argument("--prompt-tokens", type=int, default=256)
    ap.add_argument("--decode-tokens", type=int, default=32)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--types", default="q8_0,q4_k")
    ap.add_argument("--work", default=os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                                   "parley-bench-llamacpp"))
    args = ap.parse_args()
    files = make_files(args)
    for qtype in args.types.split(","):
        path = files[qtype]
        got = {"parley": bench_parley(args, qtype, path),
               "llama.cpp": bench_llama_cpp(args, qtype, path)}
        for engine, r in got.items():
            base = {"bench": "llm_cpu_llamacpp", "engine": engine, "shape": args.shape,
                    "type": qtype, "threads": args.threads}
            emit({**base, "phase": "prefill", "tokens": args.prompt_tokens, "ms": round(r["prefill"], 2),
                  "tokens_per_s": round(args.prompt_tokens / r["prefill"] * 1e3, 2)})
            emit({**base, "phase": "decode", "steps": args.decode_tokens,
                  "ms_per_token": round(r["decode"], 3),
                  "tokens_per_s": round(1e3 / r["decode"], 2)})
        p, l = got["parley"], got["llama.cpp"]
        emit({"bench": "llm_cpu_llamacpp", "summary": qtype, "shape": args.shape,
              "prefill_ms_ratio": round(p["prefill"] / l["prefill"], 3),
              "decode_ms_ratio": round(p["decode"] / l["decode"], 3)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
