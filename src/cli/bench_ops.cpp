// `parley bench ops`: GEMM and attention throughput at the shapes Whisper runs, on every
// device this build has, as JSON lines. Each figure is compared with a peak measured in
// the same run (the best of large square GEMMs of that device and dtype).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "engine/ops/attention.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/matmul.h"
#include "engine/threadpool.h"

namespace parley::cli {
namespace {

struct BenchOptions {
  std::string device = "all";  // cpu | cuda | all
  int threads = 0;             // 0: all hardware threads
  double min_seconds = 0.3;    // time spent per shape (after one warm-up call)
  bool quick = false;          // fewer, smaller shapes (CI smoke run)
};

struct GemmShape {
  std::string name;
  int64_t m, n, k;
};

struct AttnShape {
  const char* name;
  int64_t heads, lq, lk, d;
  bool causal;
};

// Fills a tensor with N(0, 1) values (converted to its dtype) on `device`.
Tensor random_tensor(const Shape& shape, DType dtype, Device device, std::mt19937& rng) {
  Tensor host = Tensor::empty(shape, DType::f32);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  float* p = host.data<float>();
  for (int64_t i = 0; i < host.numel(); ++i) p[i] = dist(rng);
  Tensor typed = dtype == DType::f32 ? host : host.cast(dtype);
  return device == Device::cpu ? typed : typed.to(device);
}

void sync(Device device) {
  if (device == Device::cuda) cuda::synchronize();
}

// Median milliseconds of `fn` over repeated calls filling about `min_seconds`.
double time_ms(Device device, double min_seconds, const std::function<void()>& fn) {
  using clock = std::chrono::steady_clock;
  fn();
  sync(device);
  std::vector<double> samples;
  const auto start = clock::now();
  while (samples.size() < 3 ||
         (std::chrono::duration<double>(clock::now() - start).count() < min_seconds &&
          samples.size() < 1000)) {
    const auto t0 = clock::now();
    fn();
    sync(device);
    samples.push_back(std::chrono::duration<double, std::milli>(clock::now() - t0).count());
  }
  std::nth_element(samples.begin(), samples.begin() + long(samples.size() / 2), samples.end());
  return samples[samples.size() / 2];
}

double gemm_ms(const GemmShape& s, DType dtype, Device device, const BenchOptions& opt,
               std::mt19937& rng) {
  Tensor a = random_tensor({s.m, s.k}, dtype, device, rng);
  Tensor w = random_tensor({s.n, s.k}, dtype, device, rng);  // a Linear weight [out, in]
  Tensor c = Tensor::empty({s.m, s.n}, dtype, device);
  MatmulOptions mo;
  mo.trans_b = true;
  return time_ms(device, opt.min_seconds, [&] { matmul(a, w, c, mo); });
}

// A decoder step's GEMM: few rows against a weight read from DRAM, as in a step, where the
// ~300 MB of weights stream through a 50 MB L2. Each sample runs the GEMM over enough
// copies of the weight (>= 256 MB) that none is still cached when its turn comes again, back
// to back as a step's kernels run; the time a GEMM is the sample over the copies.
double step_gemm_ms(const GemmShape& s, DType dtype, Device device, const BenchOptions& opt,
                    std::mt19937& rng) {
  const int64_t bytes = s.n * s.k * int64_t(dtype_size(dtype));
  const int64_t copies = std::max<int64_t>(1, (int64_t(256) << 20) / bytes);
  std::vector<Tensor> ws;
  for (int64_t i = 0; i < copies; ++i) ws.push_back(random_tensor({s.n, s.k}, dtype, device, rng));
  Tensor a = random_tensor({s.m, s.k}, dtype, device, rng);
  Tensor c = Tensor::empty({s.m, s.n}, dtype, device);
  MatmulOptions mo;
  mo.trans_b = true;
  return time_ms(device, opt.min_seconds,
                 [&] {
                   for (const Tensor& w : ws) matmul(a, w, c, mo);
                 }) /
         double(copies);
}

double attention_ms(const AttnShape& s, DType dtype, Device device, const BenchOptions& opt,
                    std::mt19937& rng) {
  Tensor q = random_tensor({1, s.heads, s.lq, s.d}, dtype, device, rng);
  Tensor k = random_tensor({1, s.heads, s.lk, s.d}, dtype, device, rng);
  Tensor v = random_tensor({1, s.heads, s.lk, s.d}, dtype, device, rng);
  Tensor out = Tensor::empty({1, s.heads, s.lq, s.d}, dtype, device);
  AttentionOptions ao;
  ao.causal = s.causal;
  return time_ms(device, opt.min_seconds, [&] { attention(q, k, v, out, ao); });
}

// Self-attention from a fused projection (attention_qkv): [1, L, 3 * H * D] -> [1, L, H * D].
double attention_qkv_ms(const AttnShape& s, DType dtype, Device device, const BenchOptions& opt,
                        std::mt19937& rng) {
  Tensor qkv = random_tensor({1, s.lq, 3 * s.heads * s.d}, dtype, device, rng);
  Tensor out = Tensor::empty({1, s.lq, s.heads * s.d}, dtype, device);
  return time_ms(device, opt.min_seconds, [&] { attention_qkv(qkv, int(s.heads), out); });
}

void emit(const nlohmann::json& j) { std::cout << j.dump() << std::endl; }

// The fields every GEMM row has.
nlohmann::json gemm_row(const char* bench, const GemmShape& s, const std::string& device,
                        const std::string& dtype, double ms) {
  return {{"bench", bench}, {"shape", s.name}, {"device", device}, {"dtype", dtype},
          {"m", s.m},       {"n", s.n},        {"k", s.k},         {"ms", ms}};
}

void bench_device(Device device, const BenchOptions& opt) {
  std::mt19937 rng(1234);
  const std::string dev(device_name(device));
  const std::string label = device == Device::cuda ? std::string(cuda::device_label())
                                                   : std::to_string(cpu_threads().size()) +
                                                         " threads, gemm " + cpu::gemm_provider();
  std::vector<DType> dtypes = {DType::f32, DType::bf16};
  if (device == Device::cuda) dtypes.push_back(DType::f16);

  // Whisper shapes: encoder projections/MLP of tiny and large-v3 over 1500 frames, a
  // decoder step's MLP at large-v3 width (M = 5 beams), and the tied vocabulary head.
  std::vector<GemmShape> shapes = {
      {"enc_tiny_qkv", 1500, 1152, 384},          {"enc_tiny_mlp_down", 1500, 384, 1536},
      {"enc_tiny_mlp_up", 1500, 1536, 384},       {"enc_large_qkv", 1500, 3840, 1280},
      {"enc_large_mlp_up", 1500, 5120, 1280},     {"dec_large_mlp_up_beam5", 5, 5120, 1280},
      {"dec_large_logits_beam5", 5, 51866, 1280},
  };
  std::vector<int64_t> peak_sizes =
      device == Device::cuda ? std::vector<int64_t>{4096, 8192} : std::vector<int64_t>{1024, 2048};
  std::vector<AttnShape> attn = {
      {"enc_tiny_self", 6, 1500, 1500, 64, false},
      {"enc_large_self", 20, 1500, 1500, 64, false},
      {"dec_large_step_self", 20, 1, 448, 64, true},
      {"dec_large_step_cross", 20, 1, 1500, 64, false},
  };
  // A decoder step's GEMMs at 1-8 rows (greedy, beams, batched sequences), weights from DRAM.
  std::vector<GemmShape> step_shapes;
  if (device == Device::cuda && !opt.quick)
    for (int64_t rows : {1, 2, 3, 4, 5, 8}) {
      step_shapes.push_back({"dec_large_out_rows" + std::to_string(rows), rows, 1280, 1280});
      step_shapes.push_back({"dec_large_mlp_up_rows" + std::to_string(rows), rows, 5120, 1280});
    }
  if (opt.quick) {
    shapes = {shapes[2], shapes[5]};
    peak_sizes = {device == Device::cuda ? int64_t(4096) : int64_t(512)};
    attn = {{"enc_tiny_self", 6, 1500, 1500, 64, false}, attn[1]};
  }

  for (DType dtype : dtypes) {
    const std::string dt(dtype_name(dtype));
    double peak = 0;
    for (int64_t n : peak_sizes) {
      const GemmShape sq{"square", n, n, n};
      const double ms = gemm_ms(sq, dtype, device, opt, rng);
      const double tflops = 2.0 * double(n) * double(n) * double(n) / (ms * 1e-3) / 1e12;
      peak = std::max(peak, tflops);
      emit({{"bench", "gemm_peak"},
            {"device", dev},
            {"device_label", label},
            {"dtype", dt},
            {"m", n},
            {"n", n},
            {"k", n},
            {"ms", ms},
            {"tflops", tflops}});
    }
    for (const auto& s : shapes) {
      const double ms = gemm_ms(s, dtype, device, opt, rng);
      const double tflops = 2.0 * double(s.m) * double(s.n) * double(s.k) / (ms * 1e-3) / 1e12;
      nlohmann::json row = gemm_row("gemm", s, dev, dt, ms);
      row["tflops"] = tflops;
      row["measured_peak_tflops"] = peak;
      row["fraction_of_peak"] = tflops / peak;
      emit(row);
    }
    for (const auto& s : step_shapes) {
      if (dtype == DType::f32) continue;  // the fast path's dtypes
      const double ms = step_gemm_ms(s, dtype, device, opt, rng);
      const double bytes = double(s.n * s.k) * double(dtype_size(dtype));
      nlohmann::json row = gemm_row("gemm_step", s, dev, dt, ms);
      row["weight_tb_per_s"] = bytes / (ms * 1e-3) / 1e12;
      emit(row);
    }
    for (const auto& s : attn) {
      for (const bool qkv : {false, true}) {
        if (qkv && (s.causal || s.lq != s.lk)) continue;  // the encoder's self-attention only
        const double ms = qkv ? attention_qkv_ms(s, dtype, device, opt, rng)
                              : attention_ms(s, dtype, device, opt, rng);
        // QK^T and PV: 2 * 2 * H * Lq * Lk * D flops (causal masking not discounted).
        const double flops = 4.0 * double(s.heads) * double(s.lq) * double(s.lk) * double(s.d);
        const double tflops = flops / (ms * 1e-3) / 1e12;
        emit({{"bench", qkv ? "attention_qkv" : "attention"},
              {"shape", s.name},
              {"device", dev},
              {"dtype", dt},
              {"heads", s.heads},
              {"lq", s.lq},
              {"lk", s.lk},
              {"d", s.d},
              {"causal", s.causal},
              {"ms", ms},
              {"tflops", tflops},
              {"measured_peak_tflops", peak},
              {"fraction_of_peak", tflops / peak}});
      }
    }
  }
}

void run_bench_ops(const BenchOptions& opt) {
  if (opt.threads > 0) set_cpu_threads(opt.threads);
  const bool want_cpu = opt.device == "cpu" || opt.device == "all";
  const bool want_cuda = opt.device == "cuda" || opt.device == "all";
  if (opt.device == "cuda")
    check(cuda_available(), ErrorKind::unsupported,
          "[bench] --device cuda: no CUDA device (or parley was built without CUDA)");
  if (want_cpu) bench_device(Device::cpu, opt);
  if (want_cuda && cuda_available()) bench_device(Device::cuda, opt);
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Benchmarks with machine-readable (JSON lines) output");
  bench->require_subcommand(1);
  auto opt = std::make_shared<BenchOptions>();
  auto* ops = bench->add_subcommand("ops", "GEMM and attention throughput at Whisper shapes");
  ops->add_option("--device", opt->device, "cpu, cuda or all (default: every device present)")
      ->check(CLI::IsMember({"cpu", "cuda", "all"}));
  ops->add_option("--threads", opt->threads, "CPU threads (default: all)");
  ops->add_option("--min-seconds", opt->min_seconds, "Time spent per shape")->capture_default_str();
  ops->add_flag("--quick", opt->quick, "Fewer and smaller shapes (a smoke run)");
  ops->callback([opt] { run_bench_ops(*opt); });
  add_bench_whisper_subcommand(*bench);
  add_bench_batch_subcommand(*bench);
  add_bench_llm_subcommand(*bench);
  add_bench_spec_subcommand(*bench);
}

}  // namespace parley::cli
