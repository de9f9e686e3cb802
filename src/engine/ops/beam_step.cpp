// Public beam_step and copy_slot_rows (ops/beam_step.h): argument checks, then CPU or CUDA.
#include "engine/ops/beam_step.h"

#include <string>

#include "engine/ops/op_checks.h"
#include "engine/ops/reduce.h"

namespace parley {

void beam_step(const Tensor& ids, const Tensor& logprobs, const BeamStepIn& in, BeamStepOut& out,
               const BeamStepParams& params) {
  constexpr std::string_view op = "beam_step";
  const std::initializer_list<detail::Arg> inputs = {
      {"ids", &ids},           {"logprobs", &logprobs},   {"in.sums", &in.sums},
      {"in.slots", &in.slots}, {"in.states", &in.states}, {"in.finished", &in.finished}};
  const std::initializer_list<detail::Arg> outputs = {{"out.tokens", &out.tokens},
                                                      {"out.sums", &out.sums},
                                                      {"out.slots", &out.slots},
                                                      {"out.cache_rows", &out.cache_rows},
                                                      {"out.copy_from", &out.copy_from},
                                                      {"out.states", &out.states},
                                                      {"out.rules", &out.rules},
                                                      {"out.finished", &out.finished},
                                                      {"record", &out.record}};
  const Device dev = detail::check_args(op, inputs);
  detail::require(detail::check_args(op, outputs) == dev, op, "inputs and outputs on two devices");
  detail::require(ids.ndim() == 2 && out.tokens.ndim() == 1, op, [&] {
    return detail::arg_str("ids", ids) + ", " + detail::arg_str("out.tokens", out.tokens) +
           ": expected ids [M, K] and out.tokens [N]";
  });
  const int64_t m = ids.dim(0), k = ids.dim(1), n = out.tokens.dim(0);
  detail::require(m >= 1 && m <= n && n <= kBeamStepMaxRows && k >= 1 && k <= kMaskedTopKMax &&
                      m * k <= kBeamStepMaxCandidates,
                  op, [&] {
                    return detail::arg_str("ids", ids) + " for " + std::to_string(n) +
                           " rows: expected 1 <= M <= N <= " + std::to_string(kBeamStepMaxRows) +
                           ", 1 <= K <= " + std::to_string(kMaskedTopKMax) +
                           ", M * K <= " + std::to_string(kBeamStepMaxCandidates);
                  });
  detail::check_dtype(op, "ids", ids, DType::i32);
  detail::check_dtype(op, "logprobs", logprobs, DType::f32);
  detail::check_shape(op, "logprobs", logprobs, ids.shape());
  const int64_t s = kTimestampRuleState;
  detail::check_dtype(op, "in.sums", in.sums, DType::f32);
  detail::check_shape(op, "in.sums", in.sums, Shape{m});
  detail::check_dtype(op, "out.sums", out.sums, DType::f32);
  detail::check_shape(op, "out.sums", out.sums, Shape{n});
  detail::check_dtype(op, "in.slots", in.slots, DType::i32);
  detail::check_shape(op, "in.slots", in.slots, Shape{m});
  for (const detail::Arg& a :
       {detail::Arg{"out.tokens", &out.tokens}, detail::Arg{"out.slots", &out.slots},
        detail::Arg{"out.cache_rows", &out.cache_rows},
        detail::Arg{"out.copy_from", &out.copy_from}}) {
    detail::check_dtype(op, a.name, *a.t, DType::i32);
    detail::check_shape(op, a.name, *a.t, Shape{n});
  }
  detail::check_dtype(op, "in.states", in.states, DType::i32);
  detail::check_shape(op, "in.states", in.states, Shape{m, s});
  detail::check_dtype(op, "out.states", out.states, DType::i32);
  detail::check_shape(op, "out.states", out.states, Shape{n, s});
  for (const detail::Arg& a :
       {detail::Arg{"in.finished", &in.finished}, detail::Arg{"out.finished", &out.finished}}) {
    detail::check_dtype(op, a.name, *a.t, DType::i32);
    detail::check_shape(op, a.name, *a.t, Shape{1});
  }
  detail::check_dtype(op, "out.rules", out.rules, DType::i32);
  detail::require(out.rules.ndim() == 2 && out.rules.dim(0) == n && out.rules.dim(1) % 2 == 1 &&
                      out.rules.dim(1) >= 5 && out.rules.dim(1) <= 1 + 2 * kMaskedTopKMaxRanges,
                  op, [&] {
                    return detail::arg_str("out.rules", out.rules) + ": expected [" +
                           std::to_string(n) + ", W] with W odd in [5, " +
                           std::to_string(1 + 2 * kMaskedTopKMaxRanges) + "]";
                  });
  detail::check_dtype(op, "record", out.record, DType::i32);
  detail::check_shape(op, "record", out.record, Shape{beam_record_width(n)});
  for (const detail::Arg& o : outputs)
    for (const detail::Arg& i : inputs)
      detail::require(!detail::overlap(*o.t, *i.t), op,
                      [&] { return std::string(o.name) + " overlaps " + i.name; });
  detail::require(params.max_finished >= 1 && params.slot_stride >= 0 && params.next_position >= 0,
                  op, [&] {
                    return "max_finished " + std::to_string(params.max_finished) +
                           ", slot_stride " + std::to_string(params.slot_stride) +
                           ", next_position " + std::to_string(params.next_position) +
                           ": expected max_finished >= 1 and the others >= 0";
                  });
  if (dev == Device::cuda)
    cuda::beam_step(ids, logprobs, in, out, params);
  else
    cpu::beam_step(ids, logprobs, in, out, params);
}

void copy_slot_rows(std::span<Tensor> caches, const Tensor& slots, const Tensor& copy_from,
                    const Tensor& first, int64_t end) {
  constexpr std::string_view op = "copy_slot_rows";
  const Device dev =
      detail::check_args(op, {{"slots", &slots}, {"copy_from", &copy_from}, {"first", &first}});
  for (const detail::Arg& a : {detail::Arg{"slots", &slots}, detail::Arg{"copy_from", &copy_from},
                               detail::Arg{"first", &first}})
    detail::check_dtype(op, a.name, *a.t, DType::i32);
  detail::check_shape(op, "copy_from", copy_from, slots.shape());
  detail::check_shape(op, "first", first, Shape{1});
  detail::require(slots.ndim() == 1, op,
                  [&] { return detail::arg_str("slots", slots) + ": expected [N]"; });
  if (caches.empty()) return;
  const Tensor& c0 = caches[0];
  detail::require(c0.ndim() == 3, op,
                  [&] { return detail::arg_str("caches[0]", c0) + ": expected [S, T, D]"; });
  for (const Tensor& c : caches) {
    detail::require(detail::check_args(op, {{"cache", &c}}) == dev, op, "caches on another device");
    detail::require(c.shape() == c0.shape() && c.dtype() == c0.dtype(), op, [&] {
      return detail::arg_str("cache", c) + ": every cache must be " + detail::tensor_str(c0);
    });
  }
  detail::require(end >= 0 && end <= c0.dim(1), op, [&] {
    return "end " + std::to_string(end) + " outside [0, " + std::to_string(c0.dim(1)) + "]";
  });
  if (slots.numel() == 0 || end == 0) return;
  if (dev == Device::cuda)
    cuda::copy_slot_rows(caches, slots, copy_from, first, end);
  else
    cpu::copy_slot_rows(caches, slots, copy_from, first, end);
}

}  // namespace parley
