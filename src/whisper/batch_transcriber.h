// BatchTranscriber: transcribe_batch()'s seek loop run continuously, for a server. Files
// join at any time (add) and leave when done or cancelled; each call of step() is one
// iteration of the running batch: windows waiting for a slot of the WhisperBatchSession get
// one (one encoder call for all of them, their initial tokens in batched prefill passes),
// then one decoder step for every window being decoded, each at its own position. A window
// that ends is accepted at once and its file's next window waits for the next iteration, so
// a slot that frees up is taken again one step later, by that file or another.
//
// Each file keeps its own options (language, prompt, temperature ladder, thresholds, word
// timestamps, callbacks), seek and segments; the rules are transcribe()'s (seek_loop.h), so
// each file's result equals transcribe() of it alone up to the f32 rounding of batched GEMMs
// (as transcribe_batch; tests/whisper/batch_transcriber_test.cpp). What the batch cannot
// decode goes through `solo`, a WhisperSession of the same model, on the calling thread,
// between steps:
//   - a window whose first attempt fails the fallback thresholds: the rest of the ladder;
//   - files whose first attempt is not one greedy or sampled candidate (beam search, best_of
//     > 1 at the first temperature) or that want token_logprobs: their windows, whole;
//   - word timestamps: the window's audio, encoded again for the alignment pass;
//   - language detection (a multilingual model without a language), when the file is added.
// Callbacks: on_segment runs on the calling thread; on_token and on_no_speech_prob of the
// batched attempts run on the CPU threads (one file's calls never overlap).
#pragma once

#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <optional>
#include <vector>

#include "engine/tensor.h"
#include "whisper/batch_steps.h"
#include "whisper/transcribe.h"
#include "whisper/transcribe_batch.h"

namespace parley {

class WhisperBatchSession;
class WhisperSession;
class WhisperTokenizer;

class BatchTranscriber {
 public:
  // A file that left: its result, or the exception that ended it (Error(cancelled) when its
  // options.cancelled() said so).
  struct Finished {
    uint64_t id = 0;
    std::optional<TranscribeResult> result;
    std::exception_ptr error;
  };

  // `batch`, `solo` (the same model) and `tokenizer` must outlive the transcriber.
  BatchTranscriber(WhisperBatchSession& batch, WhisperSession& solo,
                   const WhisperTokenizer& tokenizer);
  ~BatchTranscriber();
  BatchTranscriber(const BatchTranscriber&) = delete;
  BatchTranscriber& operator=(const BatchTranscriber&) = delete;

  // Adds a file: its padded log-mel (log_mel_spectrogram(samples, n_mels, kChunkSamples), on
  // the CPU or the model's device) and its options. Returns its id. Throws
  // Error(invalid_argument) for a bad mel or options (nothing is added).
  uint64_t add(Tensor mel, TranscribeOptions options);
  // One iteration (above). Returns the files that left during it. An exception from the
  // batch's own passes propagates (the files stay; abort() ends them).
  std::vector<Finished> step();
  // Ends every file with `error`.
  std::vector<Finished> abort(std::exception_ptr error);

  int files() const { return int(files_.size()); }  // added and not yet returned
  int decoding() const;                             // windows in slots now
  const BatchTranscribeStats& stats() const { return stats_; }

 private:
  struct File;
  void admit();  // waiting windows into free slots
  void decode_step();
  void finish_window(File& file);  // the window's search ended: accept, next window or done
  void solo_window(File& file);    // one whole window through `solo`
  void next_or_finish(File& file);
  void leave(File& file, std::exception_ptr error);

  WhisperBatchSession& batch_;
  WhisperSession& solo_;
  const WhisperTokenizer& tokenizer_;
  std::unique_ptr<LogitsSource> solo_source_;
  uint64_t next_id_ = 1;
  std::vector<std::unique_ptr<File>> files_;
  std::deque<File*> waiting_;       // files whose next window wants a slot, oldest first
  std::vector<File*> slot_file_;    // per slot: the file decoding in it, or null
  std::vector<Finished> finished_;  // left since the last step()
  BatchTranscribeStats stats_;
  bool on_device_ = false;  // token choice on the model's device
  // Per-step scratch (no growth in the step loop).
  std::vector<int32_t> slots_;
  std::vector<WindowSearch*> searches_;
  whisper::StepScratch scratch_;
};

}  // namespace parley
