#!/usr/bin/env python3
"""The same Whisper weights in every layout parley loads give the same transcript.

    layouts_test.py PARLEY_BINARY MODEL_DIR DATA_DIR [--cache-dir DIR] [--synth-shape tiny]
        [--clip jfk.wav]

Rewrites MODEL_DIR (the real tiny.en, CTranslate2 float16) with tools/reference/to_layouts.py
into the mlx-community layout (weights.safetensors float16) and a whisper.cpp ggml F16 file,
and a synthetic multilingual model (`parley synth whisper --seed 0`, Hugging Face layout,
float32) into mlx (weights.npz float32) and ggml F32 (--all adds tiny.en -> mlx npz float32,
ggml F32 and synth -> mlx safetensors float32). Each converted model goes through
`parley inspect --json` (its layout must be detected), `parley transcribe -f verbose_json` and
`parley whisper dump --what logits` on the clip, and is compared with its original:
  - tokens, segments and timestamps identical;
  - the first window's per-step logits: bit-identical where the converted weights are the
    original values exactly and the encoder positions are stored (ggml F32 and F16 of the
    float16 tiny.en: float16 -> float32 is exact; ggml F32 of the float32 synthetic model);
    within --tol-mlx x max|logit| for mlx, which stores no encoder positions (mlx-whisper
    computes the sinusoids itself, in float32, where the originals store them float16 or
    rounded once from double). Measured (2026-11-30): tiny.en 7.2e-3 (1.9e-4 x 38.2),
    synthetic tiny 0.108 (3.1e-3 x 34.7: its LayerNorm gains of ~16 amplify).
Converted models are cached under --cache-dir, keyed by the sha256 of the source weights
and of to_layouts.py.
Exits 77 (ctest SKIP_RETURN_CODE) without the model, the clip or NumPy.
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity_common import REF_DIR, SKIP, sha256, synth_model, transcribe_json  # noqa: E402

TO_LAYOUTS = os.path.join(REF_DIR, "to_layouts.py")


def convert(src, weights_file, kind, args, cache_dir, vocab_dir):
    """Runs to_layouts.py once per (source digest, kind); returns the model path."""
    # Keyed by the converter too, so a changed to_layouts.py never reuses old output.
    digest = hashlib.sha256((sha256(os.path.join(src, weights_file)) +
                             sha256(TO_LAYOUTS)).encode()).hexdigest()[:16]
    out = os.path.join(cache_dir, f"layout-{digest}-{kind}")
    done = out + ".done"
    if not os.path.exists(done):
        if os.path.isdir(out):
            shutil.rmtree(out)
        t = time.time()
        if args[0] == "ggml":
            os.makedirs(out, exist_ok=True)
            cmd = [sys.executable, TO_LAYOUTS, "ggml", src, os.path.join(out, "ggml-model.bin"),
                   "--vocab-dir", vocab_dir, *args[1:]]
        else:
            cmd = [sys.executable, TO_LAYOUTS, "mlx", src, out, *args[1:]]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        open(done, "w").close()
        print(f"converted {src} -> {kind} in {time.time() - t:.1f}s")
    # ggml: the file itself (a directory with one ggml file loads too; the file is what
    # users pass).
    return os.path.join(out, "ggml-model.bin") if args[0] == "ggml" else out


def run(parley, model, clip, work, tag, language):
    """(layout, segments, logits) of one model on the clip."""
    import numpy as np

    lang = ["--language", language] if language else []
    info = json.loads(subprocess.run([parley, "inspect", model, "--json", "--limit", "1"],
                                     check=True, capture_output=True, text=True).stdout)
    out_dir = os.path.join(work, tag)
    segments = transcribe_json(parley, model, clip, out_dir, [
        *lang,
        # greedy only: the same one decode per window in every layout
        "--temperature", "0", "--temperature-increment-on-fallback", "none"])["segments"]
    npy = os.path.join(out_dir, "logits.npy")
    subprocess.run([parley, "whisper", "dump", "--model", model, "--audio", clip, "--what",
                    "logits", "--out", npy, *lang], check=True, stdout=subprocess.DEVNULL)
    return info.get("whisper_layout"), segments, np.load(npy).astype(np.float64)


def compare(name, layout, want_layout, ref, got, exact, tol_rel):
    """Prints one row; returns True when it passes."""
    import numpy as np

    _, rs, rl = ref
    got_layout, gs, gl = got
    tokens_equal = [s["tokens"] for s in rs] == [s["tokens"] for s in gs]
    times_equal = [(s["seek"], s["start"], s["end"]) for s in rs] == \
                  [(s["seek"], s["start"], s["end"]) for s in gs]
    n = sum(len(s["tokens"]) for s in gs)
    if rl.shape == gl.shape:
        d = float(np.abs(rl - gl).max())
        limit = 0.0 if exact else tol_rel * float(np.abs(rl).max())
        logits_ok = d <= limit
        dtext = f"{d:.3e} (limit {limit:.2e})"
    else:
        logits_ok, dtext = False, f"shapes {rl.shape} vs {gl.shape}"
    ok = tokens_equal and times_equal and logits_ok and got_layout == want_layout
    print(f"{name:34} {str(got_layout):12} {'equal' if tokens_equal else 'DIFFER':7} "
          f"{n:4} tokens  segments {'equal' if times_equal else 'DIFFER':6}  logits max|d| "
          f"{dtext}{'' if ok else '   <-- FAIL'}")
    if not tokens_equal:
        print(f"    original:  {[s['tokens'] for s in rs]}\n    converted: {[s['tokens'] for s in gs]}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("parley")
    ap.add_argument("model_dir")
    ap.add_argument("data_dir")
    ap.add_argument("--cache-dir", default=os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "parley-ref"))
    ap.add_argument("--synth-shape", default="tiny")
    ap.add_argument("--clip", default="jfk.wav")
    ap.add_argument("--all", action="store_true", help="also the three slower extra cases")
    ap.add_argument("--tol-mlx", type=float, default=5e-3,
                    help="mlx / bfloat16 logits bound, relative to the original's max|logit|")
    args = ap.parse_args()
    try:
        import numpy  # noqa: F401
    except ImportError:
        print("SKIP: no NumPy")
        return SKIP
    clip = os.path.join(args.data_dir, "audio", args.clip)
    vocab_dir = os.path.join(args.data_dir, "whisper")
    if not os.path.exists(os.path.join(args.model_dir, "model.bin")):
        print(f"SKIP: no model at {args.model_dir}; run scripts/setup.sh")
        return SKIP
    if not os.path.exists(clip):
        print(f"SKIP: no clip {clip}")
        return SKIP
    os.makedirs(args.cache_dir, exist_ok=True)
    t0 = time.time()
    real = args.model_dir
    # Not the openai synth test's folder: ctest -j may run both at once.
    synth = synth_model(args.parley, args.synth_shape, 0,
                        os.path.join(vocab_dir, "multilingual.tiktoken"), args.cache_dir,
                        prefix="layouts-synth-whisper")
    # (name, source, source weights, converter args, expected layout, exact logits, language)
    cases = [
        ("tiny.en -> mlx safetensors f16", real, "model.bin", ["mlx", "--dtype", "float16"],
         "mlx", False, None),
        ("tiny.en -> ggml F16", real, "model.bin", ["ggml"], "ggml", True, None),
        (f"synth {args.synth_shape} -> mlx npz f32", synth, "model.safetensors",
         ["mlx", "--format", "npz", "--dtype", "float32"], "mlx", False, "en"),
        (f"synth {args.synth_shape} -> ggml F32", synth, "model.safetensors", ["ggml", "--f32"],
         "ggml", True, "en"),
    ]
    if args.all:
        cases += [
            ("tiny.en -> mlx npz f32", real, "model.bin",
             ["mlx", "--format", "npz", "--dtype", "float32"], "mlx", False, None),
            ("tiny.en -> ggml F32", real, "model.bin", ["ggml", "--f32"], "ggml", True, None),
            (f"synth {args.synth_shape} -> mlx safetensors f32", synth, "model.safetensors",
             ["mlx", "--dtype", "float32"], "mlx", False, "en"),
        ]
    failures = []
    with tempfile.TemporaryDirectory(prefix="parley-layouts-") as work:
        originals = {}
        for i, (name, src, weights, conv, layout, exact, lang) in enumerate(cases):
            if src not in originals:
                originals[src] = run(args.parley, src, clip, work, f"orig-{len(originals)}", lang)
            kind = "-".join(a.strip("-") for a in conv)
            model = convert(src, weights, kind, conv, args.cache_dir, vocab_dir)
            got = run(args.parley, model, clip, work, f"case-{i}", lang)
            if not compare(name, got[0], layout, originals[src], got, exact, args.tol_mlx):
                failures.append(name)
    print(f"total {time.time() - t0:.1f}s")
    if failures:
        print(f"FAIL: {', '.join(failures)}")
        return 1
    print(f"OK: {len(cases)} converted models match their originals on {args.clip}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
