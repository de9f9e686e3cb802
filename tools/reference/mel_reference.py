#!/usr/bin/env python3
"""Whisper's log-mel spectrogram in NumPy only: a reimplementation of openai/whisper
whisper/audio.py log_mel_spectrogram (torch.stft with a periodic Hann window, centered,
reflect padding; |X|^2 without the last frame; mel_filters.npz @ power; log10 clamp at
1e-10; floor at max - 8; (x + 4) / 4), in float32 like torch, for parity tests of parley's
src/audio/mel.cpp without installing torch.

Audio comes from the reference's own ffmpeg command (16 kHz mono s16 / 32768).

  python3 tools/reference/mel_reference.py AUDIO OUT.npy [--n-mels 80] [--padding 480000]
      [--filters ../shared/data/whisper/mel_filters.npz] [--samples-out SAMPLES.npy]
"""
import argparse
import subprocess

import numpy as np

N_FFT = 400
HOP = 160


def load_audio(path, sr=16000):
    cmd = ["ffmpeg", "-nostdin", "-threads", "0", "-i", path, "-f", "s16le", "-ac", "1",
           "-acodec", "pcm_s16le", "-ar", str(sr), "-"]
    out = subprocess.run(cmd, capture_output=True, check=True).stdout
    return np.frombuffer(out, np.int16).flatten().astype(np.float32) / 32768.0


def log_mel(audio, filters, padding=0):
    audio = np.asarray(audio, np.float32)
    if padding > 0:
        audio = np.pad(audio, (0, padding))
    n = np.arange(N_FFT)
    window = (0.5 - 0.5 * np.cos(2 * np.pi * n / N_FFT)).astype(np.float32)  # periodic
    x = np.pad(audio, (N_FFT // 2, N_FFT // 2), mode="reflect")
    n_frames = 1 + (len(x) - N_FFT) // HOP
    idx = np.arange(N_FFT)[None, :] + HOP * np.arange(n_frames)[:, None]
    frames = x[idx] * window  # [frames, 400] float32
    spec = np.fft.rfft(frames, axis=-1)  # float64 inside numpy < 2; torch uses float32
    power = (np.abs(spec) ** 2).astype(np.float32).T[:, :-1]  # [201, frames - 1]
    mel = filters.astype(np.float32) @ power
    log_spec = np.log10(np.maximum(mel, 1e-10))
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    return ((log_spec + 4.0) / 4.0).astype(np.float32)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("audio")
    p.add_argument("out")
    p.add_argument("--n-mels", type=int, default=80)
    p.add_argument("--padding", type=int, default=0)
    p.add_argument("--filters", default="../shared/data/whisper/mel_filters.npz")
    p.add_argument("--samples-out", help="also save the decoded samples (float32 .npy)")
    a = p.parse_args()
    audio = np.load(a.audio) if a.audio.endswith(".npy") else load_audio(a.audio)
    if a.samples_out:
        np.save(a.samples_out, audio)
    filters = np.load(a.filters)[f"mel_{a.n_mels}"]
    mel = log_mel(audio, filters, a.padding)
    np.save(a.out, mel)
    print(f"{a.out}: shape {mel.shape} mean {mel.mean():.8f} max {mel.max():.8f} "
          f"min {mel.min():.8f}")


if __name__ == "__main__":
    main()
