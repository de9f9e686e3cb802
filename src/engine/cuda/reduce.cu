// argmax and topk on CUDA (ops/reduce.h): one block per row of x [N, V].
// Both rank elements by one strict total order: NaN first (among NaNs, lower index
// first), then larger value, then lower index. argmax is the first element in that order.
// topk takes k rounds; round r finds the first element ranked after round r-1's pick.
// A row longer than kSegment is split: stage 1 takes the top k of each segment (held in
// shared memory, one block per segment), stage 2 the top k of those candidates (scratch).
// Each round is a block reduction, so the cost grows with k; k is limited to kMaxTopK
// for now (a larger k is an unsupported error).
// masked_topk (the decoder's token choice) shares the ranking and the rounds.
#include <climits>
#include <string>

#include "engine/cuda/common.cuh"
#include "engine/ops/reduce.h"

namespace parley::cuda {

namespace {

constexpr int kMaxTopK = 1024;
constexpr int kReduceThreads = 512;
constexpr int kSegmentThreads = 256;
constexpr int32_t kSegment = 4096;  // elements per stage-1 block: 16 KiB of f32 in shared memory

struct Cand {
  float v;
  int32_t i;  // -1: no candidate (ranks after everything)
};

__device__ __forceinline__ bool ranks_before(Cand a, Cand b) {
  if (a.i < 0) return false;
  if (b.i < 0) return true;
  const bool na = isnan(a.v), nb = isnan(b.v);
  if (na || nb) return na && (!nb || a.i < b.i);
  return a.v > b.v || (a.v == b.v && a.i < b.i);
}

__device__ __forceinline__ Cand first_of(Cand a, Cand b) { return ranks_before(b, a) ? b : a; }

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
// takes the running max and sum of exp of its part before and after the split (one pass,
// online) and the top k candidates of each part; the last of a row's blocks to finish
// (last_to_finish, common.cuh: a counter per row instead of a second launch) merges them:
// the segments' maxima and sums give logsumexp of both sides, so the split rule and
// logsumexp(x'), then the top k of the candidates (head ones at -inf when the rule drops the
// head) with their log-probabilities.
constexpr int kMaskedThreads = 256;
constexpr int32_t kMaskedSegment = 2048;  // elements per stage-1 block: 8 KiB of shared memory

struct LseStats {
  float head_max, head_sum, tail_max, tail_sum;
};

// (m, s) is a sum of exp(x - m) over the values seen; these add one value or another pair.
__device__ __forceinline__ void lse_add(float& m, float& s, float v) {
  if (v == -INFINITY) return;
  if (v > m) {
    s = s * expf(m - v) + 1.0f;  // m = -inf: expf(-inf) = 0
    m = v;
  } else {
    s += expf(v - m);
  }
}

__device__ __forceinline__ void lse_merge(float& m, float& s, float m2, float s2) {
  if (m2 == -INFINITY) return;
  if (m == -INFINITY) {
    m = m2;
    s = s2;
  } else if (m2 > m) {
    s = s * expf(m - m2) + s2;
    m = m2;
  } else {
    s += s2 * expf(m2 - m);
  }
}

// The block's (m, s), the same in every thread (warps, then the warps' pairs in order).
__device__ void block_lse(float& m, float& s) {
  __shared__ float ms[32], ss[32];
  for (int offset = 16; offset > 0; offset >>= 1)
    lse_merge(m, s, __shfl_xor_sync(0xffffffffu, m, offset),
              __shfl_xor_sync(0xffffffffu, s, offset));
  __syncthreads();  // an earlier call's readers are done
  if ((threadIdx.x & 31) == 0) {
    ms[threadIdx.x >> 5] = m;
    ss[threadIdx.x >> 5] = s;
  }
  __syncthreads();
  m = ms[0];
  s = ss[0];
  for (int w = 1; w < int(blockDim.x >> 5); ++w) lse_merge(m, s, ms[w], ss[w]);
}

__device__ __forceinline__ int32_t split_of(const int32_t* rule, int32_t v) {
  return rule[0] > 0 ? (rule[0] < v ? rule[0] : v) : 0;
}

// The merge of row `row` by the row's last segment block (every thread calls it; blockDim.x
// == kMaskedThreads, as the merge kernel it replaces had, so the sums come out bit for bit the
// same). stats and candidates come from other blocks: read through L2 (__ldcg).
__device__ void masked_topk_merge_row(int64_t row, int32_t split, int segments, int k,
                                      const LseStats* stats, const float* cand_v,
                                      const int32_t* cand_i, float* logprobs, int32_t* indices) {
  constexpr float kNegInf = -INFINITY;
  float hm = kNegInf, hs = 0.0f, tm = kNegInf, ts = 0.0f;
  for (int i = int(threadIdx.x); i < segments; i += int(blockDim.x)) {
    const LseStats* st = stats + row * segments + i;
    lse_merge(hm, hs, __ldcg(&st->head_max), __ldcg(&st->head_sum));
    lse_merge(tm, ts, __ldcg(&st->tail_max), __ldcg(&st->tail_sum));
  }
  block_lse(hm, hs);
  block_lse(tm, ts);
  const float tail_lse = tm > kNegInf ? tm + logf(ts) : kNegInf;
  const bool drop_head = split > 0 && tail_lse > hm;
  const float head_lse = !drop_head && hm > kNegInf ? hm + logf(hs) : kNegInf;
  const float hi = fmaxf(head_lse, tail_lse), lo = fminf(head_lse, tail_lse);
  const float lse = hi > kNegInf ? hi + log1pf(expf(lo - hi)) : kNegInf;

  const int64_t base = row * segments * 2 * k;
  auto load = [&](int32_t j) {
    const int32_t i = __ldcg(cand_i + base + j);
    if (i < 0) return Cand{0.0f, -1};
    return Cand{drop_head && i < split ? kNegInf : __ldcg(cand_v + base + j), i};
  };
  const int64_t out = row * k;
  auto emit = [&](int r, Cand c) {
    indices[out + r] = c.i;
    logprobs[out + r] = c.i >= 0 ? c.v - lse : kNegInf;
  };
  select_top(int32_t(segments * 2 * k), k, load, emit);
}

// Block (segment, row); counters [rows], zero between launches.
__global__ void __launch_bounds__(kMaskedThreads)
    masked_topk_kernel(const float* x, int32_t v, const int8_t* mask, const int32_t* rules,
                       int width, int k, LseStats* stats, float* cand_v, int32_t* cand_i,
                       int* counters, float* logprobs, int32_t* indices) {
  constexpr float kNegInf = -INFINITY;
  __shared__ float seg[kMaskedSegment];
  __shared__ int32_t rule[1 + 2 * kMaskedTopKMaxRanges];
  wait_for_inputs();
  allow_dependents();
  const int64_t row = blockIdx.y;
  for (int j = int(threadIdx.x); j < width; j += int(blockDim.x)) rule[j] = rules[row * width + j];
  __syncthreads();
  const int32_t begin = int32_t(blockIdx.x) * kMaskedSegment;
  const int32_t n = v - begin < kMaskedSegment ? v - begin : kMaskedSegment;
  const int32_t split = split_of(rule, v);
  const int n_ranges = (width - 1) / 2;
  const float* src = x + row * v;
  float hm = kNegInf, hs = 0.0f, tm = kNegInf, ts = 0.0f;
  for (int32_t j = int32_t(threadIdx.x); j < n; j += int32_t(blockDim.x)) {
    const int32_t g = begin + j;
    bool off = mask && mask[g];
    for (int r = 0; r < n_ranges && !off; ++r) off = g >= rule[1 + 2 * r] && g < rule[2 + 2 * r];
    const float f = off ? kNegInf : src[g];
    seg[j] = f;
    if (g < split)
      lse_add(hm, hs, f);
    else
      lse_add(tm, ts, f);
  }
  block_lse(hm, hs);  // its barriers also publish seg
  block_lse(tm, ts);
  const int64_t slot = row * gridDim.x + blockIdx.x;
  if (threadIdx.x == 0) stats[slot] = LseStats{hm, hs, tm, ts};
  // The top k of each part: [0, head_n) before the split, [head_n, n) after it.
  const int32_t head_n = split - begin < 0 ? 0 : (split - begin < n ? split - begin : n);
  const int64_t out = slot * 2 * k;
  auto emit_at = [&](int64_t base) {
    return [=](int r, Cand c) {
      cand_v[base + r] = c.v;
      cand_i[base + r] = c.i;
    };
  };
  auto none = [&](int64_t base) {
    if (threadIdx.x == 0)
      for (int r = 0; r < k; ++r) cand_i[base + r] = -1;
  };
  if (head_n > 0)
    select_top(
        head_n, k,
        [&](int32_t j) {
          return Cand{seg[j], begin + j};
        },
        emit_at(out));
  else
    none(out);
  if (head_n < n)
    select_top(
        n - head_n, k,
        [&](int32_t j) {
          return Cand{seg[head_n + j], begin + head_n + j};
        },
        emit_at(out + k));
  else
    none(out + k);
  if (!last_to_finish(counters + row, int(gridDim.x))) return;
  masked_topk_merge_row(row, split, int(gridDim.x), k, stats, cand_v, cand_i, logprobs, indices);
}

constexpr int64_t kMaskedMaxRows = 65535;  // grid y

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
                 Tensor& indices) {
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
  launch_dependent(masked_topk_kernel, grid, dim3(kMaskedThreads), 0, x.data<float>(), int32_t(v),
                   mask ? mask->data<int8_t>() : nullptr, rules.data<int32_t>(), width, k, stats,
                   cand_v, cand_i, counters, logprobs.data<float>(), indices.data<int32_t>());
}

}  // namespace parley::cuda
