// The batched forward over ragged rows with paged KV: batch invariance (prefill chunks and
// decode steps of several rows in one call give each row's logits as it gets them alone),
// chunked prefill equal to one prefill, and a decode loop without system allocations.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "engine/alloc_stats.h"
#include "llm/model.h"
#include "llm_test_util.h"

namespace parley {
namespace {

using test::tokens;

float max_diff(const float* a, const float* b, int64_t n) {
  float m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

// Prefills each sequence's first `cached` tokens alone (blocks of its own table).
void warm(const LlmModel& m, KvCache& cache, const std::vector<int32_t>& seq, int64_t cached,
          const std::vector<int32_t>& table, ForwardScratch& s) {
  if (cached == 0) return;
  Batch b;
  b.rows.push_back({std::span(seq).first(size_t(cached)), 0, table, false, false});
  Tensor logits;
  m.forward(b, cache, logits, s);
}

class ForwardFamily : public ::testing::TestWithParam<const char*> {};

TEST_P(ForwardFamily, BatchInvariantAcrossRaggedRows) {
  test::TempDir tmp(std::string("inv_") + GetParam());
  const LlmModel m = LlmModel::load(test::write_tiny(tmp, GetParam()));
  const int64_t vocab = m.config().vocab_size;
  // Row 0: a 70-token prefill (past Gemma's 64 window); row 1: a decode step after 23
  // cached tokens; row 2: a 20-token chunk after 16 cached; row 3: a decode step at 90.
  const std::vector<int64_t> cached = {0, 23, 16, 90}, fresh = {70, 1, 20, 1};
  std::vector<std::vector<int32_t>> seqs, tables;
  int32_t next_block = 0;
  for (size_t r = 0; r < cached.size(); ++r) {
    seqs.push_back(tokens(cached[r] + fresh[r], int32_t(r), vocab));
    const int64_t need = KvCache::blocks_for(cached[r] + fresh[r]);
    std::vector<int32_t> t(static_cast<size_t>(need));
    for (auto& b : t) b = next_block++;
    std::reverse(t.begin(), t.end());
    tables.push_back(t);
  }
  KvCache batched(m.config(), next_block), alone(m.config(), next_block);
  ForwardScratch s;
  for (size_t r = 0; r < seqs.size(); ++r) {
    warm(m, batched, seqs[r], cached[r], tables[r], s);
    warm(m, alone, seqs[r], cached[r], tables[r], s);
  }
  Batch batch;
  for (size_t r = 0; r < seqs.size(); ++r)
    batch.rows.push_back({std::span(seqs[r]).subspan(size_t(cached[r])), int32_t(cached[r]),
                          tables[r], true, r == 0});
  Tensor all;
  m.forward(batch, batched, all, s);
  ASSERT_EQ(all.dim(0), 70 + 3);
  const std::vector<float> got(all.data<float>(), all.data<float>() + all.numel());
  float worst = 0;
  int64_t out_row = 0;
  for (size_t r = 0; r < seqs.size(); ++r) {
    Batch one;
    one.rows.push_back(batch.rows[r]);
    Tensor l;
    m.forward(one, alone, l, s);
    const int64_t n = l.dim(0);
    worst = std::max(worst, max_diff(got.data() + out_row * vocab, l.data<float>(), n * vocab));
    out_row += n;
  }
  // The kernels reduce each row in an order that does not depend on the batch, except the
  // GEMMs, whose library may block differently for another row count (measured: 0).
  EXPECT_EQ(worst, 0.0f) << GetParam();
}

TEST_P(ForwardFamily, ChunkedPrefillEqualsOnePrefill) {
  test::TempDir tmp(std::string("chunk_") + GetParam());
  const LlmModel m = LlmModel::load(test::write_tiny(tmp, GetParam()));
  const int64_t vocab = m.config().vocab_size;
  const std::vector<int32_t> seq = tokens(80, 9, vocab);
  std::vector<int32_t> table = {3, 0, 4, 1, 2};
  KvCache a(m.config(), 5), b(m.config(), 5);
  ForwardScratch s;
  Batch whole;
  whole.rows.push_back({seq, 0, table, true, true});
  Tensor la;
  m.forward(whole, a, la, s);
  const std::vector<float> one(la.data<float>(), la.data<float>() + la.numel());
  std::vector<float> chunked;
  for (int64_t begin = 0; begin < 80;) {
    const int64_t n = std::min<int64_t>(begin == 0 ? 33 : 16, 80 - begin);
    Batch c;
    c.rows.push_back(
        {std::span(seq).subspan(size_t(begin), size_t(n)), int32_t(begin), table, true, true});
    Tensor lb;
    m.forward(c, b, lb, s);
    chunked.insert(chunked.end(), lb.data<float>(), lb.data<float>() + lb.numel());
    begin += n;
  }
  ASSERT_EQ(chunked.size(), one.size());
  EXPECT_LT(max_diff(one.data(), chunked.data(), int64_t(one.size())), 1e-4f) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Tiny, ForwardFamily,
                         ::testing::Values("tiny-llama", "tiny-qwen2", "tiny-qwen3",
                                           "tiny-qwen3_moe", "tiny-gemma3"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(LlmForward, DecodeLoopMakesNoSystemAllocations) {
  test::TempDir tmp("alloc");
  const LlmModel m = LlmModel::load(test::write_tiny(tmp, "tiny-qwen3_moe"));
  const int64_t vocab = m.config().vocab_size;
  KvCache cache(m.config(), 16);
  const std::vector<int32_t> ta = {0, 1, 2, 3}, tb = {8, 9, 10, 11};
  ForwardScratch s;
  Tensor logits;
  const std::vector<int32_t> pa = tokens(20, 1, vocab), pb = tokens(9, 2, vocab);
  Batch prefill;
  prefill.rows.push_back({pa, 0, ta, true, false});
  prefill.rows.push_back({pb, 0, tb, true, false});
  m.forward(prefill, cache, logits, s);
  std::vector<int32_t> next = {5, 6};
  auto step = [&](int i) {
    Batch b;
    b.rows.reserve(2);
    b.rows.push_back({std::span(next).first(1), int32_t(20 + i), ta, true, false});
    b.rows.push_back({std::span(next).subspan(1, 1), int32_t(9 + i), tb, true, false});
    m.forward(b, cache, logits, s);
    const float* l = logits.data<float>();
    next[0] = int32_t(std::max_element(l, l + vocab) - l);
    next[1] = int32_t(std::max_element(l + vocab, l + 2 * vocab) - (l + vocab));
  };
  for (int i = 0; i < 3; ++i) step(i);  // warms the pool
  const AllocStats before = alloc_stats();
  for (int i = 3; i < 30; ++i) step(i);
  EXPECT_EQ(alloc_stats().host_allocs, before.host_allocs);
  EXPECT_EQ(logits.dim(0), 2);
}

}  // namespace
}  // namespace parley
