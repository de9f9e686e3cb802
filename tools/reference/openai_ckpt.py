"""Shared by the *_to_openai.py converters: openai-whisper checkpoint dims and writing.

An openai-whisper checkpoint is what whisper.load_model(path) reads: {"dims": {...},
"model_state_dict": {...}} with openai's parameter names (whisper/model.py), float32 here.
"""
import os

import numpy as np


def f32(a):
    return np.ascontiguousarray(a, dtype=np.float32)


def dims_from_state(sd, n_audio_head, n_text_head):
    """ModelDimensions from an openai-named state dict and the two head counts."""

    def n_blocks(prefix):
        ids = {int(k.split(".")[2]) for k in sd if k.startswith(prefix + ".blocks.")}
        return max(ids) + 1 if ids else 0

    conv1 = sd["encoder.conv1.weight"]
    emb = sd["decoder.token_embedding.weight"]
    return {
        "n_mels": int(conv1.shape[1]),
        "n_vocab": int(emb.shape[0]),
        "n_audio_ctx": int(sd["encoder.positional_embedding"].shape[0]),
        "n_audio_state": int(conv1.shape[0]),
        "n_audio_head": int(n_audio_head),
        "n_audio_layer": n_blocks("encoder"),
        "n_text_ctx": int(sd["decoder.positional_embedding"].shape[0]),
        "n_text_state": int(emb.shape[1]),
        "n_text_head": int(n_text_head),
        "n_text_layer": n_blocks("decoder"),
    }


def save(dims, sd, out):
    """Writes the checkpoint atomically (OUT.tmp, then rename)."""
    import torch

    ckpt = {"dims": dims, "model_state_dict": {k: torch.from_numpy(f32(a)) for k, a in sd.items()}}
    tmp = out + ".tmp"
    torch.save(ckpt, tmp)
    os.replace(tmp, out)
