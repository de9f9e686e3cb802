#!/usr/bin/env python3
"""parley's block dequantization (engine/quant.h through io::dequantize_ggml) against the
gguf package's codec (gguf.quants, 0.19.0), bit for bit, for every type parley supports.

For each type this writes, into a temporary folder, matrices of blocks and gguf's f32
dequantization of them:
  - "quantized": random Gaussian rows (with a few constant, zero and outlier rows) through
    gguf.quants.quantize, for the types gguf can quantize (q4_0, q4_1, q5_0, q5_1, q8_0;
    0.19.0 raises NotImplementedError for the K-quants);
  - "random": random bytes in every field except the f16 scales (finite, either sign),
    so every quant bit pattern and every scale / min field is exercised, for all types.
Then it runs the gtest GgmlQuantLive.MatchesGguf (tests/io/ggml_quant_test.cpp) with
PARLEY_GGUF_QUANT_DIR pointing at the folder; that test dequantizes each blocks file with
parley and compares the bits (it prints the mismatch count and max |diff| per file).

usage: quant_dequant_test.py TEST_IO_BINARY [--keep DIR]
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants
from gguf.constants import GGML_QUANT_SIZES

TYPES = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K]
QUANTIZABLE = {T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0}
# Byte offsets of each block's f16 fields (engine/quant.h's layouts).
F16_FIELDS = {T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
              T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208]}


def random_blocks(rng, qtype, rows, cols):
    block_size, type_size = GGML_QUANT_SIZES[qtype]
    n_blocks = rows * cols // block_size
    blocks = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
    for off in F16_FIELDS[qtype]:
        # Finite f16 of either sign over many binades, subnormals and zero included.
        scale = (rng.standard_normal(n_blocks) * 10.0 ** rng.uniform(-7, 1, n_blocks))
        scale[::97] = 0.0
        blocks[:, off:off + 2] = scale.astype(np.float16).view(np.uint8).reshape(n_blocks, 2)
    return blocks.reshape(rows, -1)


def quantized_rows(rng, qtype, rows, cols):
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    x[0] = 0.0
    x[1] = 0.25
    x[2, ::7] *= 1000.0
    return quants.quantize(x, qtype)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("test_io")
    ap.add_argument("--keep", help="write the files here and keep them")
    args = ap.parse_args()
    rng = np.random.default_rng(1234)
    with tempfile.TemporaryDirectory(prefix="parley-quant-") as tmp:
        out = args.keep or tmp
        os.makedirs(out, exist_ok=True)
        manifest = []
        for qtype in TYPES:
            cases = [("random", random_blocks(rng, qtype, 16, 1024))]
            if qtype in QUANTIZABLE:
                cases.append(("quantized", quantized_rows(rng, qtype, 8, 512)))
            for kind, blocks in cases:
                deq = quants.dequantize(blocks, qtype).astype(np.float32, copy=False)
                name = f"{qtype.name.lower()}_{kind}"
                blocks.tofile(os.path.join(out, name + ".blocks"))
                deq.tofile(os.path.join(out, name + ".f32"))
                manifest.append(f"{name} {int(qtype)} {deq.shape[0]} {deq.shape[1]}")
        with open(os.path.join(out, "manifest.txt"), "w") as f:
            f.write("\n".join(manifest) + "\n")
        env = dict(os.environ, PARLEY_GGUF_QUANT_DIR=out)
        r = subprocess.run([args.test_io, "--gtest_filter=GgmlQuantLive.MatchesGguf"], env=env,
                           capture_output=True, text=True)
        sys.stdout.write(r.stdout)
        sys.stderr.write(r.stderr)
        if r.returncode != 0:
            print(f"FAIL: {args.test_io} exited {r.returncode}")
            return 1
        if "[  PASSED  ] 1 test" not in r.stdout or "SKIPPED" in r.stdout:
            print("FAIL: GgmlQuantLive.MatchesGguf did not run and pass")
            return 1
        print(f"OK: {len(manifest)} files, parley's dequantization equals gguf's bit for bit")
        return 0


if __name__ == "__main__":
    sys.exit(main())
