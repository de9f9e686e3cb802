"""parley's logit processors (src/sampling/logit_processors.h, PenaltyState) against
mlx-lm's (mlx_lm.sample_utils), one processor at a time on random rows.

This script draws the inputs (numpy), runs mlx-lm's apply_top_p, apply_min_p, apply_top_k,
make_repetition_penalty, make_presence_penalty and make_frequency_penalty on them, writes the
cases and mlx-lm's outputs to a file and runs test_sampling's MlxOracle test, which applies
parley's processors to the same rows and compares (the removed tokens exactly; penalised
values within 1e-5 relative). mlx-lm is the torch-free reference available in .venv-llm
(transformers' logits processors need torch). Only single processors are compared: mlx-lm
chains them in another order than vLLM (top_p, min_p, top_k on the untempered logprobs) and
windows its penalties to the last 20 tokens (set here to cover every token).

Usage: sampling_mlx_oracle_test.py TEST_SAMPLING_BINARY [--cases N] [--seed S]
Exit 0 when every case matches, 1 otherwise, 77 when mlx-lm cannot be imported.
"""
import argparse
import os
import subprocess
import sys
import tempfile

SKIP = 77


def fmt(values):
    return " ".join("-inf" if v == float("-inf") else repr(float(v)) for v in values)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--cases", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    try:
        import numpy as np
        import mlx.core as mx
        from mlx_lm import sample_utils as su
    except ImportError as e:
        print(f"SKIP: mlx-lm is not importable ({e}); run scripts/setup_llm_reference.sh")
        return SKIP

    rng = np.random.default_rng(args.seed)
    lines = []
    counts = {}
    ops = ["top_p", "min_p", "top_k", "repetition", "presence", "frequency"]
    for i in range(args.cases):
        op = ops[i % len(ops)]
        vocab = int(rng.integers(2, 400))
        scale = float(rng.choice([0.5, 2.0, 6.0]))
        # float32 values with distinct logits (mlx-lm and parley order ties differently).
        logits = (rng.standard_normal(vocab) * scale).astype(np.float32)
        if len(np.unique(logits)) != vocab:
            continue
        if op in ("presence", "frequency", "repetition") and i % 4 == 0:
            logits[rng.integers(0, vocab)] = 0.0  # the sign boundary of the repetition penalty
        tokens = []
        x = mx.array(logits[None, :])
        if op == "top_p":
            param = float(rng.choice([0.05, 0.3, 0.5, 0.8, 0.9, 0.95, 0.99]))
            lp = x - mx.logsumexp(x, axis=-1, keepdims=True)
            out = su.apply_top_p(lp, param)
        elif op == "min_p":
            param = float(rng.choice([0.01, 0.05, 0.1, 0.3, 0.7, 1.0]))
            lp = x - mx.logsumexp(x, axis=-1, keepdims=True)
            out = su.apply_min_p(lp, param)
        elif op == "top_k":
            param = int(rng.integers(1, vocab))  # mlx-lm wants 0 < k < vocab
            lp = x - mx.logsumexp(x, axis=-1, keepdims=True)
            out = su.apply_top_k(lp, param)
        else:
            n = int(rng.integers(0, 40))
            tokens = [int(t) for t in rng.integers(0, min(vocab, 30), n)]  # repeats likely
            if op == "repetition":
                param = float(rng.choice([0.8, 1.1, 1.3, 2.0]))
                proc = su.make_repetition_penalty(param, context_size=len(tokens) + 1)
            elif op == "presence":
                param = float(rng.choice([-1.0, 0.5, 1.5]))
                proc = su.make_presence_penalty(param, context_size=len(tokens) + 1)
            else:
                param = float(rng.choice([-0.5, 0.3, 1.2]))
                proc = su.make_frequency_penalty(param, context_size=len(tokens) + 1)
            out = proc(mx.array(tokens, dtype=mx.int32), x) if tokens else x
        want = np.array(out[0].astype(mx.float32))
        lines.append(f"{op} {param!r} {vocab} {len(tokens)}")
        lines.append(fmt(logits))
        lines.append(" ".join(str(t) for t in tokens))
        lines.append(fmt(want))
        counts[op] = counts.get(op, 0) + 1

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cases.txt")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        env = dict(os.environ, PARLEY_SAMPLING_ORACLE=path)
        r = subprocess.run([args.binary, "--gtest_filter=MlxOracle.*"], env=env,
                           capture_output=True, text=True)
    print(r.stdout[-4000:], r.stderr[-2000:])
    print("cases per processor:", counts)
    ok = r.returncode == 0 and "[  PASSED  ] 1 test" in r.stdout and "SKIPPED" not in r.stdout
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
