#!/usr/bin/env python3
"""The committed trained models (models/parley-chat-target, models/parley-chat-draft): their
files, mlx-lm on them, and parley's own answers.

    trained_model_test.py PARLEY_BINARY MODELS_DIR [--per-task N] [--mlx-per-task M] [--tol 2e-3]

1. Every committed file has the SHA-256 that MODELS_DIR/SHA256SUMS lists.
2. Both models load in mlx-lm 0.32 (mlx_lm.models.qwen3, weights from model.safetensors in
   bf16, computed in f32): on the first --mlx-per-task held-out prompts of each task
   (tools/train/data.py eval, seed 2, a different seed from training), parley's logits
   (`parley llm dump`) at every position are within --tol of mlx-lm's, and the greedy answers
   are the same tokens. (mlx-cpu takes 4-12 s for one of the target's 170-490 token prompts on
   2 cores, parley under 2 s: the comparison runs on a subset, the answers' check on all.)
3. parley's greedy answers on the held-out 3-digit additions are at least 90 % exact and its
   JSON answers at least 90 % valid against their schema (eval.py's checker; the card's
   GPU figures are 97 % and 99 % on 100 prompts a task).
Exits 77 without mlx-lm (scripts/setup_llm_reference.sh) or without the models.
"""
import argparse
import hashlib
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llm_common import EOS, TRAIN, held_out_items, parley_dump, skip, until_eos  # noqa: E402


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def mlx_model(folder):
    import mlx.core as mx
    from mlx_lm.models import qwen3
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    rope = cfg.get("rope_parameters") or {}
    cfg.setdefault("rope_theta", rope.get("rope_theta", 1e6))
    model = qwen3.Model(qwen3.ModelArgs.from_dict(cfg))
    weights = mx.load(os.path.join(folder, "model.safetensors"))
    weights = model.sanitize({k: v.astype(mx.float32) for k, v in weights.items()})
    model.load_weights(list(weights.items()))
    model.set_dtype(mx.float32)
    return model


def mlx_run(model, ids, n, eos):
    """(f32 logits [len(ids), vocab] at every prompt position, up to n greedy ids, stopping
    after eos) from one prefill and cached decode steps."""
    import mlx.core as mx
    import numpy as np
    from mlx_lm.models.cache import make_prompt_cache
    cache = make_prompt_cache(model)
    logits = model(mx.array([ids]), cache=cache)
    prompt_logits = np.array(logits[0].astype(mx.float32))
    out = []
    for _ in range(n):
        tok = int(mx.argmax(logits[0, -1]).item())
        out.append(tok)
        if tok == eos:
            break
        logits = model(mx.array([[tok]]), cache=cache)
    return prompt_logits, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("parley")
    ap.add_argument("models")
    ap.add_argument("--per-task", type=int, default=12)
    ap.add_argument("--mlx-per-task", type=int, default=4,
                    help="prompts a task compared with mlx-lm (the first of --per-task)")
    ap.add_argument("--tol", type=float, default=2e-3)
    args = ap.parse_args()
    try:
        import mlx.core  # noqa: F401
        import mlx_lm  # noqa: F401
        from tokenizers import Tokenizer
    except Exception as e:  # noqa: BLE001
        skip(f"mlx-lm is not importable ({e}); run scripts/setup_llm_reference.sh")
    sums = os.path.join(args.models, "SHA256SUMS")
    if not os.path.exists(sums):
        skip(f"no {sums}")
    failures = []
    for line in open(sums):
        digest, name = line.split()
        got = sha256(os.path.join(args.models, name))
        if got != digest:
            failures.append(f"{name}: sha256 {got} != {digest}")
    print(f"files: {sum(1 for _ in open(sums))} checked against SHA256SUMS")

    sys.path.insert(0, TRAIN)
    import eval as train_eval  # tools/train/eval.py: the JSON schema checker
    with tempfile.TemporaryDirectory(prefix="parley-trained-") as work:
        items = held_out_items(work, args.per_task)
        for name in ("parley-chat-target", "parley-chat-draft"):
            folder = os.path.join(args.models, name)
            tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
            eos = tok.token_to_id(EOS)
            model = mlx_model(folder)
            worst, same, compared, exact, valid, n_add, n_json = 0.0, 0, 0, 0, 0, 0, 0
            picked = [it for it in items if it["task"] in ("add3", "json")]
            seen = {}
            for it in picked:
                ids = tok.encode(it["prompt"], add_special_tokens=False).ids
                steps = 12 if it["task"] == "add3" else 200  # a JSON answer is ~60-150 tokens
                logits, greedy = parley_dump(args.parley, folder, ids, steps, work)
                greedy = until_eos(greedy, eos)
                seen[it["task"]] = seen.get(it["task"], 0) + 1
                if seen[it["task"]] <= args.mlx_per_task:
                    ref, ref_greedy = mlx_run(model, ids, steps, eos)
                    worst = max(worst, float(abs(ref - logits).max()))
                    same += int(ref_greedy == greedy)
                    compared += 1
                text = tok.decode([t for t in greedy if t != eos], skip_special_tokens=False)
                if it["task"] == "add3":
                    n_add += 1
                    exact += int(text == it["answer"])
                else:
                    n_json += 1
                    valid += int(train_eval.json_valid(text, it["meta"]["schema"]))
            print(f"{name}: max |logit - mlx-lm| {worst:.2e} and greedy answers equal to "
                  f"mlx-lm's {same}/{compared} over {compared} prompts; add3 exact "
                  f"{exact}/{n_add}, json valid {valid}/{n_json}")
            if worst > args.tol:
                failures.append(f"{name}: logits differ by {worst:.2e} > {args.tol}")
            if same != compared or compared == 0:
                failures.append(f"{name}: {compared - same} of {compared} greedy answers differ "
                                "from mlx-lm")
            if name == "parley-chat-target" and (exact < 0.9 * n_add or valid < 0.9 * n_json):
                failures.append(f"{name}: add3 {exact}/{n_add} or json {valid}/{n_json} below 90 %")
    if failures:
        print("FAIL:", "; ".join(failures))
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
