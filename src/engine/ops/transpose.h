// Layout changes that copy: permute (any permutation of up to 6 dims, as torch.permute
// followed by .contiguous()) and transpose (swap two dims). out has the permuted shape
// and x's dtype (any dtype).
#pragma once

#include <vector>

#include "engine/tensor.h"

namespace parley {

Shape permuted_shape(const Shape& shape, const std::vector<int>& perm);
void permute(const Tensor& x, const std::vector<int>& perm, Tensor& out);
void transpose(const Tensor& x, int dim0, int dim1, Tensor& out);

namespace cpu {
void permute(const Tensor& x, const std::vector<int>& perm, Tensor& out);
}
namespace cuda {
void permute(const Tensor& x, const std::vector<int>& perm, Tensor& out);
}

}  // namespace parley
