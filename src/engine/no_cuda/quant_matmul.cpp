// cuda::matmul_quant for a build without CUDA: throws "built without CUDA" (no_cuda/stubs.cpp).
#include "engine/ops/quant_matmul.h"
#include "engine/error.h"

namespace parley::cuda {

void matmul_quant(const Tensor&, const QuantMatrix&, Tensor&, const MatmulQuantOptions&) {
  throw Error(ErrorKind::unsupported, "[matmul_quant] parley was built without CUDA");
}

}  // namespace parley::cuda
