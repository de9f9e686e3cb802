// Whisper's log-mel from engine ops (see mel_device.h). Per chunk of frames:
//   stft_frames      signal -> frames [T, 400] (reflect-padded, Hann-windowed)
//   matmul           frames @ basis [400, 402] -> spec [T, 402] (cos | -sin: the rfft)
//   power_spectrum   spec -> power [T, 201]
//   matmul           power @ filters^T ([n_mels, 201]) -> mel [T, n_mels]
//   log_mel_columns  log10(max(mel, 1e-10)) into columns [t0, t0 + T) of out [n_mels, N]
// then log_mel_normalize(out) once: the clamp needs the max over every frame.
#include "audio/mel_device.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <numbers>
#include <string>
#include <utility>

#include "engine/error.h"
#include "engine/ops/matmul.h"
#include "engine/ops/spectral.h"

namespace parley {
namespace {

struct MelConstants {
  Tensor window;   // f32 [400]: periodic Hann
  Tensor basis;    // f32 [400, 402]: cos(2 pi n k / 400) | -sin(2 pi n k / 400), k < 201
  Tensor filters;  // f32 [n_mels, 201]
};

MelConstants make_constants(Device device, int n_mels) {
  Tensor window = Tensor::empty({kNFft}, DType::f32);
  for (int n = 0; n < kNFft; ++n)  // as mel.cpp: torch.hann_window(400), periodic
    window.data<float>()[n] = float(0.5 - 0.5 * std::cos(2.0 * std::numbers::pi * n / kNFft));
  Tensor basis = Tensor::empty({kNFft, 2 * kNFreqs}, DType::f32);
  float* b = basis.data<float>();
  for (int n = 0; n < kNFft; ++n) {
    for (int k = 0; k < kNFreqs; ++k) {
      // n * k mod 400 keeps the angle exact before the double-precision cos / sin.
      const double angle = 2.0 * std::numbers::pi * double((n * k) % kNFft) / kNFft;
      b[size_t(n) * 2 * kNFreqs + size_t(k)] = float(std::cos(angle));
      b[size_t(n) * 2 * kNFreqs + kNFreqs + size_t(k)] = float(-std::sin(angle));
    }
  }
  return {window.to(device), basis.to(device), mel_filters(n_mels).to(device)};
}

// Made once per (device, n_mels); never destroyed (CUDA memory must not be freed from
// static destructors, see engine/cuda/common.cuh).
std::shared_ptr<const MelConstants> constants(Device device, int n_mels) {
  static std::mutex mu;
  static auto* cache = new std::map<std::pair<Device, int>, std::shared_ptr<const MelConstants>>;
  std::lock_guard lock(mu);
  auto& slot = (*cache)[{device, n_mels}];
  if (!slot) slot = std::make_shared<const MelConstants>(make_constants(device, n_mels));
  return slot;
}

}  // namespace

// One per device, never destroyed (as above). Pool is thread-safe, and all device work is
// ordered on one stream, so a block that one call released may serve the next call's kernels.
Pool& mel_pool(Device device) {
  static std::mutex mu;
  static auto* pools = new std::map<Device, Pool*>;
  std::lock_guard lock(mu);
  Pool*& p = (*pools)[device];
  if (!p) p = new Pool(device);
  return *p;
}

Tensor log_mel_spectrogram_on(Device device, std::span<const float> samples, int n_mels,
                              int64_t padding_samples, const DeviceMelOptions& opt) {
  check_arg(n_mels >= 1, "[mel] n_mels must be positive, got " + std::to_string(n_mels));
  check_arg(padding_samples >= 0, "[mel] padding must be non-negative");
  check_arg(opt.chunk_frames >= 1, "[mel] chunk_frames must be positive");
  check_arg(!opt.pool || opt.pool->device() == device,
            "[mel] the pool is on " +
                std::string(device_name(opt.pool ? opt.pool->device() : device)) + ", the mel on " +
                std::string(device_name(device)));
  Pool& pool = opt.pool ? *opt.pool : mel_pool(device);
  auto alloc = [&](const Shape& shape) { return pool.alloc(shape, DType::f32); };
  const int64_t n_audio = int64_t(samples.size());
  const int64_t len = n_audio + padding_samples;
  const int64_t n_frames = len / kHopLength;  // the reference drops torch.stft's last frame
  Tensor out = alloc({n_mels, n_frames});
  if (n_frames == 0) return out;
  check_arg(len > kNFft / 2,
            "[mel] need more than " + std::to_string(kNFft / 2) + " samples for reflect padding");

  const std::shared_ptr<const MelConstants> c = constants(device, n_mels);
  const Tensor host =
      Tensor::view(const_cast<float*>(samples.data()), {n_audio}, DType::f32, Device::cpu, nullptr);
  Tensor signal = host;
  if (device != Device::cpu) {
    signal = alloc({n_audio});
    signal.copy_from(host);
  }
  const int64_t chunk = std::min(opt.chunk_frames, n_frames);
  Tensor frames = alloc({chunk, kNFft});
  Tensor spec = alloc({chunk, 2 * kNFreqs});
  Tensor power = alloc({chunk, kNFreqs});
  Tensor mel = alloc({chunk, n_mels});
  MatmulOptions filter_opt;
  filter_opt.trans_b = true;
  for (int64_t t0 = 0; t0 < n_frames; t0 += chunk) {
    const int64_t t = std::min(chunk, n_frames - t0);
    Tensor frames_t = frames.slice0(0, t), spec_t = spec.slice0(0, t);
    Tensor power_t = power.slice0(0, t), mel_t = mel.slice0(0, t);
    StftFramesOptions frame_opt;
    frame_opt.length = len;
    frame_opt.first_frame = t0;
    frame_opt.hop = kHopLength;
    stft_frames(signal, c->window, frames_t, frame_opt);
    matmul(frames_t, c->basis, spec_t);
    power_spectrum(spec_t, power_t);
    matmul(power_t, c->filters, mel_t, filter_opt);
    log_mel_columns(mel_t, out, t0);
  }
  log_mel_normalize(out);
  return out;
}

Tensor log_mel_spectrogram_for(Device device, std::span<const float> samples, int n_mels,
                               int64_t padding_samples) {
  if (device == Device::cpu) return log_mel_spectrogram(samples, n_mels, padding_samples);
  return log_mel_spectrogram_on(device, samples, n_mels, padding_samples);
}

}  // namespace parley
