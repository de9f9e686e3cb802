// Short-time spectral ops: the parts of a log-mel spectrogram that are not GEMMs
// (audio/mel_device.cpp builds Whisper's log-mel from them and two matmuls: the DFT
// against a cos/sin basis and the mel filter bank). Float dtypes (f32, f16, bf16), every
// tensor of one call in the same dtype, math in f32.
//
//   stft_frames:     frames[t, n] = x(start + t * hop + n) * window[n], t < T, n < n_fft,
//                    start = first_frame * hop - n_fft / 2 (centered frames), where x is
//                    `signal` followed by zeros up to `length` samples and reflected at both
//                    ends (numpy/torch "reflect": the edge sample is not repeated; folds
//                    again for offsets beyond one length, as mel.cpp).
//                    signal [S], window [n_fft], frames [T, n_fft]; S <= length, and
//                    length > n_fft / 2 (torch.stft's reflect padding needs pad < length).
//   power_spectrum:  spec [T, 2F] (F real parts, then F imaginary parts) -> power [T, F],
//                    power = re^2 + im^2.
//   log_mel_columns: mel [T, M] -> out[m, offset + t] = log10(max(mel[t, m], 1e-10)) for
//                    t < T; out [M, N] with offset + T <= N (other columns untouched).
//   log_mel_normalize: in place over all of x: x = (max(x, max(x) - 8) + 4) / 4, Whisper's
//                    clamp of the log-mel to 8 decades below its global maximum.
//   copy_columns:    out[r, j] = x[r, begin + j] for j < count, else 0; x [R, C],
//                    out [R, W], count <= W, begin + count <= C (pad_or_trim of a slice).
#pragma once

#include <cstdint>

#include "engine/tensor.h"

namespace parley {

struct StftFramesOptions {
  int64_t length = 0;       // samples in the padded signal: signal.dim(0) plus trailing zeros
  int64_t first_frame = 0;  // frame index of frames[0] (processing long signals in chunks)
  int hop = 160;            // samples between frames
};

constexpr float kLogMelFloor = 1e-10f;  // log10 is taken of max(mel, this)
constexpr float kLogMelRange = 8.0f;    // decades kept below the maximum
constexpr float kLogMelOffset = 4.0f;   // (x + offset) / scale
constexpr float kLogMelScale = 4.0f;

void stft_frames(const Tensor& signal, const Tensor& window, Tensor& frames,
                 const StftFramesOptions& opt);
void power_spectrum(const Tensor& spec, Tensor& power);
void log_mel_columns(const Tensor& mel, Tensor& out, int64_t offset);
void log_mel_normalize(Tensor& x);
void copy_columns(const Tensor& x, int64_t begin, int64_t count, Tensor& out);

namespace cpu {
void stft_frames(const Tensor& signal, const Tensor& window, Tensor& frames,
                 const StftFramesOptions& opt);
void power_spectrum(const Tensor& spec, Tensor& power);
void log_mel_columns(const Tensor& mel, Tensor& out, int64_t offset);
void log_mel_normalize(Tensor& x);
void copy_columns(const Tensor& x, int64_t begin, int64_t count, Tensor& out);
}  // namespace cpu
namespace cuda {
void stft_frames(const Tensor& signal, const Tensor& window, Tensor& frames,
                 const StftFramesOptions& opt);
void power_spectrum(const Tensor& spec, Tensor& power);
void log_mel_columns(const Tensor& mel, Tensor& out, int64_t offset);
void log_mel_normalize(Tensor& x);
void copy_columns(const Tensor& x, int64_t begin, int64_t count, Tensor& out);
}  // namespace cuda

}  // namespace parley
