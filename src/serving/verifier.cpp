#include "serving/verifier.h"

#include <exception>
#include <mutex>

#include "engine/error.h"

namespace parley {

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
      try {
        for (size_t pos = 0; pos <= r.drafts.size(); ++pos) {
          SampleResult s = r.sampler->sample({r.logits + pos * vocab, vocab});
          s.finish = r.sampler->accept(s.token);
          r.out->push_back(s);
          if (s.finish != FinishReason::none || pos == r.drafts.size() || s.token != r.drafts[pos])
            break;
        }
      } catch (...) {
        std::lock_guard lock(*c->mu);
        if (!*c->error) *c->error = std::current_exception();
      }
    }
  });
  if (error) std::rethrow_exception(error);
}

}  // namespace parley
