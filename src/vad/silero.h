// Silero VAD (snakers4/silero-vad, MIT), the v5/v6 network (held to onnxruntime for
// v5.1.2 and v6.2), native: 32 ms of audio in, a speech probability out, and the
// streaming state carried between chunks.
//
// The network, per chunk of N samples (N = 512 at 16 kHz, 256 at 8 kHz), as the
// reference's TorchScript model (silero_vad.jit, `_model` / `_model_8k`) and its ONNX
// export compute it; C = N / 8 context samples (64 / 32), F = 256 / 128 (the STFT size):
//   x      = [context (C), chunk (N)]                       the last C samples of the
//                                                            previous x (zeros at first)
//   x      = reflect_pad(x, right = C)                       (C + N + C) = 640 / 320
//   spec   = conv1d(x, stft.forward_basis_buffer, stride F/2) [2 (F/2+1), 4]
//   mag    = sqrt(re^2 + im^2)                               [F/2+1, 4]   (129 / 65)
//   enc    = relu(conv k3 p1 s1) 129|65 -> 128               [128, 4]
//            relu(conv k3 p1 s2) 128 -> 64                   [64, 2]
//            relu(conv k3 p1 s2) 64 -> 64                    [64, 1]
//            relu(conv k3 p1 s1) 64 -> 128                   [128, 1]
//   h, c   = lstm_cell(enc, (h, c))                          PyTorch gate order i, f, g, o
//   prob   = sigmoid(conv1x1(relu(h)))                       (the mean over one frame)
//   state  = stack(h, c)                                     [2, B, 128]
// The 16 kHz and 8 kHz networks have separate weights (the two branches of the ONNX
// file's If node); the safetensors export (silero_vad_16k.safetensors, the pip package's
// tinygrad model) holds one 16 kHz network under other names, with weights of its own (not
// v6.2's; docs/ARCHITECTURE.md, "Silero VAD").
//
// Weights are immutable and shared (SileroModel); each stream's state (h, c, context)
// lives in a SileroState, so one model serves any number of streams and threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace parley::vad {

inline constexpr int kHidden = 128;  // LSTM width

// Samples per chunk at `sample_rate` (512 at 16 kHz, 256 at 8 kHz); throws
// invalid_argument for any other rate.
int chunk_samples(int sample_rate);
// Context samples carried between chunks (64 / 32).
int context_samples(int sample_rate);

// One sample rate's network; shapes in the comments (out, in, kernel).
struct SileroNet {
  int sample_rate = 0;
  int n_fft = 0;            // 256 / 128
  std::vector<float> stft;  // (2 (n_fft/2+1), 1, n_fft): cos rows then sin rows
  // (128, n_fft/2+1, 3) (64, 128, 3) (64, 64, 3) (128, 64, 3)
  std::vector<float> conv_w[4];
  std::vector<float> conv_b[4];  // (128) (64) (64) (128)
  std::vector<float> w_ih;       // (4 * 128, 128), gates i, f, g, o
  std::vector<float> w_hh;       // (4 * 128, 128)
  std::vector<float> b_ih;       // (4 * 128)
  std::vector<float> b_hh;       // (4 * 128)
  std::vector<float> out_w;      // (1, 128, 1)
  float out_b = 0.0f;
};

// The streaming state of a batch of B independent streams at one sample rate: what the
// reference's OnnxWrapper keeps in _state and _context. Fresh: all zeros.
struct SileroState {
  int sample_rate = 0;
  int batch = 0;
  std::vector<float> h, c;     // [B, 128]
  std::vector<float> context;  // [B, context_samples]
  std::vector<float> scratch;  // per-chunk work buffers, sized once
  void reset();                // back to zeros (OnnxWrapper.reset_states)
};

class SileroModel {
 public:
  // Reads `path`: the ONNX model (silero_vad.onnx of silero-vad 5.x and 6.x: 16 kHz and
  // 8 kHz) or the safetensors export (16 kHz only). Throws not_found for a missing file,
  // invalid_argument for a corrupt one, and unsupported ("unsupported Silero VAD
  // version") for an ONNX file without the v5/v6 tensors (e.g. v3/v4) or wrong shapes.
  static std::shared_ptr<const SileroModel> load(const std::string& path);

  const std::string& path() const { return path_; }
  const std::string& format() const { return format_; }  // "onnx" | "safetensors"
  bool supports(int sample_rate) const;
  const SileroNet& net(int sample_rate) const;  // throws invalid_argument if unsupported

  // A fresh state for `batch` streams at `sample_rate`.
  SileroState new_state(int sample_rate, int batch = 1) const;

  // One step of every stream: `chunks` holds B consecutive chunks of chunk_samples()
  // samples, `probs` receives B speech probabilities. Updates h, c and context exactly as
  // the reference's OnnxWrapper.__call__ does.
  void forward(SileroState& state, std::span<const float> chunks, std::span<float> probs) const;

  // The speech probability of every chunk of `samples` from a fresh state, the last chunk
  // padded with zeros: the probabilities get_speech_timestamps computes.
  std::vector<float> probabilities(std::span<const float> samples, int sample_rate) const;

  // Use load(); public for std::make_shared.
  SileroModel(std::string path, std::string format, std::vector<SileroNet> nets);

 private:
  std::string path_;
  std::string format_;
  std::vector<SileroNet> nets_;
};

}  // namespace parley::vad
