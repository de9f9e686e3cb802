// The cross-attention heads whose weights line up text tokens with audio frames (word
// timestamps, timing.h), per official Whisper checkpoint.
//
// Source: openai/whisper whisper/__init__.py _ALIGNMENT_HEADS (openai-whisper 20250625),
// base85 + gzip encoded boolean masks [n_text_layer, n_text_head]; decoded once with
// np.frombuffer(gzip.decompress(base64.b85decode(dump)), dtype=bool) and written out in
// alignment_heads.cpp as (layer, head) pairs in row-major order, as the reference's
// alignment_heads.indices() yields them.
//
// Which heads a loaded model uses (resolve_alignment_heads):
//   1. the heads its own files name: CTranslate2's config.json "alignment_heads" (written
//      by CTranslate2's converter from the same table), or Hugging Face config.json /
//      generation_config.json "alignment_heads" (transformers' copy of the table); the
//      loaders put them in WhisperConfig::alignment_heads;
//   2. otherwise, when the caller names an official model ("tiny.en", "large-v3-turbo",
//      ...), that model's table entry, checked against the dims;
//   3. otherwise every head of the later half of the decoder layers (layers
//      n_text_layer / 2 ..), the reference's default for a checkpoint loaded from a file.
// Shape and vocabulary alone are not used to pick a table: synthetic models
// (`parley synth whisper`) and fine-tunes have official shapes, and large-v1 / large-v2
// share theirs but not their heads.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "whisper/config.h"

namespace parley {

using AlignmentHeads = std::vector<std::pair<int, int>>;  // (decoder layer, head)

struct OfficialAlignmentHeads {
  const char* name;  // as whisper.available_models(): "tiny.en", "large-v3-turbo", ...
  int n_text_layer;
  int n_text_head;
  AlignmentHeads heads;
};

// Every entry of the reference's _ALIGNMENT_HEADS, aliases ("large", "turbo") included.
const std::vector<OfficialAlignmentHeads>& official_alignment_heads();
// The entry named `name`; nullopt when there is none.
std::optional<OfficialAlignmentHeads> find_official_alignment_heads(std::string_view name);

// Every head of decoder layers n_text_layer / 2 .. n_text_layer - 1.
AlignmentHeads default_alignment_heads(const WhisperConfig& config);

// The heads a model uses, by the rules above. official_name: "" or an entry's name;
// an unknown name or one whose dims differ from config's throws Error(invalid_argument).
AlignmentHeads resolve_alignment_heads(const WhisperConfig& config,
                                       std::string_view official_name = {});

}  // namespace parley
