// CPU embedding gather: one row copy per id (ids were range-checked by the dispatcher).
#include "engine/ops/embedding.h"

#include <cstring>

#include "engine/cpu/cpu_common.h"

namespace parley::cpu {

void embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  const size_t row_bytes = size_t(table.dim(1)) * dtype_size(table.dtype());
  const char* src = static_cast<const char*>(table.raw());
  char* dst = static_cast<char*>(out.raw());
  const int32_t* p = ids.data<int32_t>();
  cpu_threads().parallel_for(
      ids.numel(), row_grain(int64_t(row_bytes) / 4), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          std::memcpy(dst + size_t(i) * row_bytes, src + size_t(p[i]) * row_bytes, row_bytes);
      });
}

}  // namespace parley::cpu
