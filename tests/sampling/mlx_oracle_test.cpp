// The logit processors against mlx-lm's (mlx_lm.sample_utils: apply_top_p, apply_min_p,
// apply_top_k, make_repetition_penalty, make_presence_penalty, make_frequency_penalty), one
// processor at a time on random rows. tests/parity/sampling_mlx_oracle_test.py writes the
// cases and mlx-lm's outputs to the file named by PARLEY_SAMPLING_ORACLE and runs this
// test; without that variable it is skipped. mlx-lm is a torch-free reference (transformers'
// processors need torch, which .venv-llm lacks); its chain order and its penalties' context
// window differ from vLLM's, so only single processors are compared, the penalties with a
// window over every token given.
//
// File: per case four lines: "op param vocab n_tokens", the logits, the tokens (the
// repetition penalty's prompt + output, or the output for presence/frequency), mlx-lm's
// result ("-inf" for a removed token). Filters (top_p, min_p, top_k) ran on logprobs in
// mlx-lm and compare as the set of removed tokens; penalties compare as values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "sampling/logit_processors.h"
#include "sampling/penalty_state.h"

namespace parley {
namespace {

float parse_float(const std::string& s) {
  if (s == "-inf") return -std::numeric_limits<float>::infinity();
  return std::stof(s);
}

template <typename T>
std::vector<T> read_line(std::istream& in, size_t n) {
  std::string line;
  std::getline(in, line);
  std::istringstream s(line);
  std::vector<T> v;
  std::string tok;
  while (s >> tok) {
    if constexpr (std::is_same_v<T, float>) {
      v.push_back(parse_float(tok));
    } else {
      v.push_back(T(std::stol(tok)));
    }
  }
  EXPECT_EQ(v.size(), n) << "malformed oracle line: " << line.substr(0, 80);
  return v;
}

TEST(MlxOracle, ProcessorsMatchMlxLm) {
  const char* path = std::getenv("PARLEY_SAMPLING_ORACLE");
  if (!path) GTEST_SKIP() << "PARLEY_SAMPLING_ORACLE is not set (sampling_mlx_oracle_test.py)";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  int cases = 0;
  std::string header;
  while (std::getline(in, header)) {
    if (header.empty()) continue;
    std::istringstream h(header);
    std::string op;
    double param = 0;
    size_t vocab = 0, n_tokens = 0;
    h >> op >> param >> vocab >> n_tokens;
    ASSERT_TRUE(h) << "malformed header: " << header;
    std::vector<float> l = read_line<float>(in, vocab);
    const std::vector<int32_t> tokens = read_line<int32_t>(in, n_tokens);
    const std::vector<float> want = read_line<float>(in, vocab);
    ASSERT_FALSE(::testing::Test::HasFailure());
    const bool filter = op == "top_p" || op == "min_p" || op == "top_k";
    std::vector<int32_t> scratch(vocab);
    PenaltyState st;
    if (op == "top_p") {
      apply_top_k_top_p(l, 0, float(param), scratch);
    } else if (op == "top_k") {
      apply_top_k_top_p(l, int32_t(param), 1.0f, scratch);
    } else if (op == "min_p") {
      apply_min_p(l, float(param));
    } else if (op == "repetition") {
      st.reset(int32_t(vocab), tokens, 0);
      st.apply(l, float(param), 0.0f, 0.0f);
    } else if (op == "presence" || op == "frequency") {
      st.reset(int32_t(vocab), {}, 0);
      for (int32_t t : tokens) st.accept(t);
      const bool freq = op == "frequency";
      st.apply(l, 1.0f, freq ? float(param) : 0.0f, freq ? 0.0f : float(param));
    } else {
      FAIL() << "unknown op " << op;
    }
    for (size_t i = 0; i < vocab; ++i) {
      const bool removed = std::isinf(l[i]), want_removed = std::isinf(want[i]);
      ASSERT_EQ(removed, want_removed) << "case " << cases << " (" << header << ") token " << i;
      if (!filter && !removed) {
        ASSERT_NEAR(l[i], want[i], 1e-5f * std::max(1.0f, std::fabs(want[i])))
            << "case " << cases << " (" << header << ") token " << i;
      }
    }
    ++cases;
  }
  EXPECT_GT(cases, 0) << "no cases in " << path;
  std::printf("compared %d cases with mlx-lm\n", cases);
}

}  // namespace
}  // namespace parley
