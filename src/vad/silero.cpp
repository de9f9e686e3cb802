// Silero VAD weights loading (ONNX, safetensors) and the forward pass in plain loops: the
// network is ~0.7 M multiply-adds per chunk, so dot products over contiguous rows (which
// the compiler vectorizes) beat any dispatch overhead.
#include "vad/silero.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "engine/dtype.h"
#include "engine/error.h"
#include "engine/tensor.h"
#include "io/model_file.h"
#include "io/onnx.h"
#include "io/safetensors.h"

namespace parley::vad {
namespace {

constexpr int kFrames = 4;  // STFT frames per chunk: (C + N + C - F) / (F/2) + 1
constexpr int kEncOut[4] = {128, 64, 64, 128};
constexpr int kEncStride[4] = {1, 2, 2, 1};

// Tensor names of one network in the two files parley reads. ONNX: the TorchScript module
// paths (snakers4/silero-vad's silero_vad.jit state_dict) under the If branch prefix;
// safetensors: silero_vad/tinygrad_model.py's attribute names.
struct Names {
  const char* stft;
  const char* conv_w[4];
  const char* conv_b[4];
  const char* w_ih;
  const char* w_hh;
  const char* b_ih;
  const char* b_hh;
  const char* out_w;
  const char* out_b;
};
constexpr Names kOnnxNames = {"stft.forward_basis_buffer",
                              {"encoder.0.reparam_conv.weight", "encoder.1.reparam_conv.weight",
                               "encoder.2.reparam_conv.weight", "encoder.3.reparam_conv.weight"},
                              {"encoder.0.reparam_conv.bias", "encoder.1.reparam_conv.bias",
                               "encoder.2.reparam_conv.bias", "encoder.3.reparam_conv.bias"},
                              "decoder.rnn.weight_ih",
                              "decoder.rnn.weight_hh",
                              "decoder.rnn.bias_ih",
                              "decoder.rnn.bias_hh",
                              "decoder.decoder.2.weight",
                              "decoder.decoder.2.bias"};
constexpr Names kSafetensorsNames = {
    "stft_conv.weight",
    {"conv1.weight", "conv2.weight", "conv3.weight", "conv4.weight"},
    {"conv1.bias", "conv2.bias", "conv3.bias", "conv4.bias"},
    "lstm_cell.weight_ih",
    "lstm_cell.weight_hh",
    "lstm_cell.bias_ih",
    "lstm_cell.bias_hh",
    "final_conv.weight",
    "final_conv.bias"};

const std::string kUnsupported = "unsupported Silero VAD version";

// The f32 values of `name` (f16/bf16 widened), which must have shape `want`.
std::vector<float> take(const io::TensorMap& map, const std::string& source,
                        const std::string& name, const Shape& want) {
  const Tensor* t = map.find(name);
  check(t != nullptr, ErrorKind::unsupported,
        source + ": " + kUnsupported + ": no tensor '" + name +
            "' (parley reads the silero-vad 5.x/6.x network)");
  check(t->shape() == want, ErrorKind::unsupported,
        source + ": " + kUnsupported + ": tensor '" + name + "' has shape " + t->shape().str() +
            ", expected " + want.str());
  check(t->dtype() == DType::f32 || t->dtype() == DType::f16 || t->dtype() == DType::bf16,
        ErrorKind::unsupported, source + ": tensor '" + name + "' is not floating point");
  const Tensor f = t->dtype() == DType::f32 ? *t : t->cast(DType::f32);
  std::vector<float> v(f.data<float>(), f.data<float>() + f.numel());
  for (float x : v) {
    check(std::isfinite(x), ErrorKind::invalid_argument,
          source + ": tensor '" + name + "' holds a non-finite value");
  }
  return v;
}

// One network whose tensors are `prefix + names.*`; the sample rate follows from the STFT
// basis: 258 rows (n_fft 256) is the 16 kHz network, 130 rows (n_fft 128) the 8 kHz one.
SileroNet read_net(const io::TensorMap& map, const std::string& source, const std::string& prefix,
                   const Names& names) {
  const std::string stft_name = prefix + names.stft;
  const Tensor* basis = map.find(stft_name);
  check(basis != nullptr, ErrorKind::unsupported,
        source + ": " + kUnsupported + ": no tensor '" + stft_name +
            "' (parley reads the silero-vad 5.x/6.x network)");
  check(basis->ndim() == 3 && (basis->dim(0) == 258 || basis->dim(0) == 130),
        ErrorKind::unsupported,
        source + ": " + kUnsupported + ": STFT basis '" + stft_name + "' has shape " +
            basis->shape().str() + ", expected [258, 1, 256] or [130, 1, 128]");
  SileroNet net;
  net.n_fft = basis->dim(0) == 258 ? 256 : 128;
  net.sample_rate = net.n_fft == 256 ? 16000 : 8000;
  const int64_t bins = net.n_fft / 2 + 1;
  net.stft = take(map, source, stft_name, Shape{2 * bins, 1, net.n_fft});
  int64_t in = bins;
  for (int l = 0; l < 4; ++l) {
    net.conv_w[l] = take(map, source, prefix + names.conv_w[l], Shape{kEncOut[l], in, 3});
    net.conv_b[l] = take(map, source, prefix + names.conv_b[l], Shape{kEncOut[l]});
    in = kEncOut[l];
  }
  net.w_ih = take(map, source, prefix + names.w_ih, Shape{4 * kHidden, kHidden});
  net.w_hh = take(map, source, prefix + names.w_hh, Shape{4 * kHidden, kHidden});
  net.b_ih = take(map, source, prefix + names.b_ih, Shape{4 * kHidden});
  net.b_hh = take(map, source, prefix + names.b_hh, Shape{4 * kHidden});
  net.out_w = take(map, source, prefix + names.out_w, Shape{1, kHidden, 1});
  net.out_b = take(map, source, prefix + names.out_b, Shape{1})[0];
  return net;
}

// Eight independent partial sums: without -ffast-math the compiler may not reorder one
// running sum, so a plain loop is a serial chain of adds; eight
// lanes vectorize as they stand: 60 s of audio took 1.07 s of CPU with one sum, 0.20 s
// with eight (SSE2 baseline build). The order differs from onnxruntime's anyway (1e-6).
float dot(const float* a, const float* b, int n) {
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) s[j] += a[i + j] * b[i + j];
  }
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7])) + tail;
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// y[o, t] = relu(b[o] + sum_{i,k} w[o, i, k] x[i, t*stride + k - 1]) for a kernel-3,
// padding-1 convolution; x is [in, t_in], y is [out, t_out]. `col` holds the im2col
// matrix [t_out, in * 3] so that each output is one contiguous dot product.
int conv3_relu(const float* x, int in, int t_in, const std::vector<float>& w,
               const std::vector<float>& b, int out, int stride, float* col, float* y) {
  const int t_out = (t_in + 2 - 3) / stride + 1;
  for (int t = 0; t < t_out; ++t) {
    float* row = col + size_t(t) * in * 3;
    for (int i = 0; i < in; ++i) {
      for (int k = 0; k < 3; ++k) {
        const int pos = t * stride + k - 1;
        row[i * 3 + k] = (pos >= 0 && pos < t_in) ? x[i * t_in + pos] : 0.0f;
      }
    }
  }
  for (int o = 0; o < out; ++o) {
    const float* wo = w.data() + size_t(o) * in * 3;
    for (int t = 0; t < t_out; ++t) {
      y[o * t_out + t] = std::max(0.0f, b[o] + dot(wo, col + size_t(t) * in * 3, in * 3));
    }
  }
  return t_out;
}

// Scratch floats one stream needs per chunk (see forward_one).
size_t scratch_floats(int sample_rate) {
  const int n_fft = sample_rate == 16000 ? 256 : 128;
  const int bins = n_fft / 2 + 1;
  const size_t padded = chunk_samples(sample_rate) + 2 * context_samples(sample_rate);
  const size_t spec = 2 * bins * kFrames;
  const size_t col = size_t(kFrames) * std::max(bins, 128) * 3;
  const size_t enc = 128 * kFrames * 2;
  return padded + spec + col + enc + 4 * kHidden;
}

// One stream, one chunk: x = [context, chunk] -> probability; h, c, context updated.
float forward_one(const SileroNet& net, const float* chunk, float* h, float* c, float* context,
                  float* scratch) {
  const int n = chunk_samples(net.sample_rate);
  const int ctx = context_samples(net.sample_rate);
  const int bins = net.n_fft / 2 + 1;
  const int hop = net.n_fft / 2;
  float* x = scratch;                                           // [ctx + n + ctx]
  float* spec = x + (ctx + n + ctx);                            // [2 bins, 4]
  float* col = spec + 2 * bins * kFrames;                       // im2col, [4, max(bins, 128) * 3]
  float* e0 = col + size_t(kFrames) * std::max(bins, 128) * 3;  // [128, 4]
  float* e1 = e0 + 128 * kFrames;                               // [<=128, <=4]
  float* gates = e1 + 128 * kFrames;                            // [4 * 128]

  std::copy(context, context + ctx, x);
  std::copy(chunk, chunk + n, x + ctx);
  const int len = ctx + n;
  // Reflect padding on the right (torch.nn.functional.pad mode "reflect": the edge
  // sample is not repeated).
  for (int j = 0; j < ctx; ++j) x[len + j] = x[len - 2 - j];
  // The next chunk's context: the last ctx samples of [context, chunk] before padding.
  std::copy(x + len - ctx, x + len, context);

  // STFT as a strided convolution with the (cos; sin) basis, then the magnitude.
  for (int o = 0; o < 2 * bins; ++o) {
    const float* row = net.stft.data() + size_t(o) * net.n_fft;
    for (int f = 0; f < kFrames; ++f) spec[o * kFrames + f] = dot(row, x + f * hop, net.n_fft);
  }
  for (int o = 0; o < bins * kFrames; ++o) {
    const float re = spec[o], im = spec[bins * kFrames + o];
    spec[o] = std::sqrt(re * re + im * im);
  }

  // Encoder: four conv + ReLU blocks, [bins, 4] -> [128, 4] -> [64, 2] -> [64, 1] -> [128, 1].
  int t =
      conv3_relu(spec, bins, kFrames, net.conv_w[0], net.conv_b[0], 128, kEncStride[0], col, e0);
  t = conv3_relu(e0, 128, t, net.conv_w[1], net.conv_b[1], 64, kEncStride[1], col, e1);
  t = conv3_relu(e1, 64, t, net.conv_w[2], net.conv_b[2], 64, kEncStride[2], col, e0);
  t = conv3_relu(e0, 64, t, net.conv_w[3], net.conv_b[3], 128, kEncStride[3], col, e1);
  const float* feat = e1;  // [128] (t == 1)

  // LSTM cell (torch.lstm_cell): gates = W_ih x + b_ih + W_hh h + b_hh, order i, f, g, o.
  for (int g = 0; g < 4 * kHidden; ++g) {
    gates[g] = (dot(net.w_ih.data() + size_t(g) * kHidden, feat, kHidden) + net.b_ih[g]) +
               (dot(net.w_hh.data() + size_t(g) * kHidden, h, kHidden) + net.b_hh[g]);
  }
  float logit = net.out_b;
  for (int j = 0; j < kHidden; ++j) {
    const float i = sigmoid(gates[j]);
    const float f = sigmoid(gates[kHidden + j]);
    const float gg = std::tanh(gates[2 * kHidden + j]);
    const float o = sigmoid(gates[3 * kHidden + j]);
    c[j] = f * c[j] + i * gg;
    h[j] = o * std::tanh(c[j]);
    // Decoder: ReLU, 1x1 convolution to one channel, sigmoid (the mean over one frame).
    logit += net.out_w[j] * std::max(0.0f, h[j]);
  }
  return sigmoid(logit);
}

}  // namespace

int chunk_samples(int sample_rate) {
  check_arg(sample_rate == 16000 || sample_rate == 8000,
            "[vad] sample rate " + std::to_string(sample_rate) +
                " Hz: Silero VAD runs at 16000 or 8000 Hz");
  return sample_rate == 16000 ? 512 : 256;
}

int context_samples(int sample_rate) { return chunk_samples(sample_rate) / 8; }

void SileroState::reset() {
  std::fill(h.begin(), h.end(), 0.0f);
  std::fill(c.begin(), c.end(), 0.0f);
  std::fill(context.begin(), context.end(), 0.0f);
}

SileroModel::SileroModel(std::string path, std::string format, std::vector<SileroNet> nets)
    : path_(std::move(path)), format_(std::move(format)), nets_(std::move(nets)) {}

std::shared_ptr<const SileroModel> SileroModel::load(const std::string& path) {
  check(std::filesystem::is_regular_file(path), ErrorKind::not_found,
        "[vad] no Silero VAD model file at " + path);
  const io::ModelFormat format = io::detect_format(path);
  std::vector<SileroNet> nets;
  std::string format_name;
  if (format == io::ModelFormat::onnx) {
    const io::OnnxModel onnx = io::read_onnx(path);
    const std::string source = "[vad] " + path;
    // silero-vad exports both networks as Constant nodes of the If node on `sr`.
    for (const char* branch : {"If_0.then_branch/", "If_0.else_branch/"}) {
      nets.push_back(read_net(onnx.tensors, source, branch, kOnnxNames));
    }
    check(nets[0].sample_rate != nets[1].sample_rate, ErrorKind::unsupported,
          source + ": " + kUnsupported + ": both If branches hold a " +
              std::to_string(nets[0].sample_rate) + " Hz network");
    format_name = "onnx";
  } else if (format == io::ModelFormat::safetensors) {
    const io::SafetensorsFile st = io::read_safetensors(path);
    nets.push_back(read_net(st.tensors, "[vad] " + path, "", kSafetensorsNames));
    format_name = "safetensors";
  } else {
    throw Error(ErrorKind::unsupported, "[vad] " + path + ": a " + io::format_name(format) +
                                            " file; a Silero VAD model is .onnx or .safetensors");
  }
  return std::make_shared<SileroModel>(path, format_name, std::move(nets));
}

bool SileroModel::supports(int sample_rate) const {
  return std::any_of(nets_.begin(), nets_.end(),
                     [&](const SileroNet& n) { return n.sample_rate == sample_rate; });
}

const SileroNet& SileroModel::net(int sample_rate) const {
  chunk_samples(sample_rate);  // validates the rate
  for (const auto& n : nets_) {
    if (n.sample_rate == sample_rate) return n;
  }
  throw Error(ErrorKind::invalid_argument,
              "[vad] " + path_ + " has no " + std::to_string(sample_rate) +
                  " Hz network (the safetensors export is 16 kHz only)");
}

SileroState SileroModel::new_state(int sample_rate, int batch) const {
  net(sample_rate);
  check_arg(batch >= 1, "[vad] batch must be at least 1, got " + std::to_string(batch));
  SileroState s;
  s.sample_rate = sample_rate;
  s.batch = batch;
  s.h.assign(size_t(batch) * kHidden, 0.0f);
  s.c.assign(size_t(batch) * kHidden, 0.0f);
  s.context.assign(size_t(batch) * context_samples(sample_rate), 0.0f);
  s.scratch.assign(scratch_floats(sample_rate), 0.0f);
  return s;
}

void SileroModel::forward(SileroState& state, std::span<const float> chunks,
                          std::span<float> probs) const {
  const SileroNet& n = net(state.sample_rate);
  const size_t len = size_t(chunk_samples(state.sample_rate));
  const size_t ctx = size_t(context_samples(state.sample_rate));
  const size_t b = size_t(state.batch);
  check_arg(chunks.size() == b * len, "[vad] forward: " + std::to_string(chunks.size()) +
                                          " samples for " + std::to_string(b) + " streams of " +
                                          std::to_string(len) + "-sample chunks");
  check_arg(probs.size() == b, "[vad] forward: " + std::to_string(probs.size()) + " outputs for " +
                                   std::to_string(b) + " streams");
  check_arg(state.h.size() == b * kHidden && state.c.size() == b * kHidden &&
                state.context.size() == b * ctx &&
                state.scratch.size() >= scratch_floats(state.sample_rate),
            "[vad] forward: state not made by new_state() for this batch and rate");
  for (size_t i = 0; i < b; ++i) {
    probs[i] = forward_one(n, chunks.data() + i * len, state.h.data() + i * kHidden,
                           state.c.data() + i * kHidden, state.context.data() + i * ctx,
                           state.scratch.data());
  }
}

std::vector<float> SileroModel::probabilities(std::span<const float> samples,
                                              int sample_rate) const {
  SileroState state = new_state(sample_rate);
  const size_t n = size_t(chunk_samples(sample_rate));
  std::vector<float> out((samples.size() + n - 1) / n);
  std::vector<float> chunk(n);
  for (size_t k = 0; k < out.size(); ++k) {
    const size_t begin = k * n;
    const size_t count = std::min(n, samples.size() - begin);
    std::copy_n(samples.data() + begin, count, chunk.data());
    std::fill(chunk.begin() + count, chunk.end(), 0.0f);
    forward(state, chunk, std::span<float>(&out[k], 1));
  }
  return out;
}

}  // namespace parley::vad
