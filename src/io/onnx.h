// Reads the weights of an ONNX model (ModelProto) without libprotobuf: top-level and
// subgraph initializers, and the tensors held by Constant nodes, wherever they sit in
// the graph (Silero VAD keeps all its weights as Constant nodes inside the two branches
// of an If node, one per sample rate). Also returns the model's metadata.
//
// Naming. A tensor is keyed by its own name (TensorProto.name; for a Constant without
// one, the node's output name). Tensors inside a subgraph get the path of the node
// attributes that lead to it, one "<node name>.<attribute>/" per level, because both
// branches of an If commonly hold tensors of the same name:
//   "If_0.then_branch/encoder.0.reparam_conv.weight"   (Silero VAD, 16 kHz branch)
// A node without a name is written "<op_type>#<index in its graph>". Two tensors with
// the same key are an error.
//
// Element types. FLOAT, FLOAT16, BFLOAT16, INT32 and INT8 become parley Tensors:
// raw_data is a zero-copy view of the file when it is aligned to its element size,
// otherwise (and for the typed float_data / int32_data fields) an owned copy. INT64
// tensors (shape constants, which may hold INT64_MAX) go to int64_tensors as values,
// not narrowed. Every other type (DOUBLE, BOOL, UINT8, STRING, ...) is listed in
// `skipped` with the reason; tensor() on such a name throws unsupported. External data
// (data_location EXTERNAL) is rejected with ErrorKind::unsupported.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "io/tensor_map.h"

namespace parley::io {

struct OnnxInt64Tensor {
  Shape shape;
  std::vector<int64_t> values;  // row-major, shape.numel() values
};

struct OnnxModel {
  std::string source;  // "[onnx] path", the prefix of error messages
  int64_t ir_version = 0;
  std::map<std::string, int64_t> opsets;  // operator set domain ("" is ai.onnx) -> version
  std::string producer_name;
  std::string producer_version;
  std::string domain;
  int64_t model_version = 0;
  std::string doc_string;
  std::string graph_name;
  std::map<std::string, std::string> metadata;  // ModelProto.metadata_props

  TensorMap tensors;                                     // f32, f16, bf16, i32, i8
  std::map<std::string, OnnxInt64Tensor> int64_tensors;  // INT64
  std::map<std::string, std::string> skipped;            // key -> why it has no Tensor

  // The tensor `key`; throws not_found, or unsupported for an INT64 or skipped tensor.
  const Tensor& tensor(const std::string& key) const;
  // The opset version of `domain`, or 0 when the model does not import it.
  int64_t opset(const std::string& domain = "") const;
};

// Maps `path` and reads it. Tensors keep the mapping alive.
OnnxModel read_onnx(const std::string& path);

// Parses a model held in memory; `name` names it in errors. Views into `bytes` keep
// `owner` alive; with a null owner the caller keeps `bytes` alive as long as the tensors.
OnnxModel parse_onnx(std::span<const uint8_t> bytes, const std::string& name,
                     std::shared_ptr<const void> owner = nullptr);

}  // namespace parley::io
