// Internal to src/whisper: the decoder passes of batched transcription that
// transcribe_batch() (round by round) and BatchTranscriber (continuously, files joining and
// leaving at any step) share. Each window's search lives in a slot of a WhisperBatchSession;
// searches[i] is in slot slots[i]. The per-token rules are WindowSearch's (decoding.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "whisper/decoding.h"

namespace parley {
class WhisperBatchSession;
}

namespace parley::whisper {

// Each fresh search's initial tokens into its slot (nothing cached since encode) in as few
// decoder passes as padding allows, then each search's first() from the two rows it reads.
// `serial`: the first() calls run on the calling thread (a no-speech callback that must),
// else on the CPU threads.
void prefill_windows(WhisperBatchSession& batch, std::span<const int32_t> slots,
                     std::span<WindowSearch* const> searches, bool serial);

// Scratch of step_windows, kept between steps (no growth in the step loop).
struct StepScratch {
  std::vector<int32_t> tokens, rules, ids;
  std::vector<float> logprobs;
};

// One decoder step for every listed search (none done): the token choice on the model's
// device where `on_device` and every search has a rule form for its next position with the
// same always-suppressed ids, else the logits' filters on the CPU threads.
void step_windows(WhisperBatchSession& batch, std::span<const int32_t> slots,
                  std::span<WindowSearch* const> searches, bool on_device, StepScratch& scratch);

}  // namespace parley::whisper
