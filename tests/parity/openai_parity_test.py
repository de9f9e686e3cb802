#!/usr/bin/env python3
"""Live parity of `parley transcribe` against openai-whisper on the same weights.

    openai_parity_test.py PARLEY_BINARY MODEL_DIR DATA_DIR [--cache-dir DIR] [--deep]

Converts MODEL_DIR/model.bin (CTranslate2) into an openai-whisper checkpoint (cached under
--cache-dir, keyed by the model.bin's sha256), runs tools/reference/openai_reference.py
(whisper.transcribe at temperature 0, fp32 on the CPU) and `parley transcribe -f
verbose_json` on every English clip of DATA_DIR/audio, and compares segment by segment.
Fails (exit 1) when any clip's tokens differ, or its segment times / seeks differ, or
avg_logprob / no_speech_prob / compression_ratio drift beyond small float tolerances.
Exits 77 (ctest SKIP_RETURN_CODE) when openai-whisper (scripts/setup_reference.sh), the
model or the data is missing. On a token mismatch (or with --deep) it also compares the
first window's mel / encoder output / per-step logits with `parley whisper dump`, when
the binary has that command.
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity_common import REF_DIR, sha256, skip, transcribe_json  # noqa: E402
CLIPS = ["jfk.wav", "jfk.mp3", "jfk.flac", "english.wav", "stereo_diarization.wav",
         "hotwords.mp3"]
# Same tokens should mean the same numbers up to float summation order.
TOL_LOGPROB = 2e-3
TOL_NOSPEECH = 2e-3
TOL_RATIO = 1e-4
TOL_TIME = 1e-6


def checkpoint_for(model_dir, cache_dir):
    model_bin = os.path.join(model_dir, "model.bin")
    digest = sha256(model_bin)
    ckpt = os.path.join(cache_dir, f"openai-{digest[:16]}.pt")
    if not os.path.exists(ckpt):
        os.makedirs(cache_dir, exist_ok=True)
        t = time.time()
        subprocess.run([sys.executable, os.path.join(REF_DIR, "ct2_to_openai.py"), model_bin,
                        ckpt], check=True, stdout=subprocess.DEVNULL)
        print(f"converted {model_bin} -> {ckpt} in {time.time() - t:.1f}s")
    return ckpt


def run_reference(ckpt, paths, dump_dir, language=None, device=None):
    cmd = [sys.executable, os.path.join(REF_DIR, "openai_reference.py"), ckpt, *paths]
    if device:
        cmd += ["--device", device]
    if dump_dir:
        cmd += ["--dump-dir", dump_dir]
    if language:
        cmd += ["--language", language]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    res = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {os.path.basename(r["file"]): r for r in res}


# The reference runs at temperature 0 only (no fallback): parley likewise.
GREEDY_ONLY = ["--temperature", "0", "--temperature-increment-on-fallback", "none"]


def run_parley(parley, model_dir, path, out_dir, language=None, extra=GREEDY_ONLY):
    lang = ["--language", language] if language else []
    return transcribe_json(parley, model_dir, path, out_dir, [*lang, *extra])


def has_dump(parley):
    p = subprocess.run([parley, "whisper", "dump", "--help"], capture_output=True, text=True)
    return p.returncode == 0 and "--what" in p.stdout


def compare(ref, got):
    """Returns (ok, row dict) for one clip."""
    rs, gs = ref["segments"], got["segments"]
    rt = [t for s in rs for t in s["tokens"]]
    gt = [t for s in gs for t in s["tokens"]]
    first = next((i for i, (a, b) in enumerate(zip(rt, gt)) if a != b), None)
    if first is None and len(rt) != len(gt):
        first = min(len(rt), len(gt))
    tokens_equal = first is None and [s["tokens"] for s in rs] == [s["tokens"] for s in gs]
    d_lp = d_ns = d_cr = d_t = 0.0
    seeks_equal = len(rs) == len(gs)
    for a, b in zip(rs, gs):
        d_lp = max(d_lp, abs(a["avg_logprob"] - b["avg_logprob"]))
        d_ns = max(d_ns, abs(a["no_speech_prob"] - b["no_speech_prob"]))
        d_cr = max(d_cr, abs(a["compression_ratio"] - b["compression_ratio"]))
        d_t = max(d_t, abs(a["start"] - b["start"]), abs(a["end"] - b["end"]))
        seeks_equal &= a["seek"] == b["seek"]
    ok = (tokens_equal and seeks_equal and d_t <= TOL_TIME and d_lp <= TOL_LOGPROB
          and d_ns <= TOL_NOSPEECH and d_cr <= TOL_RATIO)
    row = dict(tokens_equal=tokens_equal, first_diff=first, n_ref=len(rt), n_got=len(gt),
               segs=f"{len(rs)}/{len(gs)}", d_logprob=d_lp, d_nospeech=d_ns, d_ratio=d_cr,
               d_time=d_t, seeks_equal=seeks_equal)
    if first is not None:
        row["ref_around"] = rt[max(0, first - 3): first + 4]
        row["got_around"] = gt[max(0, first - 3): first + 4]
    return ok, row


def deep_compare(parley, model_dir, path, ref_dump, work, language=None, stats=None,
                 keep=False):
    """First-window mel / encoder / logits: parley whisper dump vs the reference's.

    Returns report lines; fills `stats` (when given) with max|d| per what (None where the
    shapes differ), logits_steps (ref, parley), logits_first_argmax_diff and the smallest
    top-2 gap of the reference's logits rows. With keep, parley's dumps stay in `work` as
    <clip>.parley.<what>.npy."""
    import numpy as np

    base = os.path.basename(path)
    lines = []
    stats = {} if stats is None else stats
    lang = ["--language", language] if language else []
    for what in ("mel", "encoder", "logits"):
        ref_file = os.path.join(ref_dump, f"{base}.{what}.npy")
        out = os.path.join(work, f"{base}.parley.{what}.npy")
        subprocess.run([parley, "whisper", "dump", "--model", model_dir, "--audio", path,
                        "--what", what, "--out", out, *lang], check=True,
                       stdout=subprocess.DEVNULL)
        a, b = np.load(ref_file).astype(np.float64), np.load(out).astype(np.float64)
        if not keep:
            os.remove(out)
        if what != "logits":
            if a.shape != b.shape:
                stats[what] = None
                lines.append(f"    {what}: shapes {a.shape} vs {b.shape}")
            else:
                stats[what] = float(np.abs(a - b).max())
                lines.append(f"    {what}: max|d| {stats[what]:.3e} (ref max|x| "
                             f"{np.abs(a).max():.3g})")
            continue
        n = min(len(a), len(b))
        d = np.abs(a[:n] - b[:n]).max(axis=1)
        top2 = np.sort(a[:n], axis=1)[:, -2:]
        stats["logits"] = float(d.max()) if n else None
        stats["logits_ref_max"] = float(np.abs(a).max()) if len(a) else 0.0
        stats["logits_steps"] = (len(a), len(b))
        stats["logits_worst_step"] = int(d.argmax()) if n else None
        stats["top2_gap_min"] = float((top2[:, 1] - top2[:, 0]).min()) if n else None
        arg_a, arg_b = a[:n].argmax(1), b[:n].argmax(1)
        diff_rows = np.nonzero(arg_a != arg_b)[0]
        stats["logits_first_argmax_diff"] = int(diff_rows[0]) if len(diff_rows) else None
        lines.append(f"    logits: steps ref {len(a)} parley {len(b)}; max|d| over common steps "
                     f"{d.max():.3e}; first step with max|d| > 1e-3: "
                     f"{next((int(i) for i in np.nonzero(d > 1e-3)[0]), None)}; first raw-argmax "
                     f"difference: {int(diff_rows[0]) if len(diff_rows) else None}")
        if len(diff_rows):
            i = int(diff_rows[0])
            top_a = np.argsort(-a[i])[:3]
            top_b = np.argsort(-b[i])[:3]
            lines.append(f"      step {i}: ref top3 {[(int(t), round(a[i, t], 4)) for t in top_a]} "
                         f"parley top3 {[(int(t), round(b[i, t], 4)) for t in top_b]}")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("parley")
    ap.add_argument("model_dir")
    ap.add_argument("data_dir")
    ap.add_argument("--cache-dir", default=os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "parley-ref"))
    ap.add_argument("--deep", action="store_true",
                    help="always compare mel/encoder/logits with `parley whisper dump`")
    ap.add_argument("--clips", nargs="*", default=CLIPS)
    args = ap.parse_args()

    try:
        import torch  # noqa: F401
        import whisper  # noqa: F401
    except Exception as e:  # noqa: BLE001
        skip(f"openai-whisper is not importable ({e}); run scripts/setup_reference.sh")
    if not os.path.exists(os.path.join(args.model_dir, "model.bin")):
        skip(f"no model at {args.model_dir}; run scripts/setup.sh")
    paths = [os.path.join(args.data_dir, "audio", c) for c in args.clips]
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        skip(f"missing clips {missing}")
    if not os.access(args.parley, os.X_OK):
        print(f"FAIL: no parley binary at {args.parley}")
        return 1

    t0 = time.time()
    ckpt = checkpoint_for(args.model_dir, args.cache_dir)
    with tempfile.TemporaryDirectory(prefix="parley-parity-") as work:
        ref_dump = os.path.join(work, "ref-dump")
        # The reference (one process, model loaded once) runs beside the parley runs.
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            ref_future = pool.submit(run_reference, ckpt, paths, ref_dump)
            got, t_parley = {}, time.time()
            for i, p in enumerate(paths):
                got[os.path.basename(p)] = run_parley(args.parley, args.model_dir, p,
                                                      os.path.join(work, f"parley-{i}"))
            t_parley = time.time() - t_parley
            ref = ref_future.result()
        t_ref_done = time.time() - t0

        print(f"{'clip':24} {'tokens':7} {'first_diff':>10} {'n ref/parley':>12} "
              f"{'segs':>5} {'max|d avg_logprob|':>18} {'max|d start/end|':>16} "
              f"{'max|d no_speech|':>16} {'max|d compr|':>12}")
        failures = []
        dump_ok = None
        for p in paths:
            clip = os.path.basename(p)
            ok, r = compare(ref[clip], got[clip])
            print(f"{clip:24} {'equal' if r['tokens_equal'] else 'DIFFER':7} "
                  f"{'-' if r['first_diff'] is None else r['first_diff']:>10} "
                  f"{r['n_ref']:>5}/{r['n_got']:<6} {r['segs']:>5} {r['d_logprob']:>18.2e} "
                  f"{r['d_time']:>16.2e} {r['d_nospeech']:>16.2e} {r['d_ratio']:>12.2e}"
                  f"{'' if ok else '   <-- FAIL'}")
            if r["first_diff"] is not None:
                print(f"    ref    ...{r['ref_around']}\n    parley ...{r['got_around']}")
                print(f"    ref text:    {ref[clip]['text']!r}\n    parley text: {got[clip]['text']!r}")
            if not ok:
                failures.append(clip)
            if (not ok or args.deep):
                if dump_ok is None:
                    dump_ok = has_dump(args.parley)
                if dump_ok:
                    for line in deep_compare(args.parley, args.model_dir, p, ref_dump, work):
                        print(line)
        print(f"timings: parley {t_parley:.1f}s (sequential), reference+parley wall "
              f"{t_ref_done:.1f}s, total {time.time() - t0:.1f}s")
    if failures:
        print(f"FAIL: {len(failures)}/{len(paths)} clips differ from openai-whisper: "
              f"{', '.join(failures)}")
        return 1
    print(f"OK: {len(paths)}/{len(paths)} clips match openai-whisper")
    return 0


if __name__ == "__main__":
    sys.exit(main())
