// Paged attention and KV writes: argument checks (shapes, block tables, slots), then the
// CPU or CUDA implementation.
#include "engine/ops/paged_attention.h"

#include <algorithm>
#include <cstdlib>

#include "engine/ops/op_checks.h"

namespace parley {

namespace {

// The cache's dtype: f32 on the CPU, any float type on CUDA.
void check_cache(std::string_view op, const Tensor& k_cache, const Tensor& v_cache) {
  if (k_cache.device() == Device::cpu)
    detail::check_dtype(op, "k_cache", k_cache, DType::f32);
  else
    detail::require(is_float(k_cache.dtype()), op,
                    [&] { return detail::arg_str("k_cache", k_cache) + ": must be a float type"; });
  detail::check_dtype(op, "v_cache", v_cache, k_cache.dtype());
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
  detail::check_dtype(op, "q", q, k_cache.dtype());
  detail::check_dtype(op, "out", out, k_cache.dtype());
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
  if (dev == Device::cuda) {
    detail::require(opt.tables != nullptr && opt.tables->tokens.dim(0) == q.dim(0), op, [] {
      return std::string("CUDA needs the rows as PagedTables (make_paged_tables) for q's tokens");
    });
    cuda::paged_attention(q, k_cache, v_cache, rows, out, opt);
  } else
    cpu::paged_attention(q, k_cache, v_cache, rows, out, opt);
}

void paged_kv_write(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& k_cache,
                    Tensor& v_cache) {
  constexpr std::string_view op = "paged_kv_write";
  const Device dev = detail::check_args(
      op, {{"k", &k}, {"v", &v}, {"slots", &slots}, {"k_cache", &k_cache}, {"v_cache", &v_cache}});
  check_cache(op, k_cache, v_cache);
  detail::check_dtype(op, "k", k, k_cache.dtype());
  detail::check_shape(op, "k", k, Shape{k.dim(0), k_cache.dim(2), k_cache.dim(3)});
  detail::check_shape(op, "v", v, k.shape());
  detail::check_dtype(op, "v", v, k_cache.dtype());
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

int64_t paged_split_keys() {
  static const int64_t keys = [] {
    const char* v = std::getenv("PARLEY_PAGED_SPLIT_KEYS");
    const int64_t n = v ? std::atoll(v) : 0;
    return n >= 32 && n % 32 == 0 ? n : kPagedSplitKeys;
  }();
  return keys;
}

void make_paged_tables(std::span<const PagedRow> rows, Pool& host, Pool& device,
                       PagedTables& tables) {
  int64_t n_tok = 0, n_blocks = 0;
  for (const PagedRow& r : rows) {
    n_tok += r.n_tokens;
    n_blocks += int64_t(r.block_table.size());
  }
  Tensor tok = host.alloc({n_tok, 3}, DType::i32);
  Tensor blk = host.alloc({std::max<int64_t>(n_blocks, 1)}, DType::i32);
  int32_t* pt = tok.data<int32_t>();
  int32_t* pb = blk.data<int32_t>();
  int64_t n_tiles = 0;
  for (const PagedRow& r : rows)
    if (r.n_tokens > kPagedSplitRowTokens)
      n_tiles += (r.n_tokens + kPagedFlashTile - 1) / kPagedFlashTile;
  Tensor til = host.alloc({std::max<int64_t>(n_tiles, 1), 2}, DType::i32);
  int32_t* pl = til.data<int32_t>();
  int64_t off = 0, split = 0, max_splits = 1;
  for (const PagedRow& r : rows) {
    const bool splits = r.n_tokens <= kPagedSplitRowTokens;
    for (int64_t j = 0; !splits && j < r.n_tokens; j += kPagedFlashTile, pl += 2) {
      pl[0] = int32_t(r.q_begin + j);
      pl[1] = int32_t(std::min(kPagedFlashTile, r.n_tokens - j));
    }
    for (int64_t j = 0; j < r.n_tokens; ++j, pt += 3) {
      const int64_t pos = r.start_pos + j;
      pt[0] = int32_t(pos);
      pt[1] = int32_t(off);
      pt[2] = splits ? int32_t(split++) : -1;
      if (splits) max_splits = std::max(max_splits, paged_splits(pos));
    }
    std::copy(r.block_table.begin(), r.block_table.end(), pb + off);
    off += int64_t(r.block_table.size());
  }
  tables.split_tokens = split;
  tables.max_splits = max_splits;
  tables.n_tiles = n_tiles;
  if (device.device() == Device::cpu) {
    tables.tokens = tok;
    tables.blocks = blk;
    tables.tiles = til;
    return;
  }
  auto upload = [&](const Tensor& h) {
    Tensor d = device.alloc(h.shape(), DType::i32);
    d.copy_from(h);
    return d;
  };
  tables.tokens = upload(tok);
  tables.blocks = upload(blk);
  tables.tiles = upload(til);
}

}  // namespace parley
