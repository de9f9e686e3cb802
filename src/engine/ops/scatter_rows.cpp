// Public row scatter: checks shapes and (for ids in host memory) every id's range, then the
// CPU or CUDA scatter. Distinct ids are the caller's duty (checking would cost a pass over
// out's rows per call).
#include "engine/ops/scatter_rows.h"

#include "engine/ops/op_checks.h"

namespace parley {

void scatter_rows(const Tensor& src, const Tensor& ids, Tensor& out) {
  constexpr std::string_view op = "scatter_rows";
  const Device dev = detail::check_args(op, {{"src", &src}, {"out", &out}});
  detail::check_args(op, {{"ids", &ids}});
  detail::require(ids.device() == dev || ids.device() == Device::cpu, op,
                  [&] { return detail::arg_str("ids", ids) + " is on cuda but out is on cpu"; });
  detail::check_dtype(op, "ids", ids, DType::i32);
  detail::require(src.ndim() == 2 && out.ndim() == 2 && src.dim(1) == out.dim(1) &&
                      src.dtype() == out.dtype() && ids.numel() == src.dim(0),
                  op, [&] {
                    return detail::arg_str("src", src) + ", " + detail::arg_str("ids", ids) + ", " +
                           detail::arg_str("out", out) +
                           ": expected src [N, D], ids [N], out [R, D] of src's dtype";
                  });
  const int64_t rows = out.dim(0);
  if (ids.device() == Device::cpu) {
    const int32_t* p = ids.data<int32_t>();
    for (int64_t i = 0; i < ids.numel(); ++i) {
      detail::require(p[i] >= 0 && p[i] < rows, op, [&] {
        return "id " + std::to_string(p[i]) + " at position " + std::to_string(i) +
               " is outside out's " + std::to_string(rows) + " rows";
      });
    }
  }
  if (dev == Device::cuda)
    cuda::scatter_rows(src, ids.device() == Device::cuda ? ids : ids.to(Device::cuda), out);
  else
    cpu::scatter_rows(src, ids, out);
}

}  // namespace parley
