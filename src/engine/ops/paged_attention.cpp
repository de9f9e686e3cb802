// Paged attention and KV writes: argument checks (shapes, block tables, slots), then the
// CPU or CUDA implementation.
#include "engine/ops/paged_attention.h"

#include "engine/ops/op_checks.h"

namespace parley {

namespace {

void check_cache(std::string_view op, const Tensor& k_cache, const Tensor& v_cache) {
  detail::check_dtype(op, "k_cache", k_cache, DType::f32);
  detail::check_dtype(op, "v_cache", v_cache, DType::f32);
  detail::require(k_cache.ndim() == 4, op, [&] {
    return detail::arg_str("k_cache", k_cache) + ": must be [n_blocks, block_size, Hkv, D]";
  });
  detail::check_shape(op, "v_cache", v_cache, k_cache.shape());
}

}  // namespace

void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                     std::span<const PagedRow> rows, Tensor& out,
                     const PagedAttentionOptions& opt) {
  constexpr std::string_view op = "paged_attention";
  const Device dev = detail::check_args(
      op, {{"q", &q}, {"k_cache", &k_cache}, {"v_cache", &v_cache}, {"out", &out}});
  check_cache(op, k_cache, v_cache);
  detail::check_dtype(op, "q", q, DType::f32);
  detail::require(
      q.ndim() == 3 && q.dim(2) == k_cache.dim(3) && q.dim(1) % k_cache.dim(2) == 0, op, [&] {
        return detail::arg_str("q", q) + " does not fit " + detail::arg_str("k_cache", k_cache) +
               ": needs [T, Hq, D] with Hq a multiple of Hkv";
      });
  detail::check_shape(op, "out", out, q.shape());
  detail::require(!detail::overlap(q, out), op,
                  [] { return std::string("out must not overlap q"); });
  const int64_t block_size = k_cache.dim(1), n_blocks = k_cache.dim(0);
  int64_t next = 0;
  for (const PagedRow& r : rows) {
    detail::require(r.q_begin == next && r.n_tokens >= 0 && r.start_pos >= 0, op, [] {
      return std::string("rows must cover q's tokens in order, each with start_pos >= 0");
    });
    next += r.n_tokens;
    const int64_t need = (r.start_pos + r.n_tokens + block_size - 1) / block_size;
    detail::require(int64_t(r.block_table.size()) >= need, op, [&] {
      return "a row at start_pos " + std::to_string(r.start_pos) + " with " +
             std::to_string(r.n_tokens) + " tokens needs " + std::to_string(need) +
             " blocks, its block table has " + std::to_string(r.block_table.size());
    });
    for (int64_t i = 0; i < need; ++i)
      detail::require(r.block_table[size_t(i)] >= 0 && r.block_table[size_t(i)] < n_blocks, op,
                      [&] {
                        return "block id " + std::to_string(r.block_table[size_t(i)]) +
                               " outside the cache's " + std::to_string(n_blocks) + " blocks";
                      });
  }
  detail::require(next == q.dim(0), op, [&] {
    return "rows cover " + std::to_string(next) + " tokens, q has " + std::to_string(q.dim(0));
  });
  detail::require(opt.sliding_window >= 0, op,
                  [] { return std::string("sliding_window must be >= 0"); });
  if (dev == Device::cuda)
    cuda::paged_attention(q, k_cache, v_cache, rows, out, opt);
  else
    cpu::paged_attention(q, k_cache, v_cache, rows, out, opt);
}

void paged_kv_write(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& k_cache,
                    Tensor& v_cache) {
  constexpr std::string_view op = "paged_kv_write";
  const Device dev = detail::check_args(
      op, {{"k", &k}, {"v", &v}, {"slots", &slots}, {"k_cache", &k_cache}, {"v_cache", &v_cache}});
  check_cache(op, k_cache, v_cache);
  detail::check_dtype(op, "k", k, DType::f32);
  detail::check_shape(op, "k", k, Shape{k.dim(0), k_cache.dim(2), k_cache.dim(3)});
  detail::check_shape(op, "v", v, k.shape());
  detail::check_dtype(op, "v", v, DType::f32);
  detail::check_dtype(op, "slots", slots, DType::i32);
  detail::check_shape(op, "slots", slots, Shape{k.dim(0)});
  if (dev == Device::cuda) {
    cuda::paged_kv_write(k, v, slots, k_cache, v_cache);
    return;
  }
  const int64_t n_slots = k_cache.dim(0) * k_cache.dim(1);
  const int32_t* s = slots.data<int32_t>();
  for (int64_t t = 0; t < k.dim(0); ++t)
    detail::require(s[t] >= 0 && s[t] < n_slots, op, [&] {
      return "slot " + std::to_string(s[t]) + " outside the cache's " + std::to_string(n_slots);
    });
  cpu::paged_kv_write(k, v, slots, k_cache, v_cache);
}

}  // namespace parley
