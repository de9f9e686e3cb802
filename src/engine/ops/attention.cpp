// Public scaled dot-product attention: shape, dtype and mask checks, then CPU or CUDA.
#include "engine/ops/attention.h"

#include <utility>

#include "engine/ops/op_checks.h"
#include "engine/ops/transpose.h"

namespace parley {

void attention(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
               const AttentionOptions& opt) {
  constexpr std::string_view op = "attention";
  const Device dev = detail::check_args(op, {{"q", &q},
                                             {"k", &k},
                                             {"v", &v},
                                             {"out", &out},
                                             {"key_mask", opt.key_mask},
                                             {"key_len", opt.key_len},
                                             {"batch_index", opt.batch_index}});
  detail::check_float(op, "q", q);
  for (const detail::Arg& a : {detail::Arg{"k", &k}, {"v", &v}, {"out", &out}})
    detail::require(a.t->dtype() == q.dtype(), op, [&] {
      return detail::arg_str("q", q) + " and " + detail::arg_str(a.name, *a.t) + ": dtypes differ";
    });
  for (const detail::Arg& a : {detail::Arg{"q", &q}, {"k", &k}, {"v", &v}, {"out", &out}})
    detail::require(a.t->ndim() == 4, op, [&] {
      return detail::arg_str(a.name, *a.t) + ": expected 4 dimensions [B, H, L, D]";
    });
  const int64_t b = q.dim(0), h = q.dim(1), lq = q.dim(2), d = q.dim(3), lk = k.dim(2);
  detail::require((k.dim(0) == b || opt.batch_index) && k.dim(1) == h && k.dim(3) == d, op, [&] {
    return detail::arg_str("q", q) + " and " + detail::arg_str("k", k) +
           ": expected k [B, H, Lk, D] with q's B (unless batch_index), H and D";
  });
  detail::require(v.dim(0) == k.dim(0) && v.dim(1) == h && v.dim(2) == lk, op, [&] {
    return detail::arg_str("k", k) + " and " + detail::arg_str("v", v) +
           ": expected v [B, H, Lk, Dv] with k's B, H and Lk";
  });
  if (opt.batch_index) {
    detail::check_dtype(op, "batch_index", *opt.batch_index, DType::i32);
    detail::check_shape(op, "batch_index", *opt.batch_index, Shape{b});
    if (dev == Device::cpu) {
      const int32_t* index = opt.batch_index->data<int32_t>();
      for (int64_t i = 0; i < b; ++i)
        detail::require(index[i] >= 0 && index[i] < k.dim(0), op, [&] {
          return "batch_index " + std::to_string(index[i]) + " outside [0, " +
                 std::to_string(k.dim(0)) + ")";
        });
    }
  }
  detail::check_shape(op, "out", out, Shape{b, h, lq, v.dim(3)});
  if (opt.key_mask) {
    detail::check_dtype(op, "key_mask", *opt.key_mask, DType::i8);
    detail::check_shape(op, "key_mask", *opt.key_mask, Shape{b, lk});
  }
  if (opt.key_len) {
    detail::check_dtype(op, "key_len", *opt.key_len, DType::i32);
    detail::check_shape(op, "key_len", *opt.key_len, Shape{b});
  }
  if (dev == Device::cuda)
    cuda::attention(q, k, v, out, opt);
  else
    cpu::attention(q, k, v, out, opt);
}

void attention_tokens(TokenHeads q, TokenHeads k, TokenHeads v, int64_t n_keys, int n_head,
                      Tensor& out, const AttentionOptions& opt) {
  constexpr std::string_view op = "attention_tokens";
  const Device dev = detail::check_args(op, {{"q", &q.t},
                                             {"k", &k.t},
                                             {"v", &v.t},
                                             {"out", &out},
                                             {"k batch_index", k.batch_index},
                                             {"v batch_index", v.batch_index}});
  detail::check_float(op, "q", q.t);
  for (const detail::Arg& a : {detail::Arg{"k", &k.t}, {"v", &v.t}, {"out", &out}})
    detail::require(a.t->dtype() == q.t.dtype(), op, [&] {
      return detail::arg_str("q", q.t) + " and " + detail::arg_str(a.name, *a.t) +
             ": dtypes differ";
    });
  detail::require(opt.key_mask == nullptr, op, "key_mask is not supported");
  detail::require(opt.key_len == nullptr, op, "key_len is not supported");
  detail::require(opt.batch_index == nullptr, op,
                  "batch_index is not supported (TokenHeads::batch_index is)");
  detail::require(out.ndim() == 3 && n_head > 0 && out.dim(2) % n_head == 0, op, [&] {
    return detail::arg_str("out", out) +
           ": expected [B, Lq, H * D] with H = " + std::to_string(n_head);
  });
  const int64_t b = out.dim(0), lq = out.dim(1), hd = out.dim(2);
  for (const auto& operand :
       {std::pair<const char*, const TokenHeads*>{"q", &q}, {"k", &k}, {"v", &v}}) {
    // Plain names, not a structured binding: clang before 16 cannot capture those.
    const char* name = operand.first;
    const TokenHeads* x = operand.second;
    detail::require(x->t.ndim() == 3 && (x->t.dim(0) == b || x->batch_index) && x->col >= 0 &&
                        x->col + hd <= x->t.dim(2),
                    op, [&] {
                      return detail::arg_str(name, x->t) + " at column " + std::to_string(x->col) +
                             ": expected [" + std::to_string(b) + ", L, W] with the " +
                             std::to_string(hd) + " columns of the heads inside W";
                    });
  }
  detail::require(q.batch_index == nullptr, op, "q takes no batch_index");
  for (const TokenHeads* x : {&k, &v}) {
    if (!x->batch_index) continue;
    detail::check_dtype(op, "batch_index", *x->batch_index, DType::i32);
    detail::check_shape(op, "batch_index", *x->batch_index, Shape{b});
    if (dev != Device::cpu) continue;
    const int32_t* index = x->batch_index->data<int32_t>();
    for (int64_t i = 0; i < b; ++i)
      detail::require(index[i] >= 0 && index[i] < x->t.dim(0), op, [&] {
        return "batch_index " + std::to_string(index[i]) + " outside [0, " +
               std::to_string(x->t.dim(0)) + ")";
      });
  }
  detail::require(q.t.dim(1) == lq, op, [&] {
    return detail::arg_str("q", q.t) + " and " + detail::arg_str("out", out) +
           ": expected the same number of queries";
  });
  detail::require(n_keys >= 0 && n_keys <= k.t.dim(1) && n_keys <= v.t.dim(1), op, [&] {
    return std::to_string(n_keys) + " keys but " + detail::arg_str("k", k.t) + " and " +
           detail::arg_str("v", v.t) + " hold fewer positions";
  });
  if (out.numel() == 0) return;
  if (dev == Device::cuda)
    cuda::attention_tokens(q, k, v, n_keys, n_head, out, opt);
  else
    cpu::attention_tokens(q, k, v, n_keys, n_head, out, opt);
}

void attention_qkv(const Tensor& qkv, int n_head, Tensor& out, const AttentionOptions& opt) {
  constexpr std::string_view op = "attention_qkv";
  const Device dev =
      detail::check_args(op, {{"qkv", &qkv}, {"out", &out}, {"key_mask", opt.key_mask}});
  detail::check_float(op, "qkv", qkv);
  detail::require(out.dtype() == qkv.dtype(), op, [&] {
    return detail::arg_str("qkv", qkv) + " and " + detail::arg_str("out", out) + ": dtypes differ";
  });
  detail::require(qkv.ndim() == 3, op, [&] {
    return detail::arg_str("qkv", qkv) + ": expected 3 dimensions [B, L, 3 * H * D]";
  });
  detail::require(n_head > 0 && qkv.dim(2) % (3 * int64_t(n_head)) == 0, op, [&] {
    return detail::arg_str("qkv", qkv) + ": last dimension is not 3 * " + std::to_string(n_head) +
           " heads * D";
  });
  const int64_t b = qkv.dim(0), l = qkv.dim(1), hd = qkv.dim(2) / 3, d = hd / n_head;
  detail::check_shape(op, "out", out, Shape{b, l, hd});
  detail::require(opt.key_len == nullptr, op, "key_len is not supported");
  detail::require(opt.batch_index == nullptr, op, "batch_index is not supported");
  if (opt.key_mask) {
    detail::check_dtype(op, "key_mask", *opt.key_mask, DType::i8);
    detail::check_shape(op, "key_mask", *opt.key_mask, Shape{b, l});
  }
  if (out.numel() == 0) return;
  if (dev == Device::cuda && cuda::attention_qkv_fused(qkv, n_head, out, opt)) {
    cuda::attention_qkv(qkv, n_head, out, opt);
    return;
  }
  // [B, L, 3, H, D] -> [3, B, H, L, D], attention(), then [B, H, L, D] -> [B, L, H, D].
  Tensor heads = Tensor::empty({3, b, n_head, l, d}, qkv.dtype(), dev);
  permute(qkv.reshape({b, l, 3, n_head, d}), {2, 0, 3, 1, 4}, heads);
  const Tensor flat = heads.reshape({3, b * n_head * l * d});
  const Shape one{b, n_head, l, d};
  const Tensor q = flat.slice0(0, 1).reshape(one), k = flat.slice0(1, 2).reshape(one),
               v = flat.slice0(2, 3).reshape(one);
  Tensor o = Tensor::empty(one, qkv.dtype(), dev);
  attention(q, k, v, o, opt);
  Tensor out_4d = out.reshape({b, l, n_head, d});
  permute(o, {0, 2, 1, 3}, out_4d);
}

}  // namespace parley
