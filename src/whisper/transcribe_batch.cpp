// Batched seek loop over many files (transcribe_batch.h). Every per-window rule is
// SeekLoop's (seek_loop.h), every per-token rule WindowSearch's (decoding.h); this file only
// schedules windows into batches.
#include "whisper/transcribe_batch.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <numeric>

#include "audio/mel.h"
#include "audio/mel_device.h"
#include "engine/device.h"
#include "engine/env.h"
#include "engine/error.h"
#include "engine/threadpool.h"
#include "whisper/batch_session.h"
#include "whisper/decoding.h"
#include "whisper/logit_filters.h"
#include "whisper/model.h"
#include "whisper/seek_loop.h"
#include "whisper/tokenizer.h"

namespace parley {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// At most this many initial tokens per batched prefill pass (its activations; only two
// logits rows per window come back).
constexpr int64_t kPrefillTokens = 8192;

// Whether windows of different lengths share a prefill pass (PARLEY_RAGGED_PREFILL=0: only
// windows of one length do, as before; to compare the two).
bool ragged_prefill_enabled() {
  static const bool on = env_switch_on("PARLEY_RAGGED_PREFILL");
  return on;
}

// Each search's initial tokens into its slot (search i in slot i) in as few decoder passes
// as padding allows: windows sorted by length share a pass (prefill_ragged, the shorter ones
// padded) while it stays within kPrefillTokens rows and its pads are at most a quarter of
// its real tokens. Only the two logits rows each window reads come back
// (WindowSearch::first): at its <|startoftranscript|> and its last initial token. A pass's
// windows take those rows on the CPU threads (each is a few passes over the vocabulary:
// the no-speech probability, the timestamp rule, the first token's log-probability), unless
// `serial` (a no-speech callback, which runs on the calling thread).
void prefill(WhisperBatchSession& batch, std::vector<WindowSearch>& searches, bool serial) {
  const auto length = [&](int32_t i) {
    return int64_t(searches[size_t(i)].initial_tokens().size());
  };
  std::vector<int32_t> order(searches.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return length(a) < length(b); });
  const bool ragged = ragged_prefill_enabled();
  std::vector<int32_t> group, tokens, lengths;
  std::vector<int64_t> rows;
  for (size_t g0 = 0, g1 = 0; g0 < order.size(); g0 = g1) {
    int64_t real = length(order[g0]);
    for (g1 = g0 + 1; g1 < order.size(); ++g1) {
      const int64_t len = length(order[g1]), count = int64_t(g1 - g0) + 1;  // len: the longest
      if (!ragged && len != length(order[g0])) break;
      if (count * len > kPrefillTokens || 4 * count * len > 5 * (real + len)) break;
      real += len;
    }
    group.assign(order.begin() + int64_t(g0), order.begin() + int64_t(g1));
    tokens.clear();
    lengths.clear();
    rows.clear();
    for (int32_t slot : group) {
      const WindowSearch& search = searches[size_t(slot)];
      tokens.insert(tokens.end(), search.initial_tokens().begin(), search.initial_tokens().end());
      lengths.push_back(int32_t(length(slot)));
      rows.push_back(search.sot_index());
      rows.push_back(length(slot) - 1);
    }
    const Tensor logits = group.size() == 1 ? batch.prefill(group[0], tokens, rows)
                                            : batch.prefill_ragged(group, tokens, lengths, rows);
    const int64_t v = logits.dim(1);
    const auto first = [&](int64_t k0, int64_t k1) {
      for (int64_t k = k0; k < k1; ++k) {
        const float* at_sot = logits.data<float>() + 2 * k * v;
        searches[size_t(group[size_t(k)])].first({at_sot, size_t(v)}, {at_sot + v, size_t(v)});
      }
    };
    if (serial)
      first(0, int64_t(group.size()));
    else
      cpu_threads().parallel_for(int64_t(group.size()), 1, first);
  }
}

// The rule rows of the listed searches' next step (kRuleWidth each, logit_filters.h), when
// every one of them can have its choice made on the device with one shared set of
// suppressed ids; false otherwise (the step then filters on the host).
bool device_rules(const std::vector<WindowSearch>& searches, std::span<const int32_t> slots,
                  std::vector<int32_t>& rules) {
  rules.clear();
  StepRule rule;
  const std::vector<int32_t>& always = searches[size_t(slots[0])].always_masked();
  for (int32_t slot : slots) {
    const WindowSearch& search = searches[size_t(slot)];
    if (search.always_masked() != always || !search.next_rule(rule)) return false;
    rules.insert(rules.end(), rule.v.begin(), rule.v.end());
  }
  return true;
}

}  // namespace

std::optional<std::string> batch_unsupported(const TranscribeOptions& o,
                                             const WhisperTokenizer& tokenizer) {
  if (o.temperatures.empty()) return "no temperatures";
  const bool greedy_first = o.temperatures[0] == 0.0f;
  if (greedy_first && o.beam_size > 0) return "beam search";
  if (!greedy_first && o.best_of > 1) return "best_of > 1 at the first temperature";
  if (o.word_timestamps) return "word timestamps";
  if (o.token_logprobs) return "token logprobs";
  if (o.on_token) return "token streaming (on_token)";
  return std::nullopt;
}

std::vector<TranscribeResult> transcribe_batch(
    WhisperBatchSession& batch, WhisperSession& fallback, const WhisperTokenizer& tokenizer,
    std::span<const Tensor> mels, const TranscribeOptions& options, BatchTranscribeStats* stats,
    const std::function<void(size_t file, const Segment&)>& on_file_segment) {
  using namespace whisper;
  const WhisperConfig& c = batch.model().config();
  const std::optional<std::string> why = batch_unsupported(options, tokenizer);
  check_arg(!why, "[whisper] transcribe_batch: not supported with " + why.value_or(""));
  for (const Tensor& mel : mels) check_transcribe_input(mel, c.n_mels, options);
  BatchTranscribeStats local;
  BatchTranscribeStats& st = stats ? *stats : local;
  const size_t n_files = mels.size();
  SessionLogitsSource fallback_source(fallback);

  // Per file: its options (the segment callback knows the file) and its seek loop.
  std::vector<TranscribeOptions> file_options(n_files, options);
  std::vector<std::unique_ptr<SeekLoop>> loops;
  std::deque<size_t> ready;  // files whose next window waits for a batch
  for (size_t f = 0; f < n_files; ++f) {
    if (on_file_segment) {
      file_options[f].on_segment = [&on_file_segment, f, &options](const Segment& s) {
        if (options.on_segment) options.on_segment(s);
        on_file_segment(f, s);
      };
    }
    // Language detection, when needed, runs per file through the one-window session, as
    // transcribe() does it.
    loops.push_back(std::make_unique<SeekLoop>(
        tokenizer, mels[f], file_options[f],
        transcript_language(fallback_source, tokenizer, mels[f], options), c.n_text_ctx));
    if (loops.back()->next_window()) ready.push_back(f);
  }

  const int64_t frames = kChunkFrames;
  std::vector<size_t> members;
  std::vector<int32_t> slots, step_slots, step_tokens, rules, chosen_ids;
  std::vector<float> chosen_logprobs;
  std::vector<WindowSearch> searches;
  const bool on_device = batch.model().device() != Device::cpu && device_choice_enabled();
  while (!ready.empty()) {
    // One round: the current window of up to n_slots files, slot i for member i.
    members.clear();
    while (!ready.empty() && int(members.size()) < batch.n_slots()) {
      members.push_back(ready.front());
      ready.pop_front();
    }
    const int64_t n = int64_t(members.size());
    // The windows are cut where the mels live (the model's device for transcribe_batch of
    // samples), so a CUDA batch never visits the host.
    const Device mel_device = loops[members[0]]->window_mel_device();
    Tensor window_mels = Tensor::empty({n, c.n_mels, frames}, DType::f32, mel_device);
    slots.resize(size_t(n));
    for (int64_t i = 0; i < n; ++i) {
      slots[size_t(i)] = int32_t(i);
      window_mels.slice0(i, i + 1)
          .reshape({c.n_mels, frames})
          .copy_from(loops[members[size_t(i)]]->window_mel());
    }
    auto t0 = Clock::now();
    batch.encode(slots, window_mels);
    // CUDA runs asynchronously: wait here so encode_ms times the encoder, not its launch.
    if (batch.model().device() == Device::cuda) cuda::synchronize();
    st.encode_ms += ms_since(t0);
    st.batches += 1;
    st.windows += n;

    // The first attempt of every window, decoded together.
    t0 = Clock::now();
    searches.clear();
    for (int64_t i = 0; i < n; ++i) {
      const SeekLoop& loop = *loops[members[size_t(i)]];
      searches.emplace_back(tokenizer,
                            attempt_options(loop.decode_options(), options, 0, loop.window().seek),
                            c.n_text_ctx);
    }
    prefill(batch, searches, bool(options.on_no_speech_prob));
    st.tokens += n;
    while (true) {
      check(!options.cancelled || !options.cancelled(), ErrorKind::cancelled,
            "[whisper] decoding cancelled");
      step_slots.clear();
      step_tokens.clear();
      for (int64_t i = 0; i < n; ++i) {
        if (searches[size_t(i)].done()) continue;
        step_slots.push_back(int32_t(i));
        step_tokens.push_back(searches[size_t(i)].last_token());
      }
      if (step_slots.empty()) break;
      if (on_device && device_rules(searches, step_slots, rules)) {
        // Filters, log-softmax and argmax on the device: n token ids come back, not n rows
        // of logits.
        batch.step_choose(step_slots, step_tokens, searches[size_t(step_slots[0])].always_masked(),
                          rules, 1, chosen_ids, chosen_logprobs);
        for (size_t r = 0; r < step_slots.size(); ++r)
          searches[size_t(step_slots[r])].next_chosen(chosen_ids[r], chosen_logprobs[r]);
      } else {
        const Tensor logits = batch.step(step_slots, step_tokens);
        const int64_t n_vocab = logits.dim(1);
        // Each row's logit filters and choice on the CPU threads (rows are independent; at
        // batch 64 these are 64 passes over the vocabulary per step).
        cpu_threads().parallel_for(int64_t(step_slots.size()), 1, [&](int64_t r0, int64_t r1) {
          for (int64_t r = r0; r < r1; ++r) {
            searches[size_t(step_slots[size_t(r)])].next(
                {logits.data<float>() + r * n_vocab, size_t(n_vocab)});
          }
        });
      }
      st.steps += 1;
      st.tokens += int64_t(step_slots.size());
    }
    st.decode_ms += ms_since(t0);

    for (int64_t i = 0; i < n; ++i) {
      const size_t f = members[size_t(i)];
      SeekLoop& loop = *loops[f];
      DecodingResult result = searches[size_t(i)].result();
      if (needs_fallback(result, options) && options.temperatures.size() > 1) {
        // The rest of the ladder through the one-window path, as transcribe() would.
        t0 = Clock::now();
        result = decode_with_fallback(fallback_source, tokenizer, loop.window_mel(),
                                      loop.decode_options(), options, loop.window().seek, 1);
        st.fallback_ms += ms_since(t0);
        st.fallbacks += 1;
      }
      loop.accept(result, nullptr);
      if (loop.next_window()) ready.push_back(f);
    }
  }

  std::vector<TranscribeResult> out;
  out.reserve(n_files);
  for (auto& loop : loops) out.push_back(loop->finish());
  return out;
}

std::vector<TranscribeResult> transcribe_batch(
    WhisperBatchSession& batch, WhisperSession& fallback, const WhisperTokenizer& tokenizer,
    std::span<const std::vector<float>> samples, const TranscribeOptions& options,
    BatchTranscribeStats* stats,
    const std::function<void(size_t file, const Segment&)>& on_file_segment) {
  std::vector<Tensor> mels;
  mels.reserve(samples.size());
  for (const auto& s : samples) {
    mels.push_back(log_mel_spectrogram_for(batch.model().device(), s, batch.model().config().n_mels,
                                           kChunkSamples));
  }
  return transcribe_batch(batch, fallback, tokenizer, mels, options, stats, on_file_segment);
}

}  // namespace parley
