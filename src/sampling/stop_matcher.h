// StopMatcher: OpenAI's stop strings over streamed text. The text is cut before the first
// stop string (which is not part of the output), and text that could still be the start of
// a stop string, or the first bytes of an unfinished UTF-8 character, is held back until
// later text decides it; so stops are found across token boundaries and the stream never
// ends inside a character.
//
// Where several stop strings occur, the one that starts first wins (and of those starting at
// the same byte, the first in the list): the output is the text before the earliest stop.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace parley {

class StopMatcher {
 public:
  struct Step {
    std::string emit;      // text safe to stream now
    bool stopped = false;  // a stop string was found; `stop_index` names it
  };

  // Up to kMaxStopStrings non-empty strings (none: only the UTF-8 hold-back); throws
  // Error(invalid_argument) otherwise.
  explicit StopMatcher(std::vector<std::string> stops = {});

  // Appends the next piece of decoded text. Once stopped, later pushes emit nothing.
  Step push(std::string_view text);
  // At the end of the stream: the text still held back (none when stopped).
  std::string flush();

  bool stopped() const { return stop_index_ >= 0; }
  int stop_index() const { return stop_index_; }  // -1 until stopped
  // The longest text ever held back: under the longest stop string plus 3 bytes.
  size_t max_held() const;

 private:
  size_t held_suffix() const;

  std::vector<std::string> stops_;
  size_t longest_ = 0;
  std::string pending_;  // text not yet emitted
  int stop_index_ = -1;
};

}  // namespace parley
