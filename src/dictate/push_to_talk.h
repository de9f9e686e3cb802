// The push-to-talk controller of `parley dictate`: when the user is talking, from key bytes
// of the terminal (raw mode), toggles from the control socket, and time. Pure logic on
// explicit timestamps, so tests drive it without a terminal.
//
// Hold mode: a terminal sends no key-up, only the key again and again while it is held
// (after the keyboard's repeat delay, typically 250-660 ms, then ~30 per second). Talking
// starts at the first press; it stops when the repeats stop: no key for first_repeat_s
// before the first repeat came, or for repeat_gap_s once they flow.
// Press mode: each press of the key starts or stops talking.
// toggle() (the control socket, `parley dictate --toggle`) starts or stops in either mode;
// a talk started by toggle() ends only by another toggle or a press.
#pragma once

namespace parley::dictate {

enum class TalkMode { hold, press };

struct PushToTalkOptions {
  TalkMode mode = TalkMode::hold;
  char key = ' ';               // the talk key
  double first_repeat_s = 0.8;  // hold: longest wait for the first repeat (s)
  double repeat_gap_s = 0.25;   // hold: longest gap between repeats (s)
};

class PushToTalk {
 public:
  explicit PushToTalk(PushToTalkOptions options = {}) : o_(options) {}

  // A byte from the terminal at time t (seconds, any monotonic origin). Returns whether it
  // was the talk key (others are the caller's: quit keys and the like).
  bool key(char c, double t);
  void toggle(double t);  // the control socket's toggle
  void tick(double t);    // time passes: a held key whose repeats stopped is released
  bool talking() const { return talking_; }

 private:
  PushToTalkOptions o_;
  bool talking_ = false;
  bool held_ = false;    // talking because the key is held (hold mode)
  int repeats_ = 0;      // key events since the press
  double last_key_ = 0;  // time of the last talk key
};

}  // namespace parley::dictate
