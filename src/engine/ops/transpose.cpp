// Public permute / transpose: checks the permutation and shapes, then the CPU or CUDA copy.
#include "engine/ops/transpose.h"

#include "engine/ops/op_checks.h"

namespace parley {

namespace {

std::string perm_str(const std::vector<int>& perm) {
  std::string s = "(";
  for (size_t i = 0; i < perm.size(); ++i) s += (i ? ", " : "") + std::to_string(perm[i]);
  return s + ")";
}

}  // namespace

Shape permuted_shape(const Shape& shape, const std::vector<int>& perm) {
  const int n = shape.ndim();
  bool ok = int(perm.size()) == n;
  std::vector<bool> seen(size_t(n), false);
  for (size_t i = 0; ok && i < perm.size(); ++i) {
    ok = perm[i] >= 0 && perm[i] < n && !seen[size_t(perm[i])];
    if (ok) seen[size_t(perm[i])] = true;
  }
  detail::require(ok, "permute", [&] {
    return "permutation " + perm_str(perm) + " does not fit shape " + shape.str();
  });
  Shape out;
  for (int p : perm) out.push_back(shape[p]);
  return out;
}

void permute(const Tensor& x, const std::vector<int>& perm, Tensor& out) {
  constexpr std::string_view op = "permute";
  const Device dev = detail::check_args(op, {{"x", &x}, {"out", &out}});
  const Shape want = permuted_shape(x.shape(), perm);
  detail::require(out.dtype() == x.dtype() && out.shape() == want, op, [&] {
    return detail::arg_str("out", out) + " must be " + std::string(dtype_name(x.dtype())) +
           want.str() + " for " + detail::arg_str("x", x) + " permuted by " + perm_str(perm);
  });
  detail::require(x.raw() != out.raw() || x.numel() == 0, op, [&] { return "out must not be x"; });
  if (dev == Device::cuda)
    cuda::permute(x, perm, out);
  else
    cpu::permute(x, perm, out);
}

void transpose(const Tensor& x, int dim0, int dim1, Tensor& out) {
  const int n = x.ndim();
  const int d0 = dim0 < 0 ? dim0 + n : dim0;
  const int d1 = dim1 < 0 ? dim1 + n : dim1;
  detail::require(d0 >= 0 && d0 < n && d1 >= 0 && d1 < n, "transpose", [&] {
    return "dimensions " + std::to_string(dim0) + " and " + std::to_string(dim1) + " do not fit " +
           detail::arg_str("x", x);
  });
  std::vector<int> perm(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) perm[size_t(i)] = i;
  std::swap(perm[size_t(d0)], perm[size_t(d1)]);
  permute(x, perm, out);
}

}  // namespace parley
