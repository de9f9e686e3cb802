// Scheduler on the CPU with fake requests and exact block ids (STYLE.md habit 8): the token
// budget (decode first, then prefill chunks), max_running, first come first served
// admission, preemption of the newest request when the blocks run out, forks and finishes.
// No model runs: the test plays the engine, committing each planned row.
#include <gtest/gtest.h>

#include "serving/scheduler.h"
#include "serving/serving_test_util.h"

namespace parley {
namespace {

constexpr int64_t kB = KvCache::kBlockSize;
using V = std::vector<int32_t>;

using test::seq;

struct Fixture {
  explicit Fixture(int64_t blocks, SchedulerOptions o)
      : cache(test::tiny_kv_config(), blocks, Device::cpu, DType::f32),
        pool(cache),
        sched(pool, o) {}
  KvCache cache;
  KvPool pool;
  Scheduler sched;
  std::vector<std::unique_ptr<SequenceGroup>> groups;

  SequenceGroup* add(KvRequestId id, int64_t prompt, int32_t first_token, int n = 1) {
    auto g = std::make_unique<SequenceGroup>();
    g->n = n;
    g->seqs.push_back({id, seq(prompt, first_token), false, {}});
    sched.add(g.get());
    groups.push_back(std::move(g));
    return groups.back().get();
  }
  // Plays the engine: commits every row; a row that wants logits gets `token` appended
  // (forking first when its group has not).
  SchedulePlan step(int32_t token = 7) {
    SchedulePlan plan = sched.schedule();
    for (const ScheduledRow& r : plan.rows)
      pool.commit(r.group->seqs[size_t(r.seq)].id, r.start + r.length);
    for (const ScheduledRow& r : plan.rows) {
      if (!r.logits) continue;
      if (!r.group->forked()) {
        sched.fork_group(r.group, r.group->seqs[0].id + 100);
        for (int c = 0; c < r.group->n; ++c) sched.append_token(r.group, c, token);
      } else {
        sched.append_token(r.group, r.seq, token);
      }
    }
    return plan;
  }
  V table(KvRequestId id) const {
    auto t = pool.block_table(id);
    return {t.begin(), t.end()};
  }
};

// (group, seq, start, length, logits, decode) of each row.
struct Row {
  SequenceGroup* g;
  int seq;
  int64_t start, length;
  bool logits, decode;
  bool operator==(const ScheduledRow& r) const {
    return g == r.group && seq == r.seq && start == r.start && length == r.length &&
           logits == r.logits && decode == r.decode;
  }
};

void expect_rows(const SchedulePlan& plan, const std::vector<Row>& want) {
  ASSERT_EQ(plan.rows.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(want[i] == plan.rows[i])
        << "row " << i << ": got seq " << plan.rows[i].seq << " start " << plan.rows[i].start
        << " length " << plan.rows[i].length << " logits " << plan.rows[i].logits << " decode "
        << plan.rows[i].decode;
}

TEST(Scheduler, DecodeTokensFirstThenPrefillChunksWithinTheBudget) {
  Fixture f(64, {/*max_batch_tokens=*/40, /*max_running=*/8, /*prefill_chunk=*/1000});
  SequenceGroup* a = f.add(1, 20, 100);
  SequenceGroup* b = f.add(2, 30, 200);
  // Iteration 1: a's whole prompt (20), then b's first 20 of 30: the budget is 40.
  SchedulePlan p = f.step();
  expect_rows(p, {{a, 0, 0, 20, true, false}, {b, 0, 0, 20, false, false}});
  EXPECT_EQ(p.tokens, 40);
  EXPECT_EQ(f.table(1), (V{0, 1}));
  EXPECT_EQ(f.table(2), (V{2, 3}));
  // Iteration 2: a decodes (its token sampled above), then b's last 10.
  p = f.step();
  expect_rows(p, {{a, 0, 20, 1, true, true}, {b, 0, 20, 10, true, false}});
  // Iteration 3: both decode; a third request arriving now gets the rest of the budget.
  SequenceGroup* c = f.add(3, 50, 300);
  p = f.step();
  expect_rows(p,
              {{a, 0, 21, 1, true, true}, {b, 0, 30, 1, true, true}, {c, 0, 0, 38, false, false}});
  EXPECT_EQ(f.sched.stats().running, 3);
  EXPECT_EQ(f.sched.stats().iterations, 3u);
}

TEST(Scheduler, MaxRunningKeepsTheRestWaitingInOrder) {
  Fixture f(64, {8192, /*max_running=*/2, 8192});
  SequenceGroup* a = f.add(1, 5, 1);
  SequenceGroup* b = f.add(2, 5, 2);
  SequenceGroup* c = f.add(3, 5, 3);
  SchedulePlan p = f.step();
  expect_rows(p, {{a, 0, 0, 5, true, false}, {b, 0, 0, 5, true, false}});
  EXPECT_EQ(f.sched.waiting().front(), c);
  EXPECT_FALSE(f.pool.has_request(3));  // a waiting request holds no blocks
  f.sched.remove(a);                    // a ends: c takes its place
  p = f.step();
  expect_rows(p, {{b, 0, 5, 1, true, true}, {c, 0, 0, 5, true, false}});
  EXPECT_TRUE(f.sched.waiting().empty());
}

TEST(Scheduler, PrefillChunkBoundsOneSequencePerIteration) {
  Fixture f(64, {8192, 8, /*prefill_chunk=*/16});
  SequenceGroup* a = f.add(1, 40, 1);
  expect_rows(f.step(), {{a, 0, 0, 16, false, false}});
  expect_rows(f.step(), {{a, 0, 16, 16, false, false}});
  expect_rows(f.step(), {{a, 0, 32, 8, true, false}});
  expect_rows(f.step(), {{a, 0, 40, 1, true, true}});
}

TEST(Scheduler, TheNewestRequestIsPreemptedWhenBlocksRunOutAndRecomputedLater) {
  // 5 blocks: a (prompt 32 = 2 blocks) and b (prompt 32 = 2 blocks) fit; a's decode needs a
  // third block at token 33, then b's a fourth: b (the newest) is preempted.
  Fixture f(5, {8192, 8, 8192});
  SequenceGroup* a = f.add(1, 2 * kB, 1000);
  SequenceGroup* b = f.add(2, 2 * kB, 2000);
  f.step();  // both prompts: a {0,1}, b {2,3}
  EXPECT_EQ(f.table(1), (V{0, 1}));
  EXPECT_EQ(f.table(2), (V{2, 3}));
  SchedulePlan p = f.step();  // a's token 32 takes block 4; b's has no block left
  expect_rows(p, {{a, 0, 32, 1, true, true}});
  ASSERT_EQ(p.preempted.size(), 1u);
  EXPECT_EQ(p.preempted[0], b);
  EXPECT_EQ(f.table(1), (V{0, 1, 4}));
  EXPECT_FALSE(f.pool.has_request(2));
  EXPECT_EQ(f.sched.waiting().front(), b);
  EXPECT_EQ(b->preemptions, 1);
  EXPECT_EQ(f.sched.stats().preemptions, 1u);
  EXPECT_EQ(b->seqs[0].tokens.size(), size_t(2 * kB + 1));  // its sampled token is kept
  // a ends: b comes back, its two full prompt blocks served by the prefix cache, and only
  // its last token (the one sampled before the preemption) computed again.
  f.sched.remove(a);
  p = f.step();
  expect_rows(p, {{b, 0, 2 * kB, 1, true, false}});
  EXPECT_EQ(f.table(2), (V{2, 3, 4}));
}

TEST(Scheduler, AdmissionThatDoesNotFitWaitsWithoutPreemptingAndHoldsNothing) {
  Fixture f(4, {8192, 8, 8192});
  SequenceGroup* a = f.add(1, 3 * kB, 1);
  SequenceGroup* b = f.add(2, 2 * kB, 2);  // needs 2 blocks; 1 is left
  SequenceGroup* c = f.add(3, 4, 3);       // would fit, but does not overtake b
  SchedulePlan p = f.step();
  expect_rows(p, {{a, 0, 0, 3 * kB, true, false}});
  EXPECT_TRUE(p.preempted.empty());
  EXPECT_FALSE(f.pool.has_request(2));
  EXPECT_FALSE(f.pool.has_request(3));
  EXPECT_EQ(f.pool.free_blocks(), 1);
  EXPECT_EQ(f.sched.waiting().size(), 2u);
  EXPECT_EQ(f.sched.waiting().front(), b);
  (void)c;
}

TEST(Scheduler, ChoicesForkAfterThePromptAndFinishOneByOne) {
  Fixture f(16, {8192, 8, 8192});
  SequenceGroup* a = f.add(1, 20, 1, /*n=*/3);
  expect_rows(f.step(), {{a, 0, 0, 20, true, false}});
  ASSERT_TRUE(a->forked());
  EXPECT_EQ(a->seqs[1].id, 101u);
  EXPECT_EQ(a->seqs[2].id, 102u);
  EXPECT_EQ(f.table(101), (V{0, 1}));  // the prompt's blocks, shared
  SchedulePlan p = f.step();
  expect_rows(p, {{a, 0, 20, 1, true, true}, {a, 1, 20, 1, true, true}, {a, 2, 20, 1, true, true}});
  // The shared partial block 1 is copied for two of the three writers.
  EXPECT_EQ(f.table(1), (V{0, 2}));
  EXPECT_EQ(f.table(101), (V{0, 3}));
  EXPECT_EQ(f.table(102), (V{0, 1}));
  f.sched.finish_sequence(a, 1);
  EXPECT_FALSE(f.pool.has_request(101));
  p = f.step();
  expect_rows(p, {{a, 0, 21, 1, true, true}, {a, 2, 21, 1, true, true}});
}

TEST(Scheduler, ARemovedRequestFreesItsBlocksWaitingOrRunning) {
  Fixture f(8, {16, 8, 8192});
  SequenceGroup* a = f.add(1, 40, 1);
  f.step();  // a's first 16 tokens: one block
  EXPECT_EQ(f.pool.free_blocks(), 7);
  f.sched.remove(a);
  EXPECT_EQ(f.pool.free_blocks(), 8);
  EXPECT_TRUE(f.sched.idle());
  EXPECT_TRUE(f.step().empty());
}

}  // namespace
}  // namespace parley
