// CPU permute: walks the output in order, one output row (last dim) per step, reading the
// input with the stride of the dim that lands last. Copies elements as 1-, 2- or 4-byte
// words, so every dtype shares three instantiations.
#include "engine/ops/transpose.h"

#include <cstring>

#include "engine/cpu/cpu_common.h"

namespace parley::cpu {

namespace {

template <typename W>
void permute_words(const Tensor& x, const std::vector<int>& perm, Tensor& out) {
  const int n = x.ndim();
  const W* src = static_cast<const W*>(x.raw());
  W* dst = static_cast<W*>(out.raw());
  if (n == 0) {
    if (out.numel()) dst[0] = src[0];
    return;
  }
  int64_t in_stride[Shape::kMaxDims];
  in_stride[n - 1] = 1;
  for (int i = n - 2; i >= 0; --i) in_stride[i] = in_stride[i + 1] * x.dim(i + 1);
  // stride[i]: input step for a step along output dim i.
  int64_t stride[Shape::kMaxDims];
  for (int i = 0; i < n; ++i) stride[i] = in_stride[perm[size_t(i)]];
  const Shape& oshape = out.shape();
  const int64_t inner = oshape[n - 1];
  const int64_t rows = inner ? out.numel() / inner : 0;
  const int64_t inner_stride = stride[n - 1];
  cpu_threads().parallel_for(rows, row_grain(inner), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t offset = 0, rest = r;
      for (int i = n - 2; i >= 0; --i) {
        offset += (rest % oshape[i]) * stride[i];
        rest /= oshape[i];
      }
      W* o = dst + r * inner;
      const W* s = src + offset;
      if (inner_stride == 1) {
        std::memcpy(o, s, size_t(inner) * sizeof(W));
      } else {
        for (int64_t j = 0; j < inner; ++j) o[j] = s[j * inner_stride];
      }
    }
  });
}

}  // namespace

void permute(const Tensor& x, const std::vector<int>& perm, Tensor& out) {
  switch (dtype_size(x.dtype())) {
    case 1: permute_words<uint8_t>(x, perm, out); break;
    case 2: permute_words<uint16_t>(x, perm, out); break;
    case 4: permute_words<uint32_t>(x, perm, out); break;
    default:
      throw Error(ErrorKind::internal,
                  "[permute] no copy for dtype " + std::string(dtype_name(x.dtype())));
  }
}

}  // namespace parley::cpu
