// Public embedding gather: checks shapes and (for ids in host memory) every id's range,
// then the CPU or CUDA gather.
#include "engine/ops/embedding.h"

#include "engine/ops/elementwise.h"
#include "engine/ops/op_checks.h"

namespace parley {

void embedding(const Tensor& table, const Tensor& ids, Tensor& out, const Tensor* add) {
  constexpr std::string_view op = "embedding";
  const Device dev = detail::check_args(op, {{"table", &table}, {"out", &out}, {"add", add}});
  detail::check_args(op, {{"ids", &ids}});
  // ids may stay on the host while the table is on CUDA (the header allows it); the reverse
  // would need a device read here.
  detail::require(ids.device() == dev || ids.device() == Device::cpu, op,
                  [&] { return detail::arg_str("ids", ids) + " is on cuda but table is on cpu"; });
  detail::check_float(op, "table", table);
  detail::require(table.ndim() == 2, op,
                  [&] { return detail::arg_str("table", table) + ": expected [V, D]"; });
  detail::check_dtype(op, "ids", ids, DType::i32);
  const int64_t vocab = table.dim(0), d = table.dim(1);
  Shape nested = ids.shape();
  nested.push_back(d);
  const Shape flat{ids.numel(), d};
  detail::require(
      out.dtype() == table.dtype() && (out.shape() == nested || out.shape() == flat), op, [&] {
        return detail::arg_str("out", out) + " must be " + std::string(dtype_name(table.dtype())) +
               flat.str() + " or " + nested.str() + " for " + detail::arg_str("ids", ids);
      });
  if (add) {
    detail::require(
        add->dtype() == table.dtype() && (add->shape() == Shape{d} || add->shape() == out.shape()),
        op, [&] {
          return detail::arg_str("add", *add) + " must be " +
                 std::string(dtype_name(table.dtype())) + Shape{d}.str() + " or " +
                 out.shape().str();
        });
    detail::require(!detail::overlap(*add, out), op,
                    [&] { return std::string("add must not share memory with out"); });
  }
  if (ids.device() == Device::cpu) {
    const int32_t* p = ids.data<int32_t>();
    for (int64_t i = 0; i < ids.numel(); ++i)
      detail::require(p[i] >= 0 && p[i] < vocab, op, [&] {
        return "id " + std::to_string(p[i]) + " at position " + std::to_string(i) +
               " is outside the table's " + std::to_string(vocab) + " rows";
      });
  }
  if (dev == Device::cuda) {
    // Host ids (checked above) go up first: the kernel reads device memory.
    cuda::embedding(table, ids.device() == Device::cuda ? ids : ids.to(Device::cuda), out, add);
  } else {
    cpu::embedding(table, ids, out);
    if (add) cpu::binary(BinaryOp::add, out, *add, out);
  }
}

}  // namespace parley
