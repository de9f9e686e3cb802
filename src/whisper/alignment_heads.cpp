// The reference's _ALIGNMENT_HEADS decoded (see alignment_heads.h for how).
#include "whisper/alignment_heads.h"

#include "engine/error.h"

namespace parley {

const std::vector<OfficialAlignmentHeads>& official_alignment_heads() {
  // clang-format off
  static const std::vector<OfficialAlignmentHeads> table = {
      {"tiny.en", 4, 6, {{1, 0}, {2, 0}, {2, 5}, {3, 0}, {3, 1}, {3, 2}, {3, 3}, {3, 4}}},
      {"tiny", 4, 6, {{2, 2}, {3, 0}, {3, 2}, {3, 3}, {3, 4}, {3, 5}}},
      {"base.en", 6, 8, {{3, 3}, {4, 7}, {5, 1}, {5, 5}, {5, 7}}},
      {"base", 6, 8, {{3, 1}, {4, 2}, {4, 3}, {4, 7}, {5, 1}, {5, 2}, {5, 4}, {5, 6}}},
      {"small.en", 12, 12, {{6, 6}, {7, 0}, {7, 3}, {7, 8}, {8, 2}, {8, 5}, {8, 7}, {9, 0}, {9, 4}, {9, 8}, {9, 10}, {10, 0}, {10, 1}, {10, 2}, {10, 3}, {10, 6}, {10, 11}, {11, 2}, {11, 4}}},
      {"small", 12, 12, {{5, 3}, {5, 9}, {8, 0}, {8, 4}, {8, 7}, {8, 8}, {9, 0}, {9, 7}, {9, 9}, {10, 5}}},
      {"medium.en", 24, 16, {{11, 4}, {14, 1}, {14, 12}, {14, 14}, {15, 4}, {16, 0}, {16, 4}, {16, 9}, {17, 12}, {17, 14}, {18, 7}, {18, 10}, {18, 15}, {20, 0}, {20, 3}, {20, 9}, {20, 14}, {21, 12}}},
      {"medium", 24, 16, {{13, 15}, {15, 4}, {15, 15}, {16, 1}, {20, 0}, {23, 4}}},
      {"large-v1", 32, 20, {{9, 19}, {11, 2}, {11, 4}, {11, 17}, {22, 7}, {22, 11}, {22, 17}, {23, 2}, {23, 15}}},
      {"large-v2", 32, 20, {{10, 12}, {13, 17}, {16, 11}, {16, 12}, {16, 13}, {17, 15}, {17, 16}, {18, 4}, {18, 11}, {18, 19}, {19, 11}, {21, 2}, {21, 3}, {22, 3}, {22, 9}, {22, 12}, {23, 5}, {23, 7}, {23, 13}, {25, 5}, {26, 1}, {26, 12}, {27, 15}}},
      {"large-v3", 32, 20, {{7, 0}, {10, 17}, {12, 18}, {13, 12}, {16, 1}, {17, 14}, {19, 11}, {21, 4}, {24, 1}, {25, 6}}},
      {"large", 32, 20, {{7, 0}, {10, 17}, {12, 18}, {13, 12}, {16, 1}, {17, 14}, {19, 11}, {21, 4}, {24, 1}, {25, 6}}},
      {"large-v3-turbo", 4, 20, {{2, 4}, {2, 11}, {3, 3}, {3, 6}, {3, 11}, {3, 14}}},
      {"turbo", 4, 20, {{2, 4}, {2, 11}, {3, 3}, {3, 6}, {3, 11}, {3, 14}}},
  };
  // clang-format on
  return table;
}

std::optional<OfficialAlignmentHeads> find_official_alignment_heads(std::string_view name) {
  for (const OfficialAlignmentHeads& e : official_alignment_heads())
    if (name == e.name) return e;
  return std::nullopt;
}

AlignmentHeads default_alignment_heads(const WhisperConfig& config) {
  AlignmentHeads heads;
  for (int l = config.n_text_layer / 2; l < config.n_text_layer; ++l)
    for (int h = 0; h < config.n_text_head; ++h) heads.emplace_back(l, h);
  return heads;
}

AlignmentHeads resolve_alignment_heads(const WhisperConfig& config,
                                       std::string_view official_name) {
  if (!config.alignment_heads.empty()) return config.alignment_heads;
  if (!official_name.empty()) {
    const auto entry = find_official_alignment_heads(official_name);
    check_arg(entry.has_value(), "[whisper] no alignment heads for a model named '" +
                                     std::string(official_name) + "'");
    check_arg(
        entry->n_text_layer == config.n_text_layer && entry->n_text_head == config.n_text_head,
        "[whisper] alignment heads of '" + std::string(official_name) + "' are for " +
            std::to_string(entry->n_text_layer) + " decoder layers of " +
            std::to_string(entry->n_text_head) + " heads; the model has " +
            std::to_string(config.n_text_layer) + " of " + std::to_string(config.n_text_head));
    return entry->heads;
  }
  return default_alignment_heads(config);
}

}  // namespace parley
