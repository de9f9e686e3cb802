// beam_step and copy_slot_rows on CUDA (ops/beam_step.h). beam_step is one block: a thread
// per candidate finds its rank, one thread walks the candidates best first, then a thread per
// row runs its grammar step (the parts the CPU runs, ops/beam_step_impl.h). copy_slot_rows
// copies 16-byte words, a block per (chunk of positions, row, cache).
#include <algorithm>

#include "engine/cuda/common.cuh"
#include "engine/ops/beam_step.h"
#include "engine/ops/beam_step_impl.h"

namespace parley::cuda {

namespace {

// The candidates' scores and ids are read once into shared memory: ranking from global
// memory made every thread wait on n * k dependent trips to L2 (7.2 us a 5-beam step).
__global__ void beam_step_kernel(detail::BeamStepPtrs a, BeamStepParams p) {
  __shared__ float scores[kBeamStepMaxCandidates];
  __shared__ int32_t ids[kBeamStepMaxCandidates];
  __shared__ int32_t order[kBeamStepMaxCandidates];
  __shared__ int32_t source[kBeamStepMaxRows];
  const int nk = a.m * a.k;
  for (int c = threadIdx.x; c < nk; c += blockDim.x) {
    scores[c] = detail::beam_score(a, c);
    ids[c] = a.ids[c];
  }
  __syncthreads();
  for (int c = threadIdx.x; c < nk; c += blockDim.x) order[detail::beam_rank(scores, nk, c)] = c;
  __syncthreads();
  if (threadIdx.x == 0) detail::beam_select(a, scores, ids, order, source, p);
  __syncthreads();
  for (int i = threadIdx.x; i < a.n; i += blockDim.x)
    detail::beam_advance_row(a, source, i, p.grammar);
}

constexpr int kMaxCaches = 64;  // caches per launch
struct CacheBases {
  char* base[kMaxCaches];
};

// W: the word copied (uint4 when rows are 16-byte multiples and aligned, else bytes).
template <typename W>
__global__ void copy_slot_rows_kernel(CacheBases caches, const int32_t* slots,
                                      const int32_t* copy_from, const int32_t* first,
                                      int64_t slots_n, int64_t t, int64_t words_per_row,
                                      int64_t end, int positions_per_block) {
  const int64_t i = blockIdx.y;
  const int64_t from = copy_from[i], to = slots[i], begin = first[0];
  if (from < 0 || from >= slots_n || to < 0 || to >= slots_n || from == to || begin < 0) return;
  const int64_t p0 = std::max<int64_t>(begin, int64_t(blockIdx.x) * positions_per_block);
  const int64_t p1 = std::min<int64_t>(end, int64_t(blockIdx.x + 1) * positions_per_block);
  if (p0 >= p1) return;
  W* base = reinterpret_cast<W*>(caches.base[blockIdx.z]);
  const W* src = base + (from * t + p0) * words_per_row;
  W* dst = base + (to * t + p0) * words_per_row;
  const int64_t words = (p1 - p0) * words_per_row;
  for (int64_t w = threadIdx.x; w < words; w += blockDim.x) dst[w] = src[w];
}

}  // namespace

void beam_step(const Tensor& ids, const Tensor& logprobs, const BeamStepIn& in, BeamStepOut& out,
               const BeamStepParams& params) {
  const detail::BeamStepPtrs a = detail::beam_step_pointers(ids, logprobs, in, out);
  const int threads = std::min(kBeamStepMaxCandidates, (a.m * a.k + 31) / 32 * 32);
  beam_step_kernel<<<1, unsigned(threads), 0, stream()>>>(a, params);
  check_launch("beam_step");
}

void copy_slot_rows(std::span<Tensor> caches, const Tensor& slots, const Tensor& copy_from,
                    const Tensor& first, int64_t end) {
  const Tensor& c0 = caches[0];
  const int64_t s = c0.dim(0), t = c0.dim(1), n = slots.numel();
  const int64_t row_bytes = c0.dim(2) * int64_t(dtype_size(c0.dtype()));
  bool wide = row_bytes % 16 == 0;
  for (const Tensor& c : caches) wide &= reinterpret_cast<uintptr_t>(c.raw()) % 16 == 0;
  const int64_t words = wide ? row_bytes / 16 : row_bytes;
  // About 16 KiB per block: a copy is a row or two of the step's rows, so many small blocks
  // (64 KiB blocks: 5.6 us for a 5-beam turbo step's copy on the H200).
  const int per_block = int(std::max<int64_t>(1, (int64_t(16) << 10) / row_bytes));
  const unsigned chunks = unsigned((end + per_block - 1) / per_block);
  check_rows(n, "copy_slot_rows");
  for (size_t at = 0; at < caches.size(); at += kMaxCaches) {
    const size_t count = std::min<size_t>(kMaxCaches, caches.size() - at);
    CacheBases bases{};
    for (size_t j = 0; j < count; ++j) bases.base[j] = static_cast<char*>(caches[at + j].raw());
    const dim3 grid(chunks, unsigned(n), unsigned(count));
    if (wide)
      copy_slot_rows_kernel<uint4>
          <<<grid, 256, 0, stream()>>>(bases, slots.data<int32_t>(), copy_from.data<int32_t>(),
                                       first.data<int32_t>(), s, t, words, end, per_block);
    else
      copy_slot_rows_kernel<uint8_t>
          <<<grid, 256, 0, stream()>>>(bases, slots.data<int32_t>(), copy_from.data<int32_t>(),
                                       first.data<int32_t>(), s, t, words, end, per_block);
    check_launch("copy_slot_rows");
  }
}

}  // namespace parley::cuda
