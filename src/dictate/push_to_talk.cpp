// PushToTalk (push_to_talk.h).
#include "dictate/push_to_talk.h"

namespace parley::dictate {

bool PushToTalk::key(char c, double t) {
  if (c != o_.key) return false;
  if (o_.mode == TalkMode::press) {
    talking_ = !talking_;
    held_ = false;
    return true;
  }
  if (held_) {
    ++repeats_;  // the key is still down
  } else if (talking_) {
    talking_ = false;  // a press ends a toggled talk
  } else {
    talking_ = held_ = true;
    repeats_ = 0;
  }
  last_key_ = t;
  return true;
}

void PushToTalk::toggle(double) {
  talking_ = !talking_;
  held_ = false;
}

void PushToTalk::tick(double t) {
  if (!held_) return;
  const double gap = repeats_ == 0 ? o_.first_repeat_s : o_.repeat_gap_s;
  if (t - last_key_ > gap) talking_ = held_ = false;
}

}  // namespace parley::dictate
