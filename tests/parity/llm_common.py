"""Helpers shared by the chat-model parity scripts (trained_model_test.py, llm_gguf_test.py):
`parley llm dump` from Python, the held-out prompts of the trained models, and the skip
convention (exit 77)."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "..", "..", "tools", "train")
EOS = "<|im_end|>"


def skip(why):
    print("SKIP:", why)
    sys.exit(77)


def require_mlx_lm():
    """Skip (exit 77) unless mlx and mlx-lm import (scripts/setup_llm_reference.sh)."""
    try:
        import mlx.core  # noqa: F401
        import mlx_lm  # noqa: F401
    except ImportError as e:
        skip(f"mlx-lm not importable ({e})")


def parley_dump(parley, model, ids, greedy, work):
    """(f32 logits [len(ids), vocab] at every position, `greedy` greedy continuation ids) of
    `parley llm dump` on a model folder or GGUF file."""
    import numpy as np
    path = os.path.join(work, "ids.txt")
    with open(path, "w") as f:
        f.write(",".join(map(str, ids)))
    out = os.path.join(work, "logits.npy")
    r = subprocess.run([parley, "llm", "dump", "--model", model, "--ids-file", path, "--out", out,
                        "--greedy", str(greedy), "--threads", "2"], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: parley llm dump --model {model}: {r.stderr.strip()}")
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    return np.load(out), doc["greedy"]


def until_eos(ids, eos):
    return ids[: ids.index(eos) + 1] if eos in ids else ids


def held_out_items(work, per_task):
    """tools/train/data.py's held-out turns (seed 2, never in training), per_task a task."""
    subprocess.run([sys.executable, os.path.join(TRAIN, "data.py"), "eval", "--seed", "2",
                    "--per-task", str(per_task), "--out", work], check=True,
                   stdout=subprocess.DEVNULL)
    with open(os.path.join(work, "eval.jsonl")) as f:
        return [json.loads(line) for line in f]
