#!/usr/bin/env python3
"""Silero VAD reference outputs for parley's parity tests.

    vad_reference.py AUDIO MODEL [--sample-rate 16000|8000] [> out.json]

Decodes AUDIO with the ffmpeg command line at the given rate (the samples parley's
decoder produces: src/audio/decode.h), then, for MODEL:
  *.onnx         onnxruntime through silero-vad 6.2.1's own OnnxWrapper (its context and
                 state handling): the per-chunk probabilities of get_speech_timestamps'
                 loop; get_speech_timestamps' segments and VADIterator's events over the
                 audio's 512 / 256-sample chunks are computed from those probabilities
                 (replayed in the same order, which is what both functions would get
                 from a fresh model);
  *.safetensors  the same with silero-vad 6.2.1's tinygrad model (tinygrad_model.py, the
                 file's only consumer in the package) written out in torch ops, because
                 tinygrad is not installed: reflect pad, the STFT conv, magnitude, four
                 conv+ReLU, torch.lstm_cell, ReLU, 1x1 conv, sigmoid, mean.
Prints one JSON document: samples, probs, segments, events.
torchaudio (imported by silero_vad.utils_vad, used only to read and write files) is
replaced by an empty module: the audio is handed over as a tensor.
"""
import argparse
import json
import struct
import subprocess
import sys
import types

import numpy as np


def import_silero_vad():
    if "torchaudio" not in sys.modules:
        try:
            import torchaudio  # noqa: F401
        except ImportError:
            stub = types.ModuleType("torchaudio")
            stub.__version__ = "0.0"
            sys.modules["torchaudio"] = stub
    import silero_vad
    from silero_vad import utils_vad
    return silero_vad, utils_vad


def load_audio(path, sample_rate):
    cmd = ["ffmpeg", "-nostdin", "-threads", "0", "-i", path, "-f", "s16le", "-ac", "1",
           "-acodec", "pcm_s16le", "-ar", str(sample_rate), "-"]
    out = subprocess.run(cmd, capture_output=True, check=True).stdout
    return np.frombuffer(out, np.int16).flatten().astype(np.float32) / 32768.0


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", (name, info["dtype"])
        a, b = info["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + a:8 + n + b], np.float32).reshape(info["shape"])
    return out


class TorchTinySilero:
    """silero_vad/tinygrad_model.py (TinySileroVAD.__call__) in torch, with OnnxWrapper's
    call protocol (context samples, state, reset_states) so get_speech_timestamps and
    VADIterator can drive it. 16 kHz only, like the file."""

    def __init__(self, path):
        import torch
        self.torch = torch
        self.w = {k: torch.from_numpy(v.copy()) for k, v in read_safetensors(path).items()}
        self.reset_states()

    def reset_states(self, batch_size=1):
        torch = self.torch
        self._state = torch.zeros((2, batch_size, 128))
        self._context = torch.zeros((batch_size, 64))

    def __call__(self, x, sr):
        torch = self.torch
        F = torch.nn.functional
        assert sr == 16000, "the safetensors export is 16 kHz only"
        if x.dim() == 1:
            x = x.unsqueeze(0)
        x = torch.cat([self._context, x], dim=1)
        self._context = x[..., -64:]
        w = self.w
        y = F.pad(x.unsqueeze(1), (0, 64), "reflect")
        y = F.conv1d(y, w["stft_conv.weight"], stride=128)
        y = (y[:, :129, :] ** 2 + y[:, 129:, :] ** 2).sqrt()
        y = F.relu(F.conv1d(y, w["conv1.weight"], w["conv1.bias"], padding=1))
        y = F.relu(F.conv1d(y, w["conv2.weight"], w["conv2.bias"], stride=2, padding=1))
        y = F.relu(F.conv1d(y, w["conv3.weight"], w["conv3.bias"], stride=2, padding=1))
        y = F.relu(F.conv1d(y, w["conv4.weight"], w["conv4.bias"], padding=1)).squeeze(-1)
        h, c = torch.lstm_cell(y, [self._state[0], self._state[1]], w["lstm_cell.weight_ih"],
                               w["lstm_cell.weight_hh"], w["lstm_cell.bias_ih"],
                               w["lstm_cell.bias_hh"])
        self._state = torch.stack([h, c])
        y = torch.sigmoid(F.conv1d(F.relu(h.unsqueeze(-1)), w["final_conv.weight"],
                                   w["final_conv.bias"]))
        return y.squeeze(1).mean(dim=1).unsqueeze(1)


class Replay:
    """Hands get_speech_timestamps / VADIterator the probabilities already computed by
    the real model, in the same order (both reset and then call once per chunk), so a
    case runs the network once."""

    def __init__(self, probs):
        self.probs = probs
        self.i = 0

    def reset_states(self, batch_size=1):
        self.i = 0

    def __call__(self, x, sr):
        import torch
        p = self.probs[self.i]
        self.i += 1
        return torch.tensor([[p]])


_PROBS = {}  # (audio, model, rate) -> (samples, probs): cases that differ in options only


def reference(audio_path, model_path, sample_rate, options=None):
    """options: get_speech_timestamps keywords (VADIterator takes threshold,
    min_silence_duration_ms, speech_pad_ms from them)."""
    options = dict(options or {})
    import torch
    torch.set_num_threads(1)
    _, utils_vad = import_silero_vad()
    key = (audio_path, model_path, sample_rate)
    audio = load_audio(audio_path, sample_rate)
    wav = torch.from_numpy(audio)
    n = 512 if sample_rate == 16000 else 256
    if key not in _PROBS:
        if model_path.endswith(".safetensors"):
            model = TorchTinySilero(model_path)
        else:
            model = utils_vad.OnnxWrapper(model_path, force_onnx_cpu=True)
        # get_speech_timestamps' probability loop (last chunk zero-padded).
        probs = []
        model.reset_states()
        with torch.no_grad():
            for start in range(0, len(wav), n):
                chunk = wav[start:start + n]
                if len(chunk) < n:
                    chunk = torch.nn.functional.pad(chunk, (0, n - len(chunk)))
                probs.append(float(model(chunk, sample_rate).item()))
        _PROBS[key] = probs
    probs = _PROBS[key]
    model = Replay(probs)
    segments = utils_vad.get_speech_timestamps(wav, model, sampling_rate=sample_rate, **options)

    # VADIterator over whole chunks, as silero-vad's streaming example feeds it.
    it_keys = ("threshold", "min_silence_duration_ms", "speech_pad_ms")
    it = utils_vad.VADIterator(model, sampling_rate=sample_rate,
                               **{k: v for k, v in options.items() if k in it_keys})
    events = []
    for start in range(0, len(wav) - n + 1, n):
        e = it(wav[start:start + n])
        if e:
            kind = "start" if "start" in e else "end"
            events.append({"kind": kind, "sample": int(e[kind])})
    return {"samples": int(len(audio)), "probs": probs,
            "segments": [{"start": int(s["start"]), "end": int(s["end"])} for s in segments],
            "events": events}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("audio")
    ap.add_argument("model")
    ap.add_argument("--sample-rate", type=int, default=16000, choices=[16000, 8000])
    ap.add_argument("--options", default="{}", help="get_speech_timestamps keywords, JSON")
    args = ap.parse_args()
    json.dump(reference(args.audio, args.model, args.sample_rate, json.loads(args.options)),
              sys.stdout)
    print()


if __name__ == "__main__":
    main()
