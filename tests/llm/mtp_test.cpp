// MTP modules (llm/mtp.h): loading both layouts, the module's forward over its own KV cache
// in chunks equal to one call, and on CUDA against the CPU. The module's numbers themselves
// are checked against mlx-lm's layers in tests/parity/llm_mtp_parity_test.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "engine/device.h"
#include "engine/error.h"
#include "llm/model.h"
#include "llm/mtp.h"
#include "llm_test_util.h"

namespace parley {
namespace {

std::string write_mtp(const test::TempDir& dir, const std::string& shape,
                      const std::string& layout) {
  LlmSynthOptions o;
  o.shape = shape;
  o.seed = 4;
  o.mtp = layout;
  const std::string out = (dir.path() / (shape + "_" + layout)).string();
  write_synth_llm(o, out);
  return out;
}

// The MTP logits at positions [cut, n - 1) of `seq`, the target and the module both run in
// two calls split at `cut` (cut 0: one call each).
std::vector<float> mtp_logits(const LlmModel& m, const std::vector<int32_t>& seq, int64_t cut) {
  const int64_t n = int64_t(seq.size()), vocab = m.config().vocab_size;
  const int64_t n_blocks = KvCache::blocks_for(n);
  KvCache cache(m.config(), n_blocks, m.device(), m.dtype());
  KvCache mtp_cache(mtp_cache_config(m.config()), n_blocks, m.device(), m.dtype());
  std::vector<int32_t> table(static_cast<size_t>(n_blocks));
  std::iota(table.rbegin(), table.rend(), 0);
  ForwardScratch s(m.device());
  s.keep_hidden = true;
  Tensor logits, mtp;
  std::vector<float> out;
  for (auto [begin, end] : {std::pair<int64_t, int64_t>{0, cut}, {cut, n}}) {
    if (begin == end) continue;
    Batch b;
    b.rows.push_back({std::span(seq).subspan(size_t(begin), size_t(end - begin)), int32_t(begin),
                      table, true, false});
    m.forward(b, cache, logits, s);
    // Positions begin .. min(end, n - 1) - 1, each with the token after it.
    const int64_t last = std::min(end, n - 1);
    Batch mb;
    mb.rows.push_back({std::span(seq).subspan(size_t(begin + 1), size_t(last - begin)),
                       int32_t(begin), table, true, true});
    m.forward_mtp(mb, s.hidden.slice0(0, last - begin), mtp_cache, mtp, s);
    if (begin == cut) {
      const Tensor host = mtp.to(Device::cpu);
      out.assign(host.data<float>(), host.data<float>() + host.numel());
    }
  }
  EXPECT_EQ(int64_t(out.size()), (n - 1 - cut) * vocab);
  return out;
}

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

TEST(LlmMtp, BothLayoutsLoadAndChunkedCallsEqualOneCall) {
  test::TempDir tmp("mtp");
  for (auto [shape, layout] : {std::pair{"tiny-qwen3", "deepseek_v3"}, {"tiny-qwen2", "mimo"}}) {
    const LlmModel m = LlmModel::load(write_mtp(tmp, shape, layout));
    ASSERT_EQ(m.n_mtp(), 1) << layout;
    const std::vector<int32_t> seq = test::tokens(70, 9, m.config().vocab_size);
    const std::vector<float> whole = mtp_logits(m, seq, 0);
    const std::vector<float> chunked = mtp_logits(m, seq, 37);
    const int64_t vocab = m.config().vocab_size;
    // The chunked run's rows are positions 37 .. 68; the whole run's from 0.
    const std::vector<float> tail(whole.begin() + 37 * vocab, whole.end());
    EXPECT_LT(max_diff(tail, chunked), 1e-4f) << layout;
  }
  // A model without a module says so.
  const LlmModel plain = LlmModel::load(test::write_tiny(tmp, "tiny-qwen3"));
  EXPECT_EQ(plain.n_mtp(), 0);
  EXPECT_THROW(mtp_logits(plain, test::tokens(8, 1, plain.config().vocab_size), 0), Error);
}

TEST(LlmMtp, CudaMatchesTheCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  test::TempDir tmp("mtp_cuda");
  for (auto [shape, layout] : {std::pair{"tiny-qwen3", "deepseek_v3"}, {"tiny-qwen2", "mimo"}}) {
    const std::string dir = write_mtp(tmp, shape, layout);
    const LlmModel cpu = LlmModel::load(dir);
    const std::vector<int32_t> seq = test::tokens(90, 3, cpu.config().vocab_size);
    const std::vector<float> want = mtp_logits(cpu, seq, 40);
    float scale = 0;
    for (float x : want) scale = std::max(scale, std::abs(x));
    for (DType dt : {DType::f32, DType::bf16}) {
      const LlmModel gpu = LlmModel::load(dir, {Device::cuda, dt});
      const std::vector<float> got = mtp_logits(gpu, seq, 40);
      const float diff = max_diff(want, got);
      std::printf("[cuda mtp] %s %s %s: max |logit diff| %.3g (max |logit| %.3g)\n", shape, layout,
                  std::string(dtype_name(dt)).c_str(), diff, scale);
      EXPECT_LT(diff, dt == DType::f32 ? 1e-4f * std::max(1.0f, scale) : 0.1f * scale) << layout;
    }
  }
}

}  // namespace
}  // namespace parley
