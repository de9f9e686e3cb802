// PushToTalk (src/dictate/push_to_talk.h): holding through key repeats, press mode, and the
// control socket's toggle, on explicit timestamps.
#include "dictate/push_to_talk.h"

#include <gtest/gtest.h>

namespace parley::dictate {
namespace {

TEST(PushToTalk, HoldTalksWhileRepeatsArriveAndStopsAfterTheGap) {
  PushToTalk p;                   // first repeat within 0.8 s, then gaps under 0.25 s
  EXPECT_FALSE(p.key('x', 0.0));  // not the talk key
  EXPECT_FALSE(p.talking());
  EXPECT_TRUE(p.key(' ', 1.0));
  EXPECT_TRUE(p.talking());
  p.tick(1.5);  // the keyboard's repeat delay: still held
  EXPECT_TRUE(p.talking());
  for (double t = 1.6; t < 3.0; t += 0.033) {
    p.key(' ', t);
    p.tick(t + 0.01);
    ASSERT_TRUE(p.talking()) << t;
  }
  p.tick(3.1);  // 0.13 s after the last repeat
  EXPECT_TRUE(p.talking());
  p.tick(3.3);  // > 0.25 s: released
  EXPECT_FALSE(p.talking());
}

TEST(PushToTalk, ATapWithoutRepeatsEndsAfterTheFirstRepeatWait) {
  PushToTalk p;
  p.key(' ', 0.0);
  p.tick(0.79);
  EXPECT_TRUE(p.talking());
  p.tick(0.81);
  EXPECT_FALSE(p.talking());
  p.key(' ', 2.0);  // a new press talks again
  EXPECT_TRUE(p.talking());
}

TEST(PushToTalk, PressModeStartsAndStops) {
  PushToTalkOptions o;
  o.mode = TalkMode::press;
  o.key = 'r';
  PushToTalk p(o);
  EXPECT_FALSE(p.key(' ', 0));
  p.key('r', 1.0);
  p.tick(100.0);  // no gap rule in press mode
  EXPECT_TRUE(p.talking());
  p.key('r', 101.0);
  EXPECT_FALSE(p.talking());
}

TEST(PushToTalk, ToggleIsNotReleasedByTheGapButByAToggleOrAPress) {
  PushToTalk p;
  p.toggle(0.0);
  p.tick(50.0);
  EXPECT_TRUE(p.talking());
  p.toggle(51.0);
  EXPECT_FALSE(p.talking());
  p.toggle(52.0);
  p.key(' ', 53.0);  // a press ends a toggled talk
  EXPECT_FALSE(p.talking());
}

}  // namespace
}  // namespace parley::dictate
