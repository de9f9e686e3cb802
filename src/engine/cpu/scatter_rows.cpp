// CPU row scatter: one row copy per id (ids were checked by the dispatcher).
#include "engine/ops/scatter_rows.h"

#include <cstring>

#include "engine/cpu/cpu_common.h"

namespace parley::cpu {

void scatter_rows(const Tensor& src, const Tensor& ids, Tensor& out) {
  const size_t row_bytes = size_t(src.dim(1)) * dtype_size(src.dtype());
  const char* from = static_cast<const char*>(src.raw());
  char* to = static_cast<char*>(out.raw());
  const int32_t* p = ids.data<int32_t>();
  cpu_threads().parallel_for(
      ids.numel(), row_grain(int64_t(row_bytes) / 4), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          std::memcpy(to + size_t(p[i]) * row_bytes, from + size_t(i) * row_bytes, row_bytes);
      });
}

}  // namespace parley::cpu
