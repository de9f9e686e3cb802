#include "io/onnx.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include "io/io_util.h"
#include "io/mapped_file.h"
#include "io/protobuf.h"

namespace parley::io {

namespace {

// Field numbers from onnx/onnx.proto (IR version 10+; older files use a subset).
namespace model_field {
constexpr uint32_t kIrVersion = 1, kProducerName = 2, kProducerVersion = 3, kDomain = 4,
                   kModelVersion = 5, kDocString = 6, kGraph = 7, kOpsetImport = 8,
                   kMetadataProps = 14;
}
namespace graph_field {
constexpr uint32_t kNode = 1, kName = 2, kInitializer = 5;
}
namespace node_field {
constexpr uint32_t kOutput = 2, kName = 3, kOpType = 4, kAttribute = 5, kDomain = 7;
}
namespace attr_field {
constexpr uint32_t kName = 1, kF = 2, kI = 3, kT = 5, kG = 6, kFloats = 7, kInts = 8, kGraphs = 11;
}
namespace tensor_field {
constexpr uint32_t kDims = 1, kDataType = 2, kSegment = 3, kFloatData = 4, kInt32Data = 5,
                   kStringData = 6, kInt64Data = 7, kName = 8, kRawData = 9, kDoubleData = 10,
                   kUint64Data = 11, kExternalData = 13, kDataLocation = 14;
}

// The TensorProto.DataType values that become parley tensors (type_name() has them all).
enum OnnxType : int64_t {
  kFloat = 1,
  kInt8 = 3,
  kInt32 = 6,
  kInt64 = 7,
  kFloat16 = 10,
  kBfloat16 = 16
};
constexpr int64_t kDataLocationExternal = 1;

std::string type_name(int64_t t) {
  static constexpr const char* kNames[] = {
      "UNDEFINED",      "FLOAT",      "UINT8",          "INT8",       "UINT16",    "INT16",
      "INT32",          "INT64",      "STRING",         "BOOL",       "FLOAT16",   "DOUBLE",
      "UINT32",         "UINT64",     "COMPLEX64",      "COMPLEX128", "BFLOAT16",  "FLOAT8E4M3FN",
      "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4",      "INT4",      "FLOAT4E2M1",
      "FLOAT8E8M0",     "UINT2",      "INT2",           "FLOAT6E2M3", "FLOAT6E3M2"};
  if (t >= 0 && t < int64_t(std::size(kNames))) return kNames[t];
  return "type " + std::to_string(t);
}

std::string dims_str(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// A TensorProto as read from the wire, before it becomes a Tensor.
struct TensorFields {
  std::vector<int64_t> dims;
  int64_t data_type = 0;
  std::string name;
  bool has_raw = false;
  std::span<const uint8_t> raw;
  std::vector<uint32_t> float_data;  // IEEE bits
  std::vector<uint64_t> int32_data;  // varints: int32 sign-extended, or 16-bit float bits
  std::vector<uint64_t> int64_data;
  bool other_typed = false;  // string_data, double_data or uint64_data present
  bool external = false;
  bool segmented = false;
};

// One attribute of a node, as much of it as the weight reader needs.
struct AttributeFields {
  std::string name;
  bool has_t = false, has_f = false, has_i = false;
  ProtoField t;                    // TensorProto
  std::vector<ProtoField> graphs;  // g, then graphs[] in order
  bool single_graph = false;       // graphs[0] came from `g`
  float f = 0;
  int64_t i = 0;
  std::vector<uint32_t> floats;  // IEEE bits
  std::vector<uint64_t> ints;
};

class Parser {
 public:
  Parser(OnnxModel& out, std::shared_ptr<const void> owner) : out_(out), owner_(std::move(owner)) {}

  void model(ProtoReader r);

 private:
  void graph(ProtoReader r, const std::string& scope);
  void node(ProtoReader r, const std::string& scope, size_t index);
  AttributeFields attribute(ProtoReader r);
  TensorFields tensor_fields(ProtoReader r);
  void add_tensor(const ProtoReader& at, const std::string& key, const TensorFields& t);
  void claim(const ProtoReader& at, const std::string& key);
  Shape shape_of(const ProtoReader& at, const std::string& key, const std::vector<int64_t>& dims,
                 size_t elem_size, int64_t& numel);

  OnnxModel& out_;
  std::shared_ptr<const void> owner_;
};

void Parser::model(ProtoReader r) {
  ProtoField f;
  bool has_graph = false;
  while (r.next(f)) {
    switch (f.number) {
      case model_field::kIrVersion: out_.ir_version = r.as_int64(f, "ir_version"); break;
      case model_field::kProducerName: out_.producer_name = r.as_string(f, "producer_name"); break;
      case model_field::kProducerVersion:
        out_.producer_version = r.as_string(f, "producer_version");
        break;
      case model_field::kDomain: out_.domain = r.as_string(f, "domain"); break;
      case model_field::kModelVersion: out_.model_version = r.as_int64(f, "model_version"); break;
      case model_field::kDocString: out_.doc_string = r.as_string(f, "doc_string"); break;
      case model_field::kGraph:
        has_graph = true;
        graph(r.child(f, "GraphProto"), "");
        break;
      case model_field::kOpsetImport: {
        ProtoReader o = r.child(f, "OperatorSetIdProto");
        std::string domain;
        int64_t version = 0;
        ProtoField g;
        while (o.next(g)) {
          if (g.number == 1) domain = o.as_string(g, "domain");
          if (g.number == 2) version = o.as_int64(g, "version");
        }
        out_.opsets[domain] = version;
        break;
      }
      case model_field::kMetadataProps: {
        ProtoReader e = r.child(f, "StringStringEntryProto");
        std::string key, value;
        ProtoField g;
        while (e.next(g)) {
          if (g.number == 1) key = e.as_string(g, "key");
          if (g.number == 2) value = e.as_string(g, "value");
        }
        out_.metadata[key] = value;
        break;
      }
      default: break;  // training_info, functions, ...: no weights we serve
    }
  }
  if (!has_graph) r.fail("no graph (field 7): not an ONNX model");
}

void Parser::graph(ProtoReader r, const std::string& scope) {
  ProtoField f;
  size_t node_index = 0;
  while (r.next(f)) {
    if (f.number == graph_field::kName) {
      if (scope.empty()) out_.graph_name = r.as_string(f, "name");
    } else if (f.number == graph_field::kInitializer) {
      ProtoReader t = r.child(f, "TensorProto");
      TensorFields tf = tensor_fields(t);
      if (tf.name.empty()) t.fail("initializer without a name");
      add_tensor(t, scope + tf.name, tf);
    } else if (f.number == graph_field::kNode) {
      node(r.child(f, "NodeProto"), scope, node_index++);
    }
  }
}

void Parser::node(ProtoReader r, const std::string& scope, size_t index) {
  std::string name, op_type, domain, output;
  std::vector<ProtoField> attributes;
  ProtoField f;
  while (r.next(f)) {
    switch (f.number) {
      case node_field::kOutput:
        if (output.empty()) output = r.as_string(f, "output");
        break;
      case node_field::kName: name = r.as_string(f, "name"); break;
      case node_field::kOpType: op_type = r.as_string(f, "op_type"); break;
      case node_field::kDomain: domain = r.as_string(f, "domain"); break;
      case node_field::kAttribute: attributes.push_back(f); break;
      default: break;
    }
  }
  const std::string label = name.empty() ? op_type + "#" + std::to_string(index) : name;
  const bool is_constant = op_type == "Constant" && (domain.empty() || domain == "ai.onnx");
  for (const ProtoField& af : attributes) {
    ProtoReader ar = r.child(af, "AttributeProto");
    const AttributeFields a = attribute(ar);
    for (size_t i = 0; i < a.graphs.size(); ++i) {
      const std::string sub = a.single_graph && i == 0
                                  ? label + "." + a.name + "/"
                                  : label + "." + a.name + "[" + std::to_string(i) + "]/";
      graph(ar.child(a.graphs[i], "GraphProto"), scope + sub);
    }
    if (!is_constant) continue;
    // A Constant's value: its tensor's own name, else the name the graph knows it by.
    if (output.empty()) r.fail("Constant node '" + label + "' has no output");
    const std::string key = scope + output;
    if (a.name == "value") {
      if (!a.has_t) ar.fail("Constant '" + label + "': attribute 'value' holds no tensor");
      ProtoReader t = ar.child(a.t, "TensorProto");
      TensorFields tf = tensor_fields(t);
      add_tensor(t, tf.name.empty() ? key : scope + tf.name, tf);
    } else if (a.name == "value_float" || a.name == "value_floats") {
      TensorFields tf;
      tf.data_type = kFloat;
      tf.float_data = a.floats;
      if (a.name == "value_float") {
        if (!a.has_f) ar.fail("Constant '" + label + "': attribute 'value_float' holds no float");
        tf.float_data.assign(1, std::bit_cast<uint32_t>(a.f));
      } else {
        tf.dims.push_back(int64_t(tf.float_data.size()));
      }
      add_tensor(ar, key, tf);
    } else if (a.name == "value_int" || a.name == "value_ints") {
      TensorFields tf;
      tf.data_type = kInt64;
      tf.int64_data = a.ints;
      if (a.name == "value_int") {
        if (!a.has_i) ar.fail("Constant '" + label + "': attribute 'value_int' holds no int");
        tf.int64_data.assign(1, uint64_t(a.i));
      } else {
        tf.dims.push_back(int64_t(tf.int64_data.size()));
      }
      add_tensor(ar, key, tf);
    } else if (a.name == "value_string" || a.name == "value_strings") {
      claim(ar, key);
      out_.skipped[key] = "a string constant";
    } else if (a.name == "sparse_value") {
      claim(ar, key);
      out_.skipped[key] = "a sparse tensor";
    }
  }
}

AttributeFields Parser::attribute(ProtoReader r) {
  AttributeFields a;
  ProtoField f;
  ProtoField g;
  bool has_g = false;
  std::vector<ProtoField> graphs;
  while (r.next(f)) {
    switch (f.number) {
      case attr_field::kName: a.name = r.as_string(f, "name"); break;
      case attr_field::kF:
        a.f = r.as_float(f, "f");
        a.has_f = true;
        break;
      case attr_field::kI:
        a.i = r.as_int64(f, "i");
        a.has_i = true;
        break;
      case attr_field::kT:
        r.child(f, "TensorProto");  // checks the wire type and depth now
        a.t = f;
        a.has_t = true;
        break;
      case attr_field::kG:
        r.child(f, "GraphProto");
        g = f;
        has_g = true;
        break;
      case attr_field::kGraphs:
        r.child(f, "GraphProto");
        graphs.push_back(f);
        break;
      case attr_field::kFloats: r.append_fixed32(f, "floats", a.floats); break;
      case attr_field::kInts: r.append_varints(f, "ints", a.ints); break;
      default: break;  // s, strings, sparse_tensor, type protos: not weights
    }
  }
  if (has_g) {
    a.graphs.push_back(g);
    a.single_graph = true;
  }
  a.graphs.insert(a.graphs.end(), graphs.begin(), graphs.end());
  return a;
}

TensorFields Parser::tensor_fields(ProtoReader r) {
  TensorFields t;
  std::vector<uint64_t> dims;
  ProtoField f;
  while (r.next(f)) {
    switch (f.number) {
      case tensor_field::kDims: r.append_varints(f, "dims", dims); break;
      case tensor_field::kDataType: t.data_type = r.as_int64(f, "data_type"); break;
      case tensor_field::kSegment: t.segmented = true; break;
      case tensor_field::kFloatData: r.append_fixed32(f, "float_data", t.float_data); break;
      case tensor_field::kInt32Data: r.append_varints(f, "int32_data", t.int32_data); break;
      case tensor_field::kInt64Data: r.append_varints(f, "int64_data", t.int64_data); break;
      case tensor_field::kName: t.name = r.as_string(f, "name"); break;
      case tensor_field::kRawData:
        t.raw = r.as_bytes(f, "raw_data");
        t.has_raw = true;
        break;
      case tensor_field::kStringData:
      case tensor_field::kDoubleData:
      case tensor_field::kUint64Data: t.other_typed = true; break;
      case tensor_field::kExternalData: t.external = true; break;
      case tensor_field::kDataLocation:
        if (r.as_int64(f, "data_location") == kDataLocationExternal) t.external = true;
        break;
      default: break;
    }
  }
  t.dims.reserve(dims.size());
  for (uint64_t d : dims) t.dims.push_back(int64_t(d));
  return t;
}

void Parser::claim(const ProtoReader& at, const std::string& key) {
  if (out_.tensors.contains(key) || out_.int64_tensors.count(key) || out_.skipped.count(key))
    at.fail("duplicate tensor name '" + key + "'");
}

Shape Parser::shape_of(const ProtoReader& at, const std::string& key,
                       const std::vector<int64_t>& dims, size_t elem_size, int64_t& numel) {
  // Zeros count as 1 in the size bound: a shape with a zero dim holds no data, but
  // Tensor still refuses absurd sizes for it.
  constexpr uint64_t kMaxBytes = uint64_t(1) << 40;  // Tensor's own limit
  uint64_t bytes = elem_size;
  bool ok = true;
  for (int64_t d : dims) {
    const uint64_t x = d > 1 ? uint64_t(d) : 1;
    ok = ok && d >= 0 && bytes <= kMaxBytes / x;
    if (ok) bytes *= x;
  }
  const auto n = checked_numel(dims);
  if (!ok || !n) at.fail("tensor '" + key + "' has an impossible shape " + dims_str(dims));
  numel = *n;
  return Shape(dims.begin(), dims.end());
}

void Parser::add_tensor(const ProtoReader& at, const std::string& key, const TensorFields& t) {
  claim(at, key);
  const std::string what = "tensor '" + key + "'";
  if (t.external)
    throw Error(ErrorKind::unsupported, out_.source + ": " + what +
                                            " keeps its data in an external file; only "
                                            "self-contained ONNX files are supported");
  if (t.segmented) throw Error(ErrorKind::unsupported, out_.source + ": " + what + " is segmented");
  if (t.data_type == 0) at.fail(what + " has no data_type");
  if (int64_t(t.dims.size()) > Shape::kMaxDims) {
    out_.skipped[key] = "rank " + std::to_string(t.dims.size()) + " (at most " +
                        std::to_string(Shape::kMaxDims) + " dimensions)";
    return;
  }
  DType dtype = DType::f32;
  switch (t.data_type) {
    case kFloat: dtype = DType::f32; break;
    case kFloat16: dtype = DType::f16; break;
    case kBfloat16: dtype = DType::bf16; break;
    case kInt32: dtype = DType::i32; break;
    case kInt8: dtype = DType::i8; break;
    case kInt64: break;
    default: out_.skipped[key] = "data type " + type_name(t.data_type); return;
  }
  const bool int64 = t.data_type == kInt64;
  const size_t elem = int64 ? 8 : dtype_size(dtype);
  int64_t numel = 0;
  const Shape shape = shape_of(at, key, t.dims, elem, numel);

  // Exactly one place holds the values: raw_data, or the typed field for the type.
  const bool fp = t.data_type == kFloat;
  const bool via_int32 = !fp && !int64;  // INT32, INT8, FLOAT16, BFLOAT16 use int32_data
  const size_t typed = t.float_data.size() + t.int32_data.size() + t.int64_data.size();
  if (t.has_raw && (typed || t.other_typed)) at.fail(what + " has both raw_data and typed data");
  if ((!t.float_data.empty() && !fp) || (!t.int32_data.empty() && !via_int32) ||
      (!t.int64_data.empty() && !int64) || t.other_typed)
    at.fail(what + " stores " + type_name(t.data_type) + " values in the wrong typed field");
  const size_t count = t.has_raw ? t.raw.size() / elem : typed;
  if ((t.has_raw && t.raw.size() % elem) || count != uint64_t(numel))
    at.fail(
        what + " of type " + type_name(t.data_type) + " and shape " + dims_str(t.dims) + " needs " +
        std::to_string(numel) + " values, the file holds " +
        (t.has_raw ? std::to_string(t.raw.size()) + " bytes" : std::to_string(typed) + " values"));

  if (int64) {
    OnnxInt64Tensor v{shape, std::vector<int64_t>(size_t(numel))};
    if (t.has_raw && numel) std::memcpy(v.values.data(), t.raw.data(), t.raw.size());
    for (size_t i = 0; i < t.int64_data.size(); ++i) v.values[i] = int64_t(t.int64_data[i]);
    out_.int64_tensors.emplace(key, std::move(v));
    return;
  }
  if (t.has_raw) {
    out_.tensors.insert(out_.source, key, view_or_copy(t.raw.data(), shape, dtype, owner_));
    return;
  }
  Tensor out = Tensor::empty(shape, dtype, Device::cpu);
  if (fp) {
    if (numel) std::memcpy(out.raw(), t.float_data.data(), size_t(numel) * 4);
  } else {
    // int32_data holds int32 values sign-extended to 64 bits, or 16-bit float bits.
    int64_t lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max();
    if (dtype == DType::i8) lo = -128, hi = 127;
    if (dtype == DType::f16 || dtype == DType::bf16) lo = 0, hi = 0xffff;
    for (size_t i = 0; i < t.int32_data.size(); ++i) {
      const int64_t v = int64_t(t.int32_data[i]);
      if (v < lo || v > hi)
        at.fail(what + ": int32_data value " + std::to_string(v) + " is out of range for " +
                type_name(t.data_type));
      if (dtype == DType::i32)
        out.data<int32_t>()[i] = int32_t(v);
      else if (dtype == DType::i8)
        out.data<int8_t>()[i] = int8_t(v);
      else
        out.data<uint16_t>()[i] = uint16_t(v);
    }
  }
  out_.tensors.insert(out_.source, key, std::move(out));
}

}  // namespace

const Tensor& OnnxModel::tensor(const std::string& key) const {
  if (int64_tensors.count(key))
    throw Error(ErrorKind::unsupported,
                source + ": tensor '" + key + "' is INT64; read it from int64_tensors");
  if (auto it = skipped.find(key); it != skipped.end())
    throw Error(ErrorKind::unsupported,
                source + ": tensor '" + key + "' is " + it->second + ", which parley cannot hold");
  return tensors.at(source, key);
}

int64_t OnnxModel::opset(const std::string& d) const {
  auto it = opsets.find(d == "ai.onnx" ? "" : d);
  return it == opsets.end() ? 0 : it->second;
}

OnnxModel parse_onnx(std::span<const uint8_t> bytes, const std::string& name,
                     std::shared_ptr<const void> owner) {
  OnnxModel m;
  m.source = "[onnx] " + name;
  Parser(m, std::move(owner)).model(ProtoReader(bytes, m.source, "ModelProto"));
  return m;
}

OnnxModel read_onnx(const std::string& path) {
  auto file = MappedFile::open(path);
  return parse_onnx(file->bytes(), path, file);
}

}  // namespace parley::io
