// The chat engine on CUDA against its CPU oracle (skipped without a GPU): the ops (paged
// attention over shuffled blocks with long decode contexts that split, GQA groups, head sizes,
// sliding windows and soft caps; RoPE, GLU, KV writes) in f32, f16 and bf16, and the whole
// forward of every tiny family in f32 (logits within 1e-4 of the CPU's) and bf16
// (top-1 agreement and the logit difference, printed), batched rows against rows alone, and a
// decode loop without system allocations.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

#include "engine/alloc_stats.h"
#include "engine/device.h"
#include "engine/ops/glu.h"
#include "engine/ops/llm_fused.h"
#include "engine/ops/paged_attention.h"
#include "engine/ops/rope.h"
#include "llm/model.h"
#include "llm_test_util.h"

namespace parley {
namespace {

// Values rounded to `dt` and widened back, on the host (what the device will hold).
Tensor rounded(const Shape& s, std::mt19937& rng, DType dt, float stddev = 1.0f) {
  Tensor t = Tensor::empty(s, DType::f32);
  std::normal_distribution<float> n(0.0f, stddev);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = n(rng);
  return dt == DType::f32 ? t : t.cast(dt).cast(DType::f32);
}

Tensor on_cuda(const Tensor& host_f32, DType dt) { return host_f32.cast(dt).to(Device::cuda); }

std::vector<float> to_host_f32(const Tensor& t) {
  const Tensor h = t.to(Device::cpu);
  const Tensor f = h.dtype() == DType::f32 ? h : h.cast(DType::f32);
  return std::vector<float>(f.data<float>(), f.data<float>() + f.numel());
}

// |got - want| <= tol * (1 + |want|) everywhere; returns the largest |got - want|.
float expect_near_all(const std::vector<float>& got, const float* want, float tol,
                      const char* what) {
  float worst = 0;
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float d = std::abs(got[i] - want[i]);
    worst = std::max(worst, d);
    if (!(d <= tol * (1.0f + std::abs(want[i])))) ++bad;
  }
  EXPECT_EQ(bad, 0) << what << ": worst |diff| " << worst << " (tol " << tol << ")";
  return worst;
}

float dtype_tol(DType dt) { return dt == DType::f32 ? 2e-5f : (dt == DType::f16 ? 4e-3f : 3e-2f); }

class CudaLlm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  }
};

struct AttnCase {
  int64_t hq, hkv, d, window;
  float softcap;
};

TEST_F(CudaLlm, PagedAttentionMatchesCpu) {
  const std::vector<AttnCase> cases = {
      {4, 2, 32, 0, 0.0f},    {16, 8, 64, 0, 0.0f}, {32, 8, 128, 0, 0.0f}, {8, 1, 128, 0, 0.0f},
      {4, 1, 256, 100, 0.0f}, {6, 2, 128, 0, 0.0f}, {8, 4, 64, 0, 50.0f},  {24, 8, 128, 300, 0.0f},
  };
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    for (const AttnCase& ac : cases) {
      SCOPED_TRACE("hq " + std::to_string(ac.hq) + " hkv " + std::to_string(ac.hkv) + " d " +
                   std::to_string(ac.d) + " window " + std::to_string(ac.window) + " " +
                   std::string(dtype_name(dt)));
      std::mt19937 rng(uint32_t(ac.hq * 131 + ac.d + int(dt)));
      constexpr int64_t bs = KvCache::kBlockSize;
      // A prefill from 0 (150 tokens: three tensor-core query tiles), a chunk from 290 (30),
      // decode steps at 700 (3 splits)
      // and 1100 (5 splits), and a 3-token verify row at 520.
      const std::vector<int64_t> start = {0, 290, 700, 1100, 520}, count = {150, 30, 1, 1, 3};
      int64_t n_blocks = 0;
      for (size_t r = 0; r < start.size(); ++r)
        n_blocks += KvCache::blocks_for(start[r] + count[r]);
      std::vector<int32_t> ids(static_cast<size_t>(n_blocks));
      std::iota(ids.begin(), ids.end(), 0);
      std::shuffle(ids.begin(), ids.end(), rng);
      std::vector<std::vector<int32_t>> tables;
      int64_t used = 0, n_tok = 0;
      for (size_t r = 0; r < start.size(); ++r) {
        const int64_t need = KvCache::blocks_for(start[r] + count[r]);
        tables.emplace_back(ids.begin() + used, ids.begin() + used + need);
        used += need;
      }
      std::vector<PagedRow> rows;
      for (size_t r = 0; r < start.size(); ++r) {
        rows.push_back({n_tok, count[r], start[r], tables[r]});
        n_tok += count[r];
      }
      const Shape cache_shape{n_blocks, bs, ac.hkv, ac.d};
      const Tensor kc = rounded(cache_shape, rng, dt), vc = rounded(cache_shape, rng, dt);
      const Tensor q = rounded({n_tok, ac.hq, ac.d}, rng, dt);
      PagedAttentionOptions opt;
      opt.sliding_window = ac.window;
      opt.softcap = ac.softcap;
      Tensor want = Tensor::empty({n_tok, ac.hq, ac.d}, DType::f32);
      paged_attention(q, kc, vc, rows, want, opt);

      Pool host(Device::cpu), dev(Device::cuda);
      PagedTables tables_dev;
      make_paged_tables(rows, host, dev, tables_dev);
      EXPECT_EQ(tables_dev.split_tokens, 5);
      EXPECT_EQ(tables_dev.max_splits, (1100 + paged_split_keys()) / paged_split_keys());
      opt.tables = &tables_dev;
      const Tensor kd = on_cuda(kc, dt), vd = on_cuda(vc, dt), qd = on_cuda(q, dt);
      Tensor got = Tensor::empty({n_tok, ac.hq, ac.d}, dt, Device::cuda);
      paged_attention(qd, kd, vd, rows, got, opt);
      expect_near_all(to_host_f32(got), want.data<float>(), dtype_tol(dt), "paged_attention");
      // Launched twice: the same bits (the split merge is in chunk order, counters reset).
      Tensor again = Tensor::empty({n_tok, ac.hq, ac.d}, dt, Device::cuda);
      paged_attention(qd, kd, vd, rows, again, opt);
      const auto a = to_host_f32(got), b = to_host_f32(again);
      EXPECT_TRUE(a == b) << "two launches differ";
    }
  }
}

TEST_F(CudaLlm, RopeGluAndKvWriteMatchCpu) {
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    std::mt19937 rng(11);
    const int64_t t = 37, h = 6, d = 128;
    Tensor x = rounded({t, h, d}, rng, dt);
    Tensor pos = Tensor::empty({t}, DType::i32);
    for (int64_t i = 0; i < t; ++i) pos.data<int32_t>()[i] = int32_t((i * 977) % 5000);
    const std::vector<float> f = rope_inv_freq(int(d), 500000.0, {});
    Tensor inv = Tensor::empty({d / 2}, DType::f32);
    std::copy(f.begin(), f.end(), inv.data<float>());
    Tensor xd = on_cuda(x, dt);
    const Tensor posd = pos.to(Device::cuda), invd = inv.to(Device::cuda);
    rope(x, pos, inv);
    rope(xd, posd, invd);
    expect_near_all(to_host_f32(xd), x.data<float>(), dtype_tol(dt), "rope");

    for (GluActivation act : {GluActivation::silu, GluActivation::gelu_tanh}) {
      const Tensor g = rounded({t, 300}, rng, dt, 3.0f), u = rounded({t, 300}, rng, dt);
      Tensor want = Tensor::empty({t, 300}, DType::f32);
      glu(g, u, act, want);
      const Tensor gd = on_cuda(g, dt), ud = on_cuda(u, dt);
      Tensor got = Tensor::empty({t, 300}, dt, Device::cuda);
      glu(gd, ud, act, got);
      expect_near_all(to_host_f32(got), want.data<float>(), dtype_tol(dt), "glu");
    }

    const int64_t hkv = 2;
    const Tensor k = rounded({5, hkv, d}, rng, dt), v = rounded({5, hkv, d}, rng, dt);
    Tensor slots = Tensor::empty({5}, DType::i32);
    const int32_t s[5] = {17, 3, 40, 0, 63};
    std::copy(s, s + 5, slots.data<int32_t>());
    Tensor kc = Tensor::zeros({4, 16, hkv, d}, DType::f32),
           vc = Tensor::zeros({4, 16, hkv, d}, DType::f32);
    Tensor kcd = on_cuda(kc, dt), vcd = on_cuda(vc, dt);
    paged_kv_write(k, v, slots, kc, vc);
    paged_kv_write(on_cuda(k, dt), on_cuda(v, dt), slots.to(Device::cuda), kcd, vcd);
    expect_near_all(to_host_f32(kcd), kc.data<float>(), 0.0f, "kv write k");
    expect_near_all(to_host_f32(vcd), vc.data<float>(), 0.0f, "kv write v");
  }
}

// The fused ops (ops/llm_fused.h) on CUDA against their CPU sequences of plain ops.
TEST_F(CudaLlm, FusedOpsMatchCpu) {
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    for (const int64_t d : {32, 64, 128, 256}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " D " + std::to_string(d));
      std::mt19937 rng(uint32_t(d) + 3 * uint32_t(dt));
      const int64_t t = 21, hidden = 3 * d + 8, hq = 4, hkv = 2;
      // add_rms_norm
      Tensor h = rounded({t, hidden}, rng, dt), y = rounded({t, hidden}, rng, dt);
      const Tensor gamma = rounded({hidden}, rng, DType::f32);
      Tensor hd = on_cuda(h, dt);
      const Tensor yd = on_cuda(y, dt), gd = gamma.to(Device::cuda);
      Tensor want = Tensor::empty({t, hidden}, DType::f32);
      add_rms_norm(h, y, gamma, 1e-6f, want);
      Tensor got = Tensor::empty({t, hidden}, dt, Device::cuda);
      add_rms_norm(hd, yd, gd, 1e-6f, got);
      expect_near_all(to_host_f32(hd), h.data<float>(), dtype_tol(dt), "add_rms_norm h");
      expect_near_all(to_host_f32(got), want.data<float>(), 2 * dtype_tol(dt), "add_rms_norm out");
      // qkv_rope_write, with and without the per-head norms
      for (bool norms : {false, true}) {
        const Tensor qkv = rounded({t, (hq + 2 * hkv) * d}, rng, dt);
        const Tensor qn = rounded({d}, rng, DType::f32), kn = rounded({d}, rng, DType::f32);
        Tensor pos = Tensor::empty({t}, DType::i32), slots = Tensor::empty({t}, DType::i32);
        for (int64_t i = 0; i < t; ++i) {
          pos.data<int32_t>()[i] = int32_t(100 + 37 * i);
          slots.data<int32_t>()[i] = int32_t((i * 7) % 48);
        }
        const std::vector<float> f = rope_inv_freq(int(d), 1e6, {});
        Tensor inv = Tensor::empty({d / 2}, DType::f32);
        std::copy(f.begin(), f.end(), inv.data<float>());
        Tensor q_want = Tensor::empty({t, hq, d}, DType::f32);
        Tensor kc = Tensor::zeros({3, 16, hkv, d}, DType::f32),
               vc = Tensor::zeros({3, 16, hkv, d}, DType::f32);
        QkvRope a;
        a.n_q_heads = hq;
        a.n_kv_heads = hkv;
        a.q_norm = norms ? &qn : nullptr;
        a.k_norm = norms ? &kn : nullptr;
        a.positions = &pos;
        a.inv_freq = &inv;
        a.slots = &slots;
        qkv_rope_write(qkv, a, q_want, kc, vc);
        const Tensor qnd = qn.to(Device::cuda), knd = kn.to(Device::cuda);
        const Tensor posd = pos.to(Device::cuda), invd = inv.to(Device::cuda),
                     sd = slots.to(Device::cuda);
        QkvRope b = a;
        b.q_norm = norms ? &qnd : nullptr;
        b.k_norm = norms ? &knd : nullptr;
        b.positions = &posd;
        b.inv_freq = &invd;
        b.slots = &sd;
        Tensor q_got = Tensor::empty({t, hq, d}, dt, Device::cuda);
        Tensor kcd = on_cuda(kc, dt), vcd = on_cuda(vc, dt);
        qkv_rope_write(on_cuda(qkv, dt), b, q_got, kcd, vcd);
        const float tol = norms ? 2 * dtype_tol(dt) : dtype_tol(dt);
        expect_near_all(to_host_f32(q_got), q_want.data<float>(), tol, "qkv_rope_write q");
        expect_near_all(to_host_f32(kcd), kc.data<float>(), tol, "qkv_rope_write k");
        expect_near_all(to_host_f32(vcd), vc.data<float>(), 0.0f, "qkv_rope_write v");
      }
      // glu_halves
      for (GluActivation act : {GluActivation::silu, GluActivation::gelu_tanh}) {
        const Tensor gu = rounded({t, 2 * d}, rng, dt, 2.0f);
        Tensor gw = Tensor::empty({t, d}, DType::f32);
        glu_halves(gu, act, gw);
        Tensor gg = Tensor::empty({t, d}, dt, Device::cuda);
        glu_halves(on_cuda(gu, dt), act, gg);
        expect_near_all(to_host_f32(gg), gw.data<float>(), dtype_tol(dt), "glu_halves");
      }
    }
  }
}

using test::tokens;

// Every position's logits of a 300-token prompt (in two chunks) and 20 teacher-forced decode
// steps, on `m` with its own cache; blocks in reverse order.
std::vector<float> run_prompt(const LlmModel& m, const std::vector<int32_t>& seq, int64_t prompt) {
  const int64_t vocab = m.config().vocab_size, total = int64_t(seq.size());
  const int64_t n_blocks = KvCache::blocks_for(total);
  KvCache cache(m.config(), n_blocks, m.device(), m.dtype());
  std::vector<int32_t> table(static_cast<size_t>(n_blocks));
  std::iota(table.rbegin(), table.rend(), 0);
  ForwardScratch s(m.device());
  Tensor logits;
  std::vector<float> all;
  auto run = [&](int64_t from, int64_t n, bool all_logits) {
    Batch b;
    b.rows.push_back(
        {std::span(seq).subspan(size_t(from), size_t(n)), int32_t(from), table, true, all_logits});
    m.forward(b, cache, logits, s);
    all.insert(all.end(), logits.data<float>(), logits.data<float>() + logits.numel());
  };
  run(0, 170, true);
  run(170, prompt - 170, true);
  for (int64_t p = prompt; p < total; ++p) run(p, 1, false);
  EXPECT_EQ(int64_t(all.size()), total * vocab);
  return all;
}

class CudaForward : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(CudaForward, MatchesCpuInF32AndBf16) {
  test::TempDir tmp(std::string("cuda_") + GetParam());
  const std::string dir = test::write_tiny(tmp, GetParam());
  const LlmModel cpu = LlmModel::load(dir);
  const int64_t vocab = cpu.config().vocab_size, prompt = 300, total = 320;
  const std::vector<int32_t> seq = tokens(total, 5, vocab);
  const std::vector<float> want = run_prompt(cpu, seq, prompt);
  for (DType dt : {DType::f32, DType::bf16}) {
    const LlmModel gpu = LlmModel::load(dir, {Device::cuda, dt});
    const std::vector<float> got = run_prompt(gpu, seq, prompt);
    ASSERT_EQ(got.size(), want.size());
    float worst = 0, scale = 0;
    std::vector<float> pos_worst(static_cast<size_t>(total), 0.0f);
    int64_t agree = 0;
    for (int64_t p = 0; p < total; ++p) {
      const float* w = want.data() + p * vocab;
      const float* g = got.data() + p * vocab;
      for (int64_t i = 0; i < vocab; ++i) {
        pos_worst[size_t(p)] = std::max(pos_worst[size_t(p)], std::abs(w[i] - g[i]));
        scale = std::max(scale, std::abs(w[i]));
      }
      worst = std::max(worst, pos_worst[size_t(p)]);
      agree += std::max_element(w, w + vocab) == w + (std::max_element(g, g + vocab) - g);
    }
    const int64_t far = std::count_if(pos_worst.begin(), pos_worst.end(),
                                      [&](float x) { return x > 0.1f * scale; });
    std::printf(
        "[cuda forward] %s %s: max |logit diff| %.3g (max |logit| %.3g), top-1 %lld/%lld, "
        "positions off by more than a tenth of it %lld\n",
        GetParam(), std::string(dtype_name(dt)).c_str(), worst, scale,
        static_cast<long long>(agree), static_cast<long long>(total), static_cast<long long>(far));
    if (dt == DType::f32) {
      EXPECT_LT(worst, 1e-4f * std::max(1.0f, scale));
      EXPECT_EQ(agree, total);
    } else if (std::string(GetParam()).find("moe") == std::string::npos) {
      EXPECT_EQ(far, 0);
      EXPECT_GE(agree, total * 9 / 10);
    } else {
      // Routed experts: bf16 router logits pick another expert for a few tokens (a discrete
      // choice, as in any bf16 MoE), and those positions (and the later ones that attend to
      // them) differ as much as the experts do: the f32 run above checks the routing itself.
      EXPECT_GE(agree, total * 17 / 20);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, CudaForward,
                         ::testing::Values("tiny-llama", "tiny-qwen2", "tiny-qwen3",
                                           "tiny-qwen3_moe", "tiny-gemma3"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// Rows batched together (a prefill, a chunk, decode steps) give each row's logits as it gets
// them alone, within f32 rounding (cuBLAS may pick other kernels for other row counts), and
// the same top-1.
TEST_F(CudaLlm, BatchedRowsMatchRowsAlone) {
  test::TempDir tmp("cuda_batch");
  const LlmModel m =
      LlmModel::load(test::write_tiny(tmp, "tiny-qwen3"), {Device::cuda, DType::f32});
  const int64_t vocab = m.config().vocab_size;
  const std::vector<int64_t> cached = {0, 23, 16, 290}, fresh = {70, 1, 20, 1};
  std::vector<std::vector<int32_t>> seqs, tables;
  int32_t next = 0;
  for (size_t r = 0; r < cached.size(); ++r) {
    seqs.push_back(tokens(cached[r] + fresh[r], int32_t(r), vocab));
    std::vector<int32_t> t(static_cast<size_t>(KvCache::blocks_for(cached[r] + fresh[r])));
    for (auto& b : t) b = next++;
    std::reverse(t.begin(), t.end());
    tables.push_back(t);
  }
  KvCache batched(m.config(), next, Device::cuda, DType::f32);
  KvCache alone(m.config(), next, Device::cuda, DType::f32);
  ForwardScratch s(Device::cuda);
  Tensor logits;
  for (size_t r = 0; r < cached.size(); ++r) {
    if (cached[r] == 0) continue;
    for (KvCache* c : {&batched, &alone}) {
      Batch b;
      b.rows.push_back({std::span(seqs[r]).first(size_t(cached[r])), 0, tables[r], false, false});
      m.forward(b, *c, logits, s);
    }
  }
  Batch all;
  for (size_t r = 0; r < cached.size(); ++r)
    all.rows.push_back({std::span(seqs[r]).subspan(size_t(cached[r])), int32_t(cached[r]),
                        tables[r], true, false});
  m.forward(all, batched, logits, s);
  const std::vector<float> together(logits.data<float>(), logits.data<float>() + logits.numel());
  for (size_t r = 0; r < cached.size(); ++r) {
    Batch b;
    b.rows.push_back(all.rows[r]);
    m.forward(b, alone, logits, s);
    const float* t = together.data() + int64_t(r) * vocab;
    expect_near_all(std::vector<float>(logits.data<float>(), logits.data<float>() + vocab), t,
                    1e-4f, "row alone vs batched");
    EXPECT_EQ(std::max_element(t, t + vocab) - t,
              std::max_element(logits.data<float>(), logits.data<float>() + vocab) -
                  logits.data<float>());
  }
}

// Decode steps through CUDA graphs (ForwardScratch::graphs) give exactly the logits of the
// same steps run eagerly: three rows at different contexts, the longest crossing 256 keys (a
// new key chunk: a new graph), a row leaving and coming back (another row count).
TEST_F(CudaLlm, GraphedDecodeStepsMatchEagerSteps) {
  test::TempDir tmp("cuda_graphs");
  for (const char* family : {"tiny-llama", "tiny-qwen2", "tiny-qwen3", "tiny-gemma3"}) {
    const LlmModel m = LlmModel::load(test::write_tiny(tmp, family), {Device::cuda, DType::bf16});
    const int64_t vocab = m.config().vocab_size;
    const std::vector<int64_t> start = {250, 9, 100};  // the first crosses 256 keys
    auto run = [&](bool graphs, uint64_t* replays) {
      if (!graphs) setenv("PARLEY_CUDA_GRAPHS", "0", 1);
      KvCache cache(m.config(), 96, Device::cuda, DType::bf16);
      std::vector<std::vector<int32_t>> tables(3, std::vector<int32_t>(32));
      for (int r = 0; r < 3; ++r) std::iota(tables[r].rbegin(), tables[r].rend(), 32 * r);
      ForwardScratch s(Device::cuda);
      Tensor logits;
      Batch prefill;
      std::vector<std::vector<int32_t>> prompts;
      for (int r = 0; r < 3; ++r) prompts.push_back(tokens(start[size_t(r)], r + 1, vocab));
      for (int r = 0; r < 3; ++r) prefill.rows.push_back({prompts[size_t(r)], 0, tables[r], true});
      m.forward(prefill, cache, logits, s);
      std::vector<int32_t> nx = {5, 6, 7};
      std::vector<int64_t> pos = start;
      std::vector<float> all;
      for (int i = 0; i < 24; ++i) {
        Batch b;
        std::vector<int> live;
        for (int r = 0; r < 3; ++r)
          if (!(r == 1 && i >= 10 && i < 14)) live.push_back(r);  // row 1 sits out 4 steps
        for (int r : live)
          b.rows.push_back({std::span(nx).subspan(size_t(r), 1), int32_t(pos[size_t(r)]++),
                            tables[size_t(r)], true});
        m.forward(b, cache, logits, s);
        all.insert(all.end(), logits.data<float>(), logits.data<float>() + logits.numel());
        for (size_t j = 0; j < live.size(); ++j) {
          const float* l = logits.data<float>() + int64_t(j) * vocab;
          nx[size_t(live[j])] = int32_t(std::max_element(l, l + vocab) - l);
        }
      }
      if (replays) *replays = s.graphs.replays();
      unsetenv("PARLEY_CUDA_GRAPHS");
      return all;
    };
    uint64_t replays = 0;
    const std::vector<float> eager = run(false, nullptr);
    const std::vector<float> graphed = run(true, &replays);
    ASSERT_EQ(eager.size(), graphed.size()) << family;
    size_t first = eager.size();
    float worst = 0;
    for (size_t i = 0; i < eager.size(); ++i)
      if (eager[i] != graphed[i]) {
        first = std::min(first, i);
        worst = std::max(worst, std::abs(eager[i] - graphed[i]));
      }
    EXPECT_EQ(first, eager.size())
        << family << ": graphed decode steps differ from eager ones, "
        << "first at logit " << first << " (of " << eager.size() << "), max |diff| " << worst;
    EXPECT_GE(replays, 12u) << family;
  }
}

TEST_F(CudaLlm, DecodeLoopMakesNoSystemAllocations) {
  test::TempDir tmp("cuda_alloc");
  const LlmModel m =
      LlmModel::load(test::write_tiny(tmp, "tiny-llama"), {Device::cuda, DType::bf16});
  const int64_t vocab = m.config().vocab_size;
  KvCache cache(m.config(), 64, Device::cuda, DType::bf16);
  std::vector<int32_t> ta(32), tb(32);
  std::iota(ta.begin(), ta.end(), 0);
  std::iota(tb.begin(), tb.end(), 32);
  ForwardScratch s(Device::cuda);
  Tensor logits;
  const std::vector<int32_t> pa = tokens(260, 1, vocab), pb = tokens(9, 2, vocab);
  Batch prefill;
  prefill.rows.push_back({pa, 0, ta, true, false});
  prefill.rows.push_back({pb, 0, tb, true, false});
  m.forward(prefill, cache, logits, s);
  std::vector<int32_t> nx = {5, 6};
  auto step = [&](int i) {
    Batch b;
    b.rows.reserve(2);
    b.rows.push_back({std::span(nx).first(1), int32_t(260 + i), ta, true, false});
    b.rows.push_back({std::span(nx).subspan(1, 1), int32_t(9 + i), tb, true, false});
    m.forward(b, cache, logits, s);
    const float* l = logits.data<float>();
    nx[0] = int32_t(std::max_element(l, l + vocab) - l);
    nx[1] = int32_t(std::max_element(l + vocab, l + 2 * vocab) - (l + vocab));
  };
  for (int i = 0; i < 3; ++i) step(i);
  const AllocStats before = alloc_stats();
  for (int i = 3; i < 60; ++i) step(i);  // crosses 256 keys: row a's attention splits
  EXPECT_EQ(alloc_stats().host_allocs, before.host_allocs);
  EXPECT_EQ(alloc_stats().device_allocs, before.device_allocs);
}

}  // namespace
}  // namespace parley
