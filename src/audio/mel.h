// Whisper's log-mel spectrogram, computed exactly as the reference
// (openai/whisper whisper/audio.py: log_mel_spectrogram, mel_filters, pad_or_trim):
// periodic Hann window of 400, centered STFT (reflect padding 200, hop 160), power |X|^2
// without the last frame, Slaney mel filters @ power, log10(max(mel, 1e-10)), clamp below
// at (global max - 8), then (x + 4) / 4.
#pragma once

#include <cstdint>
#include <span>

#include "engine/tensor.h"

namespace parley {

constexpr int kWhisperSampleRate = 16000;  // Hz
constexpr int kNFft = 400;                 // 25 ms window
constexpr int kHopLength = 160;            // 10 ms: 100 frames per second
constexpr int kNFreqs = kNFft / 2 + 1;     // 201 rfft bins
constexpr int64_t kChunkSamples = 480000;  // 30 s
constexpr int64_t kChunkFrames = 3000;     // frames per 30 s window

// The mel filter bank f32 [n_mels, 201], computed (not loaded): librosa.filters.mel(sr=16000,
// n_fft=400, n_mels) with the Slaney mel scale (htk=False) and norm='slaney', which is how
// the reference's mel_filters.npz was made. n_mels is 80 or 128 (any n_mels >= 1 works).
// Computing it takes microseconds, so it is not cached.
Tensor mel_filters(int n_mels);

// Log-mel of `samples` (mono 16 kHz float) with `padding_samples` zeros appended first
// (transcribe() uses kChunkSamples). Returns f32 [n_mels, n_frames] with
// n_frames = (samples.size() + padding_samples) / 160. Frames are computed in parallel
// over cpu_threads(). Empty input (0 frames) gives [n_mels, 0].
Tensor log_mel_spectrogram(std::span<const float> samples, int n_mels, int64_t padding_samples = 0);

// Copies `mel` f32 [n_mels, n] to [n_mels, frames] on mel's device: trims the last
// dimension or pads it with zeros (the reference's pad_or_trim(mel, N_FRAMES) in the
// log-mel domain). A device result comes from mel_pool (mel_device.h).
Tensor pad_or_trim_frames(const Tensor& mel, int64_t frames = kChunkFrames);

// mel[:, begin : begin + count] of an f32 [n_mels, n] mel, zero-padded to [n_mels, frames] on
// mel's device (count <= frames; a device result comes from mel_pool, so a window costs no
// cudaMalloc / cudaFree): a seek window of transcription, pad_or_trim_frames.
Tensor mel_columns(const Tensor& mel, int64_t begin, int64_t count, int64_t frames);

}  // namespace parley
