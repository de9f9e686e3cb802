#include "serving/verifier.h"

#include <algorithm>
#include <exception>
#include <mutex>

#include "engine/error.h"

namespace parley {

int32_t speculative_sample(std::span<const double> p, std::span<const float> q, int32_t d,
                           double u_accept, double u_resample, bool& accepted) {
  const double pd = p[size_t(d)], qd = q[size_t(d)];
  // u < p / q, as u q < p; a draft q gave no mass (it cannot have drawn d): p decides alone.
  accepted = qd > 0 ? u_accept * qd < pd : pd > 0;
  if (accepted) return d;
  double total = 0;
  for (size_t i = 0; i < p.size(); ++i) total += std::max(0.0, p[i] - double(q[i]));
  const double target = u_resample * total;
  double acc = 0;
  int32_t last = -1;
  for (size_t i = 0; i < p.size(); ++i) {
    const double w = std::max(0.0, p[i] - double(q[i]));
    if (w <= 0) continue;
    acc += w;
    last = int32_t(i);
    if (acc > target) return last;
  }
  if (last >= 0) return last;
  // p <= q everywhere yet d rejected: only rounding gets here; p's most likely token.
  return int32_t(std::max_element(p.begin(), p.end()) - p.begin());
}

int accepted_drafts(const VerifyRow& r) {
  int n = 0;
  while (n < int(r.drafts.size()) && n < int(r.out->size()) &&
         (*r.out)[size_t(n)].token == r.drafts[size_t(n)])
    ++n;
  return n;
}

void verify_rows(std::span<const VerifyRow> rows, ThreadPool& pool) {
  for (const VerifyRow& r : rows)
    check_arg(r.sampler && r.logits && r.out && !r.sampler->finished(),
              "[verifier] a row needs an unfinished sampler, its logits and its output");
  std::mutex mu;
  std::exception_ptr error;
  struct Ctx {
    std::span<const VerifyRow> rows;
    std::mutex* mu;
    std::exception_ptr* error;
  } ctx{rows, &mu, &error};
  pool.parallel_for(int64_t(rows.size()), 1, [c = &ctx](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const VerifyRow& r = c->rows[size_t(i)];
      r.out->clear();
      const size_t vocab = size_t(r.sampler->vocab_size());
      std::vector<double> p(r.draft_probs ? vocab : 0);
      const TokenConstraint::Mark grammar_mark =
          r.constraint ? r.constraint->mark() : TokenConstraint::Mark{};
      try {
        for (size_t pos = 0; pos <= r.drafts.size(); ++pos) {
          const std::span<const float> logits(r.logits + pos * vocab, vocab);
          SampleResult s;
          bool go_on = pos < r.drafts.size();
          if (r.draft_probs && go_on) {  // the general rule
            r.sampler->distribution(logits, p);
            const int32_t t =
                speculative_sample(p, {r.draft_probs + pos * vocab, vocab}, r.drafts[pos],
                                   r.sampler->aux_uniform(0), r.sampler->aux_uniform(1), go_on);
            s = r.sampler->result_for(logits, t);
          } else {
            s = r.sampler->sample(logits);
            go_on = go_on && s.token == r.drafts[pos];
          }
          s.finish = r.sampler->accept(s.token);
          r.out->push_back(s);
          if (s.finish != FinishReason::none || !go_on) break;
          if (r.constraint) r.constraint->accept(s.token);
        }
        if (r.constraint) r.constraint->rewind(grammar_mark);
      } catch (...) {
        if (r.constraint) r.constraint->rewind(grammar_mark);
        std::lock_guard lock(*c->mu);
        if (!*c->error) *c->error = std::current_exception();
      }
    }
  });
  if (error) std::rethrow_exception(error);
}

}  // namespace parley
