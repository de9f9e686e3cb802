// argmax and topk on CUDA (ops/reduce.h): one block per row of x [N, V].
// Both rank elements by one strict total order: NaN first (among NaNs, lower index
// first), then larger value, then lower index. argmax is the first element in that order.
// topk takes k rounds; round r finds the first element ranked after round r-1's pick.
// A row longer than kSegment is split: stage 1 takes the top k of each segment (held in
// shared memory, one block per segment), stage 2 the top k of those candidates (scratch).
// Each round is a block reduction, so the cost grows with k; k is limited to kMaxTopK
// for now (a larger k is an unsupported error).
// masked_topk (the decoder's token choice) shares the ranking; its segments and its merge
// take the top k for 2 <= k <= 32 by a bound and one ranking instead of rounds (below).
#include <climits>
#include <string>

#include "engine/cuda/choice.cuh"
#include "engine/cuda/common.cuh"
#include "engine/env.h"
#include "engine/ops/reduce.h"
#include "engine/ops/timestamp_rule_impl.h"

namespace parley::cuda {

namespace {

constexpr int kMaxTopK = 1024;
constexpr int kReduceThreads = 512;
constexpr int kSegmentThreads = 256;
constexpr int32_t kSegment = 4096;  // elements per stage-1 block: 16 KiB of f32 in shared memory

// The first candidate of the block, returned to every thread.
__device__ Cand block_first(Cand c) {
  __shared__ float vs[32];
  __shared__ int32_t is[32];
  for (int offset = 16; offset > 0; offset >>= 1) {
    const Cand o{__shfl_xor_sync(0xffffffffu, c.v, offset),
                 __shfl_xor_sync(0xffffffffu, c.i, offset)};
    c = first_of(c, o);
  }
  __syncthreads();  // an earlier round's readers are done with vs / is
  if ((threadIdx.x & 31) == 0) {
    vs[threadIdx.x >> 5] = c.v;
    is[threadIdx.x >> 5] = c.i;
  }
  __syncthreads();
  Cand r{vs[0], is[0]};
  for (int w = 1; w < int(blockDim.x >> 5); ++w) r = first_of(r, Cand{vs[w], is[w]});
  return r;
}

// The first of the n candidates load(j) ranked strictly after `prev` (prev.i < 0: no
// bound); i = -1 when there is none.
template <typename Load>
__device__ Cand first_after(int32_t n, Cand prev, Load load) {
  Cand best{0.0f, -1};
  for (int32_t j = int32_t(threadIdx.x); j < n; j += int32_t(blockDim.x)) {
    const Cand c = load(j);
    if ((prev.i < 0 || ranks_before(prev, c)) && ranks_before(c, best)) best = c;
  }
  return block_first(best);
}

template <typename T>
__global__ void argmax_kernel(const T* x, int32_t* out, int32_t v) {
  const T* row = x + int64_t(blockIdx.x) * v;
  auto load = [&](int32_t j) { return Cand{dev_to_f32(row[j]), j}; };
  const Cand best = first_after(v, Cand{0.0f, -1}, load);
  if (threadIdx.x == 0) out[blockIdx.x] = best.i;
}

// Writes the top k of the n candidates load(j) to emit(r, cand), r < k; once they run out
// (n < k), the remaining slots get i = -1.
template <typename Load, typename Emit>
__device__ void select_top(int32_t n, int k, Load load, Emit emit) {
  Cand prev{0.0f, -1};
  for (int r = 0; r < k; ++r) {
    if (r == 0 || prev.i >= 0) prev = first_after(n, prev, load);
    if (threadIdx.x == 0) emit(r, prev);
  }
}

// One block per row: values and indices [rows, k] straight from x [rows, v].
template <typename T>
__global__ void topk_row_kernel(const T* x, int32_t v, int k, T* values, int32_t* indices) {
  const T* row = x + int64_t(blockIdx.x) * v;
  const int64_t out = int64_t(blockIdx.x) * k;
  auto load = [&](int32_t j) { return Cand{dev_to_f32(row[j]), j}; };
  auto emit = [&](int r, Cand c) {
    values[out + r] = row[c.i];
    indices[out + r] = c.i;
  };
  select_top(v, k, load, emit);
}

// Stage 1, block (segment s, row): the top k of x[row, s * kSegment ...] as candidates
// [rows, segments, k] (value as f32, index in the row).
template <typename T>
__global__ void topk_segment_kernel(const T* x, int32_t v, int k, float* cand_v, int32_t* cand_i) {
  __shared__ float seg[kSegment];
  const int32_t begin = int32_t(blockIdx.x) * kSegment;
  const int32_t n = v - begin < kSegment ? v - begin : kSegment;
  const T* src = x + int64_t(blockIdx.y) * v + begin;
  for (int32_t j = int32_t(threadIdx.x); j < n; j += int32_t(blockDim.x))
    seg[j] = dev_to_f32(src[j]);
  __syncthreads();
  const int64_t out = (int64_t(blockIdx.y) * gridDim.x + blockIdx.x) * k;
  auto load = [&](int32_t j) { return Cand{seg[j], begin + j}; };
  auto emit = [&](int r, Cand c) {
    cand_v[out + r] = c.v;
    cand_i[out + r] = c.i;
  };
  select_top(n, k, load, emit);
}

// Stage 2, one block per row: the top k of the row's segments * k candidates.
template <typename T>
__global__ void topk_merge_kernel(const T* x, int32_t v, int k, int32_t n_cand, const float* cand_v,
                                  const int32_t* cand_i, T* values, int32_t* indices) {
  const T* row = x + int64_t(blockIdx.x) * v;
  const float* cv = cand_v + int64_t(blockIdx.x) * n_cand;
  const int32_t* ci = cand_i + int64_t(blockIdx.x) * n_cand;
  const int64_t out = int64_t(blockIdx.x) * k;
  auto load = [&](int32_t j) { return Cand{cv[j], ci[j]}; };
  auto emit = [&](int r, Cand c) {
    values[out + r] = row[c.i];
    indices[out + r] = c.i;
  };
  select_top(n_cand, k, load, emit);
}

// masked_topk in one launch, so a row of 51866 logits is read by ~26 blocks at once:
// block (segment, row) puts the segment's x' (mask and ranges applied) into shared memory,
// takes the max of its part before and after the split and the sum of exp(x' - max) of each,
// and the top k candidates of each part; the last of a row's blocks to finish
// (last_to_finish, common.cuh: a counter per row instead of a second launch) merges them:
// the segments' maxima and sums give logsumexp of both sides, so the split rule and
// logsumexp(x'), then the top k of the candidates (head ones at -inf when the rule drops the
// head) with their log-probabilities.
// The kernel is a chain of short dependent steps on 26 SMs (ncu on the H200: ~9 cycles per
// issued instruction, under 1% of memory throughput), so every reduction carries both parts
// at once and the sums of exp are independent terms after one max, not an online logsumexp
// with an exp per element in one dependency chain. A segment's top k for k >= 2 is the
// threshold selection below (k rounds cost ~1 us each: a beam step's k = 6 took 46 us of its
// critical path in the H200's trace, 24 us this way, bench/RESULTS.md); so is the merge's
// over the segments' candidate lists (20 us), with the rounds over the candidates in shared
// memory where the bound lets too many or too few through.
constexpr int kMaskedThreads = 256;
constexpr int32_t kMaskedSegment = 2048;  // elements per stage-1 block: 8 KiB of shared memory
constexpr int kMaskedPerThread = kMaskedSegment / kMaskedThreads;
static_assert(kMaskedSegment % kMaskedThreads == 0, "whole passes of the block");

// masked_topk's advance (ops/reduce.h) as raw pointers; state null: none.
struct RuleAdvance {
  const int32_t* state = nullptr;
  int32_t* next_state = nullptr;
  int32_t* tokens = nullptr;
  int32_t* rules = nullptr;
  int width = 0;
  TimestampRuleParams params;
};

// v[0..N) each reduced over the block by op, all at once (one pair of barriers), to every
// thread.
template <int N, typename Op>
__device__ void block_reduce_all(float (&v)[N], Op op) {
  __shared__ float part[32][N];
  for (int offset = 16; offset > 0; offset >>= 1)
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = op(v[i], __shfl_xor_sync(0xffffffffu, v[i], offset));
  __syncthreads();  // an earlier call's readers are done with `part`
  if ((threadIdx.x & 31) == 0)
#pragma unroll
    for (int i = 0; i < N; ++i) part[threadIdx.x >> 5][i] = v[i];
  __syncthreads();
#pragma unroll
  for (int i = 0; i < N; ++i) v[i] = part[0][i];
  for (int w = 1; w < int(blockDim.x >> 5); ++w)
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = op(v[i], part[w][i]);
}

// (a, b) reduced over the block by op, both at once, to every thread.
template <typename Op>
__device__ float2 block_reduce_pair(float a, float b, Op op) {
  float v[2] = {a, b};
  block_reduce_all(v, op);
  return make_float2(v[0], v[1]);
}

// The first candidate of the block of each of a and b, to every thread.
__device__ void block_first_pair(Cand& a, Cand& b) {
  __shared__ Cand part[32][2];
  for (int offset = 16; offset > 0; offset >>= 1) {
    a = first_of(a, Cand{__shfl_xor_sync(0xffffffffu, a.v, offset),
                         __shfl_xor_sync(0xffffffffu, a.i, offset)});
    b = first_of(b, Cand{__shfl_xor_sync(0xffffffffu, b.v, offset),
                         __shfl_xor_sync(0xffffffffu, b.i, offset)});
  }
  __syncthreads();
  if ((threadIdx.x & 31) == 0) {
    part[threadIdx.x >> 5][0] = a;
    part[threadIdx.x >> 5][1] = b;
  }
  __syncthreads();
  a = part[0][0];
  b = part[0][1];
  for (int w = 1; w < int(blockDim.x >> 5); ++w) {
    a = first_of(a, part[w][0]);
    b = first_of(b, part[w][1]);
  }
}

// select_top of two candidate sets at once (a round's two reductions share their barriers):
// the top k of load_a(j), j < n_a, to emit_a, and of load_b(j), j < n_b, to emit_b.
template <typename LoadA, typename EmitA, typename LoadB, typename EmitB>
__device__ void select_top_pair(int k, int32_t n_a, LoadA load_a, EmitA emit_a, int32_t n_b,
                                LoadB load_b, EmitB emit_b) {
  Cand prev_a{0.0f, -1}, prev_b{0.0f, -1};
  const int32_t n = n_a > n_b ? n_a : n_b;
  for (int r = 0; r < k; ++r) {
    // A set that ran out keeps emitting i = -1 (as select_top).
    const bool more_a = r == 0 || prev_a.i >= 0, more_b = r == 0 || prev_b.i >= 0;
    Cand best_a{0.0f, -1}, best_b{0.0f, -1};
    for (int32_t j = int32_t(threadIdx.x); j < n; j += int32_t(blockDim.x)) {
      if (more_a && j < n_a) {
        const Cand c = load_a(j);
        if ((r == 0 || ranks_before(prev_a, c)) && ranks_before(c, best_a)) best_a = c;
      }
      if (more_b && j < n_b) {
        const Cand c = load_b(j);
        if ((r == 0 || ranks_before(prev_b, c)) && ranks_before(c, best_b)) best_b = c;
      }
    }
    block_first_pair(best_a, best_b);
    if (more_a) prev_a = best_a;
    if (more_b) prev_b = best_b;
    if (threadIdx.x == 0) {
      emit_a(r, prev_a);
      emit_b(r, prev_b);
    }
  }
}

// The threshold selection for k >= 2 (masked_topk_kernel): instead of k rounds over the
// segment (each a scan of the thread's 8 elements and a block reduction), one bound and one
// ranking. An element's key is its value with NaN as +inf (ranks_before's order, ties
// aside). In each warp, T_w is the k-th largest of the 32 lanes' largest keys: at least k
// lanes hold an element >= T_w, so the part's k-th largest key is >= T_w, and so is every key
// of its top k; T = max_w T_w is as safe. The finite elements with key >= T (typically a few
// times k) are gathered into shared memory, and each is ranked by counting the gathered
// elements ranked before it: ranks below k are the part's top k in order. When a part has
// fewer than k finite elements (its top k then includes -inf ones by index) or more than
// kThresholdCap gather, the block takes the rounds instead.
constexpr int kThresholdMaxK = 32;                 // T_w is a lane of a warp
constexpr int kThresholdCap = kMaskedThreads / 2;  // gathered elements a part, one per thread

__device__ __forceinline__ float sort_key(float v) { return isnan(v) ? INFINITY : v; }

// The k-th largest (k <= 32) of the warp's a and of its b, to every lane: a bitonic sort of
// the 32 lanes' values, largest first, both at once.
__device__ __forceinline__ float2 warp_kth_largest_pair(float a, float b, int k) {
  const int lane = int(threadIdx.x & 31);
#pragma unroll
  for (int size = 2; size <= 32; size <<= 1) {
#pragma unroll
    for (int stride = size / 2; stride > 0; stride >>= 1) {
      const float oa = __shfl_xor_sync(0xffffffffu, a, stride);
      const float ob = __shfl_xor_sync(0xffffffffu, b, stride);
      // The lower lane of a pair keeps the larger value where this run sorts largest first.
      const bool larger = ((lane & stride) == 0) == ((lane & size) == 0);
      a = larger ? fmaxf(a, oa) : fminf(a, oa);
      b = larger ? fmaxf(b, ob) : fminf(b, ob);
    }
  }
  return make_float2(__shfl_sync(0xffffffffu, a, k - 1), __shfl_sync(0xffffffffu, b, k - 1));
}

// Gathers where[u]'s elements (f[u] at index idx(u)) into the part's list: an offset by a
// warp scan of the lanes' counts and one shared atomic a warp; past kThresholdCap only
// counted.
template <int N, typename Index>
__device__ __forceinline__ void gather_part(const float (&f)[N], const bool (&where)[N], Index idx,
                                            int* count, float* list_v, int32_t* list_i) {
  const int lane = int(threadIdx.x & 31);
  int mine = 0;
#pragma unroll
  for (int u = 0; u < N; ++u) mine += where[u] ? 1 : 0;
  int incl = mine;
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const int o = __shfl_up_sync(0xffffffffu, incl, offset);
    if (lane >= offset) incl += o;
  }
  int base = 0;
  if (lane == 31 && incl > 0) base = atomicAdd(count, incl);
  int at = __shfl_sync(0xffffffffu, base, 31) + incl - mine;
#pragma unroll
  for (int u = 0; u < N; ++u) {
    if (!where[u]) continue;
    if (at < kThresholdCap) {
      list_v[at] = f[u];
      list_i[at] = idx(u);
    }
    ++at;
  }
}

// Emits gathered element c of a list of `got` at its rank (the number of the list's elements
// ranked before it) when that is below k: the list's top k, in order, from `got` threads.
template <typename Emit>
__device__ __forceinline__ void emit_by_rank(const float* list_v, const int32_t* list_i, int got,
                                             int c, int k, Emit emit) {
  const Cand me{list_v[c], list_i[c]};
  int rank = 0;
  for (int o = 0; o < got; ++o) rank += ranks_before(Cand{list_v[o], list_i[o]}, me) ? 1 : 0;
  if (rank < k) emit(rank, me);
}

// A sum of exp(x - m) rescaled to the max `to` (0 when it holds no value).
__device__ __forceinline__ float rescaled(float m, float s, float to) {
  return m == -INFINITY ? 0.0f : s * expf(m - to);
}

// A row's logsumexp from the maxima and the sums of exp(x' - max) of its two sides (mx,
// sum: head, tail), and whether the split rule drops the head (then it leaves the sum).
__device__ __forceinline__ float row_logsumexp(float2 mx, float2 sum, int32_t split,
                                               bool& drop_head) {
  constexpr float kNegInf = -INFINITY;
  const float tail_lse = mx.y > kNegInf ? mx.y + logf(sum.y) : kNegInf;
  drop_head = split > 0 && tail_lse > mx.x;
  const float head_lse = !drop_head && mx.x > kNegInf ? mx.x + logf(sum.x) : kNegInf;
  const float hi = fmaxf(head_lse, tail_lse), lo = fminf(head_lse, tail_lse);
  return hi > kNegInf ? hi + log1pf(expf(lo - hi)) : kNegInf;
}

// The advance's state of row `row`, requested by thread 0 (which emits a k = 1 choice) as
// soon as a merge starts, so that its latency hides behind the selection instead of following
// it.
__device__ __forceinline__ void request_rule_state(const RuleAdvance& adv, int64_t row,
                                                   int32_t (&state)[kTimestampRuleState]) {
  if (adv.state && threadIdx.x == 0)
    for (int j = 0; j < kTimestampRuleState; ++j)
      state[j] = adv.state[row * kTimestampRuleState + j];
}

// Rank r's choice c of row `row` (k per row) with the row's logsumexp, and with adv.state
// (k = 1) the row's timestamp-rule advance from `state` (ops/timestamp_rule_impl.h, as
// advance_timestamp_rule's kernel does).
__device__ __forceinline__ void emit_choice(int64_t row, int k, int r, Cand c, float lse,
                                            const int32_t (&state)[kTimestampRuleState],
                                            const RuleAdvance& adv, float* logprobs,
                                            int32_t* indices) {
  indices[row * k + r] = c.i;
  logprobs[row * k + r] = c.i >= 0 ? c.v - lse : -INFINITY;
  if (adv.state)
    detail::advance_timestamp_rule_one(c.i, state, adv.next_state + row * kTimestampRuleState,
                                       adv.tokens + row, adv.rules + row * adv.width, adv.width,
                                       adv.params);
}

// The merge of row `row` by the row's last segment block (every thread calls it). stats and
// candidates come from other blocks: read through L2 (__ldcg). cand_s and idx_s:
// kMaskedSegment floats and ints of shared memory, free by now.
// With adv.state (k = 1), the thread that emits the row's choice (thread 0) also advances the
// row's timestamp rule (ops/timestamp_rule_impl.h, as advance_timestamp_rule's kernel does).
// With `threshold` (2 <= k <= kThresholdMaxK), the top k of the candidates is the threshold
// selection's, on the segments' lists (2 a segment, k entries each, in rank order): the bound
// is the larger of the largest k-th entry of a list and the k-th largest of the warp's lanes'
// largest list heads (each lane's lists apart); gathered_* (kThresholdCap) hold what passes.
__device__ void masked_topk_merge_row(int64_t row, int32_t split, int segments, int k,
                                      const LseStats* stats, const float* cand_v,
                                      const int32_t* cand_i, float* logprobs, int32_t* indices,
                                      float* cand_s, int32_t* idx_s, const RuleAdvance& adv,
                                      bool threshold, float* gathered_v, int32_t* gathered_i,
                                      int* gathered_n) {
  constexpr float kNegInf = -INFINITY;
  int32_t state[kTimestampRuleState] = {0, 0, 0};
  request_rule_state(adv, row, state);
  // Each thread's segments (one at most for rows up to 256 segments), then the block's.
  float hm = kNegInf, hs = 0.0f, tm = kNegInf, ts = 0.0f;
  for (int i = int(threadIdx.x); i < segments; i += int(blockDim.x)) {
    const LseStats* st = stats + row * segments + i;
    const float m2h = __ldcg(&st->head_max), s2h = __ldcg(&st->head_sum);
    const float m2t = __ldcg(&st->tail_max), s2t = __ldcg(&st->tail_sum);
    const float nh = MaxOp{}(hm, m2h), nt = MaxOp{}(tm, m2t);
    hs = rescaled(hm, hs, nh) + rescaled(m2h, s2h, nh);
    ts = rescaled(tm, ts, nt) + rescaled(m2t, s2t, nt);
    hm = nh;
    tm = nt;
  }
  const float2 mx = block_reduce_pair(hm, tm, MaxOp{});
  const float2 sum = block_reduce_pair(rescaled(hm, hs, mx.x), rescaled(tm, ts, mx.y), SumOp{});
  bool drop_head;
  const float lse = row_logsumexp(mx, sum, split, drop_head);

  const int64_t base = row * segments * 2 * k;
  const int32_t n_cand = int32_t(segments * 2 * k);
  auto load = [&](int32_t j) {
    const int32_t i = __ldcg(cand_i + base + j);
    if (i < 0) return Cand{0.0f, -1};
    return Cand{drop_head && i < split ? kNegInf : __ldcg(cand_v + base + j), i};
  };
  // Thread 0 emits (select_top); with adv.state k is 1.
  auto emit = [&](int r, Cand c) { emit_choice(row, k, r, c, lse, state, adv, logprobs, indices); };
  if (n_cand > kMaskedSegment) {  // k rounds over L2
    select_top(n_cand, k, load, emit);
    return;
  }
  // The candidates read once into shared memory, so the k rounds of a beam's choice make one
  // trip to L2 instead of k.
  for (int32_t j = int32_t(threadIdx.x); j < n_cand; j += int32_t(blockDim.x)) {
    const Cand c = load(j);
    cand_s[j] = c.v;
    idx_s[j] = c.i;
  }
  __syncthreads();
  if (threshold) {
    __shared__ float bound;
    if (threadIdx.x < 32) {
      const int lane = int(threadIdx.x), lists = segments * 2;
      float head = kNegInf, last = kNegInf;
      for (int l = lane; l < lists; l += 32) {
        const int32_t first = l * k, kth = l * k + k - 1;
        if (idx_s[first] >= 0 && cand_s[first] != kNegInf)
          head = fmaxf(head, sort_key(cand_s[first]));
        if (idx_s[kth] >= 0 && cand_s[kth] != kNegInf) last = fmaxf(last, sort_key(cand_s[kth]));
      }
      last = warp_reduce(last, MaxOp{});
      const float2 t = warp_kth_largest_pair(head, head, k);
      if (lane == 0) {
        bound = fmaxf(last, t.x);
        *gathered_n = 0;
      }
    }
    __syncthreads();
    const float t = bound;
    float f[kMaskedPerThread];
    bool in[kMaskedPerThread];
#pragma unroll
    for (int u = 0; u < kMaskedPerThread; ++u) {
      const int32_t j = int32_t(threadIdx.x) + u * kMaskedThreads;
      f[u] = j < n_cand ? cand_s[j] : kNegInf;
      in[u] = j < n_cand && idx_s[j] >= 0 && f[u] != kNegInf && sort_key(f[u]) >= t;
    }
    gather_part(
        f, in, [&](int u) { return idx_s[int(threadIdx.x) + u * kMaskedThreads]; }, gathered_n,
        gathered_v, gathered_i);
    __syncthreads();
    const int got = *gathered_n;
    if (got >= k && got <= kThresholdCap) {
      if (int(threadIdx.x) < got)
        emit_by_rank(gathered_v, gathered_i, got, int(threadIdx.x), k, emit);
      return;
    }
  }
  select_top(
      n_cand, k,
      [&](int32_t j) {
        return Cand{cand_s[j], idx_s[j]};
      },
      emit);
}

// Block (segment, row) of kMaskedThreads threads; counters [rows], zero between launches.
__global__ void __launch_bounds__(kMaskedThreads)
    masked_topk_kernel(const float* x, int32_t v, const int8_t* mask, const int32_t* rules,
                       int width, int k, bool threshold, LseStats* stats, float* cand_v,
                       int32_t* cand_i, int* counters, float* logprobs, int32_t* indices,
                       RuleAdvance adv) {
  constexpr float kNegInf = -INFINITY;
  __shared__ float seg[kMaskedSegment];
  __shared__ int32_t seg_i[kMaskedSegment];  // the merge's candidate indices
  __shared__ int32_t rule[1 + 2 * kMaskedTopKMaxRanges];
  __shared__ float gathered_v[2][kThresholdCap];  // the threshold selection's lists, by part
  __shared__ int32_t gathered_i[2][kThresholdCap];
  __shared__ int gathered_n[2];
  threshold = threshold && k >= 2 && k <= kThresholdMaxK;
  if (threshold && threadIdx.x == 0) gathered_n[0] = gathered_n[1] = 0;
  wait_for_inputs();
  allow_dependents();
  const int64_t row = blockIdx.y;
  const int32_t begin = int32_t(blockIdx.x) * kMaskedSegment;
  const int32_t n = v - begin < kMaskedSegment ? v - begin : kMaskedSegment;
  const float* src = x + row * v;
  // The thread's logits and mask bytes, requested at once with the rule row.
  float f[kMaskedPerThread];
  bool masked[kMaskedPerThread];
#pragma unroll
  for (int u = 0; u < kMaskedPerThread; ++u) {
    const int32_t j = int32_t(threadIdx.x) + u * kMaskedThreads;
    f[u] = j < n ? src[begin + j] : kNegInf;
    masked[u] = mask && j < n && mask[begin + j];
  }
  for (int j = int(threadIdx.x); j < width; j += int(blockDim.x)) rule[j] = rules[row * width + j];
  __syncthreads();
  const int32_t split = split_of(rule, v);
  const int n_ranges = (width - 1) / 2;
  float hm = kNegInf, tm = kNegInf;
  float hk = kNegInf, tk = kNegInf;  // the largest sort_key of each part
#pragma unroll
  for (int u = 0; u < kMaskedPerThread; ++u) {
    const int32_t j = int32_t(threadIdx.x) + u * kMaskedThreads;
    const int32_t g = begin + j;
    bool off = masked[u];
    for (int r = 0; r < n_ranges && !off; ++r) off = g >= rule[1 + 2 * r] && g < rule[2 + 2 * r];
    if (off) f[u] = kNegInf;
    if (j < n) {
      seg[j] = f[u];
      if (g < split) {
        hm = MaxOp{}(hm, f[u]);
        hk = fmaxf(hk, sort_key(f[u]));
      } else {
        tm = MaxOp{}(tm, f[u]);
        tk = fmaxf(tk, sort_key(f[u]));
      }
    }
  }
  // The parts' maxima and, for the threshold selection, their bounds T (above); the
  // barriers also publish seg.
  float reduced[4] = {hm, tm, kNegInf, kNegInf};
  if (threshold) {
    const float2 t = warp_kth_largest_pair(hk, tk, k);
    reduced[2] = t.x;
    reduced[3] = t.y;
    block_reduce_all(reduced, MaxOp{});
  } else {
    const float2 m = block_reduce_pair(hm, tm, MaxOp{});
    reduced[0] = m.x;
    reduced[1] = m.y;
  }
  const float2 mx = make_float2(reduced[0], reduced[1]);
  float hs = 0.0f, ts = 0.0f;
#pragma unroll
  for (int u = 0; u < kMaskedPerThread; ++u) {
    const int32_t g = begin + int32_t(threadIdx.x) + u * kMaskedThreads;
    if (f[u] == kNegInf) continue;  // also past the segment
    if (g < split)
      hs += expf(f[u] - mx.x);
    else
      ts += expf(f[u] - mx.y);
  }
  const float2 sum = block_reduce_pair(hs, ts, SumOp{});
  const int64_t slot = row * gridDim.x + blockIdx.x;
  if (threadIdx.x == 0) stats[slot] = LseStats{mx.x, sum.x, mx.y, sum.y};
  // The top k of each part: [0, head_n) before the split, [head_n, n) after it; a part with
  // no element emits i = -1 throughout.
  const int32_t head_n = split - begin < 0 ? 0 : (split - begin < n ? split - begin : n);
  const int64_t out = slot * 2 * k;
  auto emit_at = [&](int64_t base) {
    return [=](int r, Cand c) {
      cand_v[base + r] = c.v;
      cand_i[base + r] = c.i;
    };
  };
  bool rounds = !threshold;
  if (threshold) {
    bool in_head[kMaskedPerThread], in_tail[kMaskedPerThread];
#pragma unroll
    for (int u = 0; u < kMaskedPerThread; ++u) {
      const int32_t g = begin + int32_t(threadIdx.x) + u * kMaskedThreads;
      const bool finite_key = f[u] != kNegInf;  // also past the segment
      in_head[u] = finite_key && g < split && sort_key(f[u]) >= reduced[2];
      in_tail[u] = finite_key && g >= split && sort_key(f[u]) >= reduced[3];
    }
    auto index = [&](int u) { return begin + int32_t(threadIdx.x) + u * kMaskedThreads; };
    gather_part(f, in_head, index, &gathered_n[0], gathered_v[0], gathered_i[0]);
    gather_part(f, in_tail, index, &gathered_n[1], gathered_v[1], gathered_i[1]);
    __syncthreads();
    const int part_n[2] = {head_n, n - head_n}, got[2] = {gathered_n[0], gathered_n[1]};
    for (int p = 0; p < 2; ++p)
      rounds = rounds || (part_n[p] > 0 && (got[p] < k || got[p] > kThresholdCap));
    if (!rounds) {
      // Threads [0, cap) rank the head's list, [cap, 2 cap) the tail's (whole warps).
      const int p = int(threadIdx.x) / kThresholdCap, c = int(threadIdx.x) % kThresholdCap;
      const int64_t at = out + p * k;
      if (part_n[p] == 0) {
        if (c < k) {
          cand_v[at + c] = 0.0f;
          cand_i[at + c] = -1;
        }
      } else if (c < got[p]) {
        emit_by_rank(gathered_v[p], gathered_i[p], got[p], c, k, [&](int rank, Cand me) {
          cand_v[at + rank] = me.v;
          cand_i[at + rank] = me.i;
        });
      }
    }
  }
  if (rounds)
    select_top_pair(
        k, head_n,
        [&](int32_t j) {
          return Cand{seg[j], begin + j};
        },
        emit_at(out), n - head_n,
        [&](int32_t j) {
          return Cand{seg[head_n + j], begin + head_n + j};
        },
        emit_at(out + k));
  if (!last_to_finish(counters + row, int(gridDim.x))) return;
  masked_topk_merge_row(row, split, int(gridDim.x), k, stats, cand_v, cand_i, logprobs, indices,
                        seg, seg_i, adv, threshold, gathered_v[0], gathered_i[0], &gathered_n[0]);
}

constexpr int64_t kMaskedMaxRows = 65535;  // grid y

// masked_top1_merge (choice.cuh): one block merges the Top1Partials of a one-row choice that
// the kernel before it (the one-row GEMM: 3242 blocks for Whisper's 51866 logits) wrote. Each
// thread requests all of its partials (up to kTop1PerThread, both 16-byte halves) before it
// merges any, so the block makes about one trip to L2 where a loop over them would make one
// per partial; then one block ranking of the two sides' first candidates (their values are
// the maxima) and one sum. The result is masked_topk's with k = 1 (masked_topk_merge_row):
// the first candidate of the row after the split rule, which is the tail's when the rule
// drops the head (the tail then holds a finite value, which ranks before the head's -inf).
constexpr int kTop1MergeThreads = 512;
constexpr int kTop1PerThread = 8;

__global__ void __launch_bounds__(kTop1MergeThreads)
    masked_top1_merge_kernel(int segments, int32_t v, const int32_t* rules,
                             const Top1Partial* parts, float* logprobs, int32_t* indices,
                             RuleAdvance adv) {
  constexpr float kNegInf = -INFINITY;
  wait_for_inputs();
  allow_dependents();
  int32_t state[kTimestampRuleState] = {0, 0, 0};
  request_rule_state(adv, 0, state);
  const int32_t split = split_of(rules, v);
  // Each side's first candidate so far, whose value is its maximum (-inf with none), and its
  // sum of exp(x' - that maximum).
  Cand hc{0.0f, -1}, tc{0.0f, -1};
  float hs = 0.0f, ts = 0.0f;
  const auto max_of = [](Cand c) { return c.i >= 0 ? c.v : kNegInf; };
  const int stride = int(blockDim.x) * kTop1PerThread;
  for (int base = 0; base < segments; base += stride) {
    float4 st[kTop1PerThread];
    int4 idx[kTop1PerThread];
#pragma unroll
    for (int u = 0; u < kTop1PerThread; ++u) {
      const int seg = base + int(threadIdx.x) + u * int(blockDim.x);
      if (seg >= segments) break;
      const float4* p = reinterpret_cast<const float4*>(parts + seg);
      st[u] = __ldcg(p);
      idx[u] = __ldcg(reinterpret_cast<const int4*>(p + 1));
    }
#pragma unroll
    for (int u = 0; u < kTop1PerThread; ++u) {
      const int seg = base + int(threadIdx.x) + u * int(blockDim.x);
      if (seg >= segments) break;
      const Cand nh = first_of(hc, Cand{st[u].x, idx[u].x});
      const Cand nt = first_of(tc, Cand{st[u].z, idx[u].y});
      hs = rescaled(max_of(hc), hs, max_of(nh)) + rescaled(st[u].x, st[u].y, max_of(nh));
      ts = rescaled(max_of(tc), ts, max_of(nt)) + rescaled(st[u].z, st[u].w, max_of(nt));
      hc = nh;
      tc = nt;
    }
  }
  const float2 own = make_float2(max_of(hc), max_of(tc));
  block_first_pair(hc, tc);
  const float2 mx = make_float2(max_of(hc), max_of(tc));
  const float2 sum =
      block_reduce_pair(rescaled(own.x, hs, mx.x), rescaled(own.y, ts, mx.y), SumOp{});
  if (threadIdx.x != 0) return;
  bool drop_head;
  const float lse = row_logsumexp(mx, sum, split, drop_head);
  emit_choice(0, 1, 0, drop_head ? tc : first_of(hc, tc), lse, state, adv, logprobs, indices);
}

RuleAdvance rule_advance(const TimestampRuleAdvance* a) {
  if (!a) return {};
  RuleAdvance r;
  r.state = a->state->data<int32_t>();
  r.next_state = a->next_state->data<int32_t>();
  r.tokens = a->tokens->data<int32_t>();
  r.rules = a->rules->data<int32_t>();
  r.width = int(a->rules->dim(1));
  r.params = a->params;
  return r;
}

// masked_topk's per-row counters (LastBlockCounters, common.cuh): enough for every row count
// it takes on the first call, so a captured step never grows them.
int* masked_topk_counters(int64_t rows) {
  static LastBlockCounters counters("masked_topk", kMaskedMaxRows);
  return counters.get(rows);
}

void check_row_length(int64_t v, const char* op) {
  if (!(v <= int64_t(INT32_MAX)))
    throw Error(ErrorKind::unsupported, std::string("[") + op + "] rows of " + std::to_string(v) +
                                            " elements do not fit i32 indices");
}

}  // namespace

void masked_top1_merge(int64_t segments, int32_t v, const GemvChoice& choice,
                       const Top1Partial* partials) {
  launch_dependent(masked_top1_merge_kernel, dim3(1), dim3(kTop1MergeThreads), 0, int(segments), v,
                   choice.rules, partials, choice.logprobs, choice.indices,
                   rule_advance(choice.advance));
}

void argmax(const Tensor& x, Tensor& out) {
  const int64_t v = x.dim(-1);
  const int64_t rows = v ? x.numel() / v : 0;
  if (rows == 0) return;
  check_rows(rows, "argmax");
  check_row_length(v, "argmax");
  dispatch_device_float(x.dtype(), "argmax", [&](auto tag) {
    using T = decltype(tag);
    argmax_kernel<T><<<unsigned(rows), kReduceThreads, 0, stream()>>>(
        x.data<T>(), out.data<int32_t>(), int32_t(v));
  });
  check_launch("argmax");
}

void topk(const Tensor& x, int k, Tensor& values, Tensor& indices) {
  if (!(k <= kMaxTopK))
    throw Error(ErrorKind::unsupported, "[topk] k = " + std::to_string(k) +
                                            " exceeds the CUDA kernel's limit of " +
                                            std::to_string(kMaxTopK));
  const int64_t v = x.dim(-1);
  const int64_t rows = v ? x.numel() / v : 0;
  if (rows == 0 || k <= 0) return;
  check_rows(rows, "topk");
  check_row_length(v, "topk");
  const int64_t segments = (v + kSegment - 1) / kSegment;
  if (segments == 1) {
    dispatch_device_float(x.dtype(), "topk", [&](auto tag) {
      using T = decltype(tag);
      topk_row_kernel<T><<<unsigned(rows), kReduceThreads, 0, stream()>>>(
          x.data<T>(), int32_t(v), k, values.data<T>(), indices.data<int32_t>());
    });
    check_launch("topk");
    return;
  }
  if (!(rows <= 65535))
    throw Error(ErrorKind::unsupported, "[topk] " + std::to_string(rows) + " rows of " +
                                            std::to_string(v) +
                                            " exceed the segmented kernel's grid (65535 rows)");
  const int64_t n_cand = segments * k;  // per row; <= 2^31 / 4096 * 256
  Scratch scratch(size_t(rows * n_cand) * (sizeof(float) + sizeof(int32_t)));
  float* cand_v = static_cast<float*>(scratch.data());
  int32_t* cand_i = reinterpret_cast<int32_t*>(cand_v + rows * n_cand);
  dispatch_device_float(x.dtype(), "topk", [&](auto tag) {
    using T = decltype(tag);
    const dim3 grid{unsigned(segments), unsigned(rows)};
    topk_segment_kernel<T>
        <<<grid, kSegmentThreads, 0, stream()>>>(x.data<T>(), int32_t(v), k, cand_v, cand_i);
    check_launch("topk");
    topk_merge_kernel<T><<<unsigned(rows), kReduceThreads, 0, stream()>>>(
        x.data<T>(), int32_t(v), k, int32_t(n_cand), cand_v, cand_i, values.data<T>(),
        indices.data<int32_t>());
  });
  check_launch("topk");
}

void masked_topk(const Tensor& x, const Tensor* mask, const Tensor& rules, int k, Tensor& logprobs,
                 Tensor& indices, const TimestampRuleAdvance* advance) {
  constexpr const char* kOp = "masked_topk";
  const int64_t rows = x.dim(0), v = x.dim(1);
  if (rows == 0) return;
  check_row_length(v, kOp);
  if (!(rows <= kMaskedMaxRows))
    throw Error(ErrorKind::unsupported, std::string("[") + kOp + "] " + std::to_string(rows) +
                                            " rows exceed the kernel's grid (" +
                                            std::to_string(kMaskedMaxRows) + " rows)");
  const int64_t segments = (v + kMaskedSegment - 1) / kMaskedSegment;
  const int64_t n_cand = rows * segments * 2 * k;
  Scratch scratch(size_t(rows * segments) * sizeof(LseStats) +
                  size_t(n_cand) * (sizeof(float) + sizeof(int32_t)));
  auto* stats = static_cast<LseStats*>(scratch.data());
  auto* cand_v = reinterpret_cast<float*>(stats + rows * segments);
  auto* cand_i = reinterpret_cast<int32_t*>(cand_v + n_cand);
  const int width = int(rules.dim(1));
  const dim3 grid{unsigned(segments), unsigned(rows)};
  int* counters = masked_topk_counters(rows);
  // A programmatic dependent (common.cuh), like the rest of a decoder step.
  // PARLEY_TOPK_THRESHOLD=0: k >= 2 takes k rounds in every segment and in the merge, as
  // k = 1 does.
  static const bool threshold = env_switch_on("PARLEY_TOPK_THRESHOLD");
  launch_dependent(masked_topk_kernel, grid, dim3(kMaskedThreads), 0, x.data<float>(), int32_t(v),
                   mask ? mask->data<int8_t>() : nullptr, rules.data<int32_t>(), width, k,
                   threshold, stats, cand_v, cand_i, counters, logprobs.data<float>(),
                   indices.data<int32_t>(), rule_advance(advance));
}

}  // namespace parley::cuda
