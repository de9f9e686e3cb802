// Whisper's log-mel spectrogram on any device, built from engine ops (ops/spectral.h and
// two f32 matmuls), so a CUDA model computes its features on the GPU. The definition is
// mel.h's (the reference's): centered STFT with reflect padding, periodic Hann of 400,
// hop 160, |X|^2 without the last frame, Slaney filters, log10(max(x, 1e-10)), clamp at the
// global max - 8 over all frames (padding included), (x + 4) / 4. The DFT is a GEMM of the
// windowed frames [T, 400] with a cos/sin basis [400, 402] instead of kissfft, so results
// differ from log_mel_spectrogram by float rounding only (tests/audio/mel_device_test.cpp
// measures it).
#pragma once

#include <cstdint>
#include <span>

#include "audio/mel.h"
#include "engine/pool.h"
#include "engine/tensor.h"

namespace parley {

struct DeviceMelOptions {
  // Frames per STFT pass: the temporaries hold chunk_frames * 4.3 KB (80 mels: frame,
  // spectrum, power and mel rows; 13 MB at the default), so hours of audio need no more;
  // the clamp to the global max runs once, over the whole output, at the end.
  int64_t chunk_frames = kChunkFrames;
  // Output and temporaries from this pool (it must be on the device) instead of a pool of
  // the process's own for that device.
  Pool* pool = nullptr;
};

// Log-mel of `samples` with `padding_samples` zeros appended, computed on `device`:
// f32 [n_mels, (samples.size() + padding_samples) / 160] on `device`. Only the samples
// travel to the device (the padding is implicit). The window, DFT basis and filter bank
// are made once per (device, n_mels) and kept for the process (thread-safe). Without
// opt.pool, the output and temporaries come from one pool per device kept for the process,
// so a warm call allocates nothing from the system: on CUDA, six cudaMalloc and cudaFree
// (each cudaFree waits for the whole device) were most of the 0.55 ms that the mel of
// jfk.wav took on the H200 (bench/RESULTS.md). The pool keeps the largest blocks it has
// handed out (the output of the longest file) for later calls.
Tensor log_mel_spectrogram_on(Device device, std::span<const float> samples, int n_mels,
                              int64_t padding_samples = 0, const DeviceMelOptions& opt = {});

// The process's pool of mel tensors on `device` (log_mel_spectrogram_on without a pool of
// its own, pad_or_trim_frames, transcription's windows), kept for the process.
Pool& mel_pool(Device device);

// The log-mel a model on `device` uses: on the CPU log_mel_spectrogram (kissfft, the
// parity path, unchanged), elsewhere log_mel_spectrogram_on(device). The result lives on
// `device`.
Tensor log_mel_spectrogram_for(Device device, std::span<const float> samples, int n_mels,
                               int64_t padding_samples = 0);

}  // namespace parley
