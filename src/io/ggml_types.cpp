#include "io/ggml_types.h"

#include <cstring>

namespace parley::io {

namespace {

struct Row {
  uint32_t id;
  GgmlTypeInfo info;
};

// Block layouts from ggml-common.h: e.g. block_q4_K = 2 f16 + 12 scale bytes + 128 nibble
// bytes = 144 bytes per 256 values.
constexpr Row kTypes[] = {
    {0, {"f32", 1, 4}},         {1, {"f16", 1, 2}},         {2, {"q4_0", 32, 18}},
    {3, {"q4_1", 32, 20}},      {6, {"q5_0", 32, 22}},      {7, {"q5_1", 32, 24}},
    {8, {"q8_0", 32, 34}},      {9, {"q8_1", 32, 36}},      {10, {"q2_K", 256, 84}},
    {11, {"q3_K", 256, 110}},   {12, {"q4_K", 256, 144}},   {13, {"q5_K", 256, 176}},
    {14, {"q6_K", 256, 210}},   {15, {"q8_K", 256, 292}},   {16, {"iq2_xxs", 256, 66}},
    {17, {"iq2_xs", 256, 74}},  {18, {"iq3_xxs", 256, 98}}, {19, {"iq1_s", 256, 50}},
    {20, {"iq4_nl", 32, 18}},   {21, {"iq3_s", 256, 110}},  {22, {"iq2_s", 256, 82}},
    {23, {"iq4_xs", 256, 136}}, {24, {"i8", 1, 1}},         {25, {"i16", 1, 2}},
    {26, {"i32", 1, 4}},        {27, {"i64", 1, 8}},        {28, {"f64", 1, 8}},
    {29, {"iq1_m", 256, 56}},   {30, {"bf16", 1, 2}},       {34, {"tq1_0", 256, 54}},
    {35, {"tq2_0", 256, 66}},   {39, {"mxfp4", 32, 17}},
};

}  // namespace

std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id) {
  for (const Row& r : kTypes)
    if (r.id == id) return r.info;
  return std::nullopt;
}

std::string ggml_type_name(uint32_t id) {
  const auto info = ggml_type_info(id);
  return info ? info->name : "type " + std::to_string(id);
}

std::optional<DType> ggml_type_dtype(uint32_t id) {
  switch (GgmlType(id)) {
    case GgmlType::f32: return DType::f32;
    case GgmlType::f16: return DType::f16;
    case GgmlType::bf16: return DType::bf16;
    case GgmlType::i8: return DType::i8;
    case GgmlType::i32: return DType::i32;
    default: return std::nullopt;
  }
}

namespace {

// The QuantType of `type` and the [rows, cols] that `shape` makes, checked against blocks.
QuantMatrix checked_matrix(std::string_view op, uint32_t type, const Shape& shape,
                           std::span<const uint8_t> blocks, std::shared_ptr<const void> owner) {
  const auto t = quant_type_from_ggml(type);
  check(
      t.has_value(), ErrorKind::unsupported,
      "[" + std::string(op) + "] ggml type " + ggml_type_name(type) +
          " is not a supported block-quantized type (q4_0, q4_1, q5_0, q5_1, q8_0, q2_K .. q6_K)");
  check_arg(shape.ndim() >= 1, "[" + std::string(op) + "] shape " + shape.str() + " has no dims");
  const int64_t cols = shape[-1];
  const int64_t rows = cols == 0 ? 0 : shape.numel() / cols;
  return quant_matrix(*t, rows, cols, blocks.data(), int64_t(blocks.size()), std::move(owner),
                      Device::cpu, op);
}

}  // namespace

Tensor dequantize_ggml(uint32_t type, std::span<const uint8_t> blocks, const Shape& shape) {
  const std::string op = "dequantize " + ggml_type_name(type);
  const QuantMatrix m = checked_matrix(op, type, shape, blocks, nullptr);
  Tensor out = Tensor::empty(shape, DType::f32);
  dequantize_blocks(m.type, m.data, m.nbytes() / quant_format(m.type).block_bytes,
                    out.data<float>());
  return out;
}

QuantMatrix ggml_quant_matrix(uint32_t type, const Shape& shape, std::span<const uint8_t> blocks,
                              std::shared_ptr<const void> owner) {
  return checked_matrix("ggml_quant_matrix", type, shape, blocks, std::move(owner));
}

Tensor dequantize_q8_0(std::span<const uint8_t> blocks, const Shape& shape) {
  const auto n_blocks = int64_t(blocks.size() / kQ8_0BlockBytes);
  check_arg(blocks.size() % kQ8_0BlockBytes == 0 && shape.numel() == n_blocks * kQ8_0BlockSize,
            "[q8_0] " + std::to_string(blocks.size()) + " bytes of blocks do not hold shape " +
                shape.str());
  Tensor out = Tensor::empty(shape, DType::f32);
  dequantize_blocks(QuantType::q8_0, blocks.data(), n_blocks, out.data<float>());
  return out;
}

}  // namespace parley::io
