"""Helpers shared by the parity scripts in this folder (imported from the script's own
directory, which Python puts on sys.path when it runs `python script.py`)."""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

SKIP = 77
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REF_DIR = os.path.join(ROOT, "tools", "reference")


def skip(msg):
    print(f"SKIP: {msg}")
    sys.exit(SKIP)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def transcribe_json(parley, model, path, out_dir, flags=()):
    """`parley transcribe PATH --model MODEL -f verbose_json -o OUT_DIR FLAGS...`; returns the
    loaded OUT_DIR/<stem>.json."""
    os.makedirs(out_dir, exist_ok=True)
    subprocess.run([parley, "transcribe", path, "--model", model, "-f", "verbose_json",
                    "-o", out_dir, *flags], check=True, stdout=subprocess.DEVNULL)
    stem = os.path.splitext(os.path.basename(path))[0]
    with open(os.path.join(out_dir, stem + ".json")) as f:
        return json.load(f)


def synth_model(parley, shape, seed, vocab, cache_dir, prefix="synth-whisper"):
    """`parley synth whisper` into CACHE_DIR/PREFIX-SHAPE-seedSEED, kept when present. Scripts
    that ctest may run at once pass distinct prefixes (the build goes through a .tmp folder)."""
    d = os.path.join(cache_dir, f"{prefix}-{shape}-seed{seed}")
    if not all(os.path.exists(os.path.join(d, f)) for f in ("config.json", "model.safetensors",
                                                              "tokenizer.json")):
        t = time.time()
        tmp = d + ".tmp"
        subprocess.run([parley, "synth", "whisper", "--shape", shape, "--seed", str(seed),
                        "-o", tmp, "--vocab", vocab], check=True, stdout=subprocess.DEVNULL)
        if os.path.exists(d):
            shutil.rmtree(d)
        os.replace(tmp, d)
        print(f"synthesized {shape} seed {seed} -> {d} in {time.time() - t:.1f}s")
    return d
