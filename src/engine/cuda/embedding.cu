// embedding on CUDA (ops/embedding.h): out[i, :] = table[ids[i], :], one block per id.
// ids are i32 on the device, so they cannot be range-checked before launch without a
// copy back; an id outside [0, V) gives a row of zeros instead of reading out of bounds.
// Launched as a programmatic dependent (common.cuh) like the rest of a decoder step.
#include "engine/cuda/common.cuh"
#include "engine/ops/embedding.h"

namespace parley::cuda {

namespace {

// U: an unsigned integer of the element's size; rows are copied as raw bits.
template <typename U>
__global__ void embedding_kernel(const U* table, const int32_t* ids, U* out, int64_t vocab,
                                 int64_t d) {
  wait_for_inputs();
  allow_dependents();
  const int64_t id = ids[blockIdx.x];
  U* dst = out + int64_t(blockIdx.x) * d;
  const bool valid = id >= 0 && id < vocab;
  const U* src = table + (valid ? id : 0) * d;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) dst[j] = valid ? src[j] : U(0);
}

}  // namespace

void embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  const int64_t n = ids.numel(), vocab = table.dim(0), d = table.dim(1);
  if (n == 0 || d == 0) return;
  check_rows(n, "embedding");
  const int threads = threads_for_row(d);
  const int32_t* pid = ids.data<int32_t>();
  if (dtype_size(table.dtype()) == 4)
    launch_dependent(embedding_kernel<uint32_t>, dim3(unsigned(n)), dim3(threads), 0,
                     table.data<uint32_t>(), pid, out.data<uint32_t>(), vocab, d);
  else
    launch_dependent(embedding_kernel<uint16_t>, dim3(unsigned(n)), dim3(threads), 0,
                     table.data<uint16_t>(), pid, out.data<uint16_t>(), vocab, d);
  check_launch("embedding");
}

}  // namespace parley::cuda
