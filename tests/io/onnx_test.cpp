// Tests of the ONNX weight reader and the protobuf wire reader under it: synthetic models
// written here with a tiny protobuf writer (valid and malformed), then the real Silero
// VAD files (v6.2 and v5.1.2) against values read with Python's onnx package and the
// safetensors export shipped beside v6.2.
#include "io/onnx.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/error.h"
#include "io/protobuf.h"
#include "io/safetensors.h"

namespace parley::io {
namespace {

// Writes protobuf wire format: enough of it to build ONNX models by hand.
struct Pb {
  std::vector<uint8_t> b;

  Pb& varint(uint64_t v) {
    do {
      b.push_back(uint8_t((v & 0x7f) | (v > 0x7f ? 0x80 : 0)));
      v >>= 7;
    } while (v);
    return *this;
  }
  Pb& tag(uint32_t field, uint32_t wire) { return varint(uint64_t(field) << 3 | wire); }
  Pb& u(uint32_t field, uint64_t v) { return tag(field, 0).varint(v); }
  Pb& i(uint32_t field, int64_t v) { return u(field, uint64_t(v)); }
  Pb& str(uint32_t field, const std::string& s) {
    tag(field, 2).varint(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Pb& bytes(uint32_t field, const void* p, size_t n) {
    return str(field, std::string(static_cast<const char*>(p), n));
  }
  Pb& msg(uint32_t field, const Pb& m) { return bytes(field, m.b.data(), m.b.size()); }
  Pb& f32(uint32_t field, float x) {
    tag(field, 5);
    const uint32_t bits = std::bit_cast<uint32_t>(x);
    for (int k = 0; k < 4; ++k) b.push_back(uint8_t(bits >> (8 * k)));
    return *this;
  }
  Pb& packed_floats(uint32_t field, const std::vector<float>& v) {
    Pb p;
    for (float x : v) {
      const uint32_t bits = std::bit_cast<uint32_t>(x);
      for (int k = 0; k < 4; ++k) p.b.push_back(uint8_t(bits >> (8 * k)));
    }
    return msg(field, p);
  }
  Pb& packed_varints(uint32_t field, const std::vector<int64_t>& v) {
    Pb p;
    for (int64_t x : v) p.varint(uint64_t(x));
    return msg(field, p);
  }
};

// TensorProto helpers (field numbers from onnx.proto).
Pb tensor(const std::string& name, int type, const std::vector<int64_t>& dims) {
  Pb t;
  for (int64_t d : dims) t.i(1, d);  // unpacked dims, as older exporters write them
  t.i(2, type);
  if (!name.empty()) t.str(8, name);
  return t;
}
Pb constant_node(const std::string& output, const Pb& value, const std::string& name = "") {
  Pb n;
  n.str(2, output);
  if (!name.empty()) n.str(3, name);
  n.str(4, "Constant");
  return n.msg(5, Pb().str(1, "value").msg(5, value).i(20, 4));
}
Pb graph_attribute(const std::string& name, const Pb& graph) {
  return Pb().str(1, name).msg(6, graph).i(20, 5);
}
// A ModelProto with its graph written last, so that every truncation cuts the graph.
std::vector<uint8_t> model(const Pb& graph) {
  Pb m;
  m.i(1, 8);
  m.msg(8, Pb().str(1, "").i(2, 17));
  m.str(2, "parley-test");
  m.str(3, "1.0");
  m.msg(14, Pb().str(1, "version").str(2, "6.2"));
  m.msg(7, graph);
  return m.b;
}

const float kW[4] = {1.0f, -2.5f, 3.0f, 0.125f};

std::vector<uint8_t> synthetic_model() {
  Pb g;
  g.str(2, "main");
  // An initializer with raw_data and one with packed float_data.
  g.msg(5, tensor("W", 1, {2, 2}).bytes(9, kW, sizeof(kW)));
  g.msg(5, tensor("B", 1, {2}).packed_floats(4, {0.5f, -0.75f}));
  g.msg(5, tensor("D", 11, {1}).bytes(9, "\0\0\0\0\0\0\xf0\x3f", 8));  // DOUBLE: skipped
  // Constants: an unnamed INT64 tensor (keyed by its output), INT8 and FLOAT16 through
  // int32_data, value_floats and value_int.
  g.msg(1, constant_node("shape_out", tensor("", 7, {2}).packed_varints(7, {3, -1})));
  g.msg(1, constant_node("q_out", tensor("q", 3, {3}).packed_varints(5, {-128, 0, 127})));
  g.msg(1, constant_node("h_out", tensor("h", 10, {2}).packed_varints(5, {0x3c00, 0xc000})));
  Pb vf;
  vf.str(2, "vf_out").str(4, "Constant");
  vf.msg(5, Pb().str(1, "value_floats").f32(7, 1.5f).f32(7, 2.5f).i(20, 6));
  g.msg(1, vf);
  Pb vi;
  vi.str(2, "vi_out").str(4, "Constant");
  vi.msg(5, Pb().str(1, "value_int").i(3, -7).i(20, 2));
  g.msg(1, vi);
  // An If whose branches hold tensors of the same name, and an unnamed node.
  Pb then_g, else_g;
  then_g.str(2, "then").msg(1, constant_node("t_w", tensor("w", 1, {1}).f32(4, 16.0f)));
  else_g.str(2, "else").msg(1, constant_node("e_w", tensor("w", 1, {1}).f32(4, 8.0f)));
  Pb iff;
  iff.str(1, "cond").str(2, "y").str(3, "if0").str(4, "If");
  iff.msg(5, graph_attribute("then_branch", then_g));
  iff.msg(5, graph_attribute("else_branch", else_g));
  g.msg(1, iff);
  Pb anon;
  anon.str(2, "z").str(4, "Loop");
  anon.msg(5, graph_attribute("body", Pb().msg(5, tensor("lw", 6, {1}).packed_varints(5, {42}))));
  g.msg(1, anon);
  // A node that is not a Constant: its tensor attribute is not a weight.
  Pb cos;
  cos.str(2, "cos_out").str(4, "ConstantOfShape");
  cos.msg(5, Pb().str(1, "value").msg(5, tensor("", 1, {1}).f32(4, 0.0f)).i(20, 4));
  g.msg(1, cos);
  return model(g);
}

OnnxModel parse(const std::vector<uint8_t>& b, const std::string& name = "test.onnx") {
  return parse_onnx(b, name);
}

template <typename Fn>
void expect_error(Fn&& fn, ErrorKind kind, std::vector<std::string> needles) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one containing '" << needles.front() << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    for (const auto& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
          << "message '" << e.what() << "' lacks '" << n << "'";
  }
}

TEST(OnnxTest, ParsesSyntheticModel) {
  const auto bytes = synthetic_model();
  const OnnxModel m = parse(bytes);
  EXPECT_EQ(m.ir_version, 8);
  EXPECT_EQ(m.opset(), 17);
  EXPECT_EQ(m.opset("ai.onnx"), 17);
  EXPECT_EQ(m.opset("com.microsoft"), 0);
  EXPECT_EQ(m.producer_name, "parley-test");
  EXPECT_EQ(m.producer_version, "1.0");
  EXPECT_EQ(m.graph_name, "main");
  EXPECT_EQ(m.metadata.at("version"), "6.2");

  const Tensor& w = m.tensor("W");
  EXPECT_EQ(w.shape(), Shape({2, 2}));
  EXPECT_EQ(w.dtype(), DType::f32);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(w.data<float>()[k], kW[k]);
  EXPECT_EQ(m.tensor("B").data<float>()[1], -0.75f);

  const Tensor& q = m.tensor("q");
  EXPECT_EQ(q.dtype(), DType::i8);
  EXPECT_EQ(q.data<int8_t>()[0], -128);
  EXPECT_EQ(q.data<int8_t>()[2], 127);
  const Tensor& h = m.tensor("h");
  EXPECT_EQ(h.dtype(), DType::f16);
  EXPECT_EQ(f16_to_f32(h.data<uint16_t>()[1]), -2.0f);
  EXPECT_EQ(m.tensor("vf_out").shape(), Shape({2}));
  EXPECT_EQ(m.tensor("vf_out").data<float>()[1], 2.5f);

  ASSERT_EQ(m.int64_tensors.count("shape_out"), 1u);
  EXPECT_EQ(m.int64_tensors.at("shape_out").values, (std::vector<int64_t>{3, -1}));
  EXPECT_EQ(m.int64_tensors.at("vi_out").shape.ndim(), 0);
  EXPECT_EQ(m.int64_tensors.at("vi_out").values, (std::vector<int64_t>{-7}));

  // Same-named tensors in the two branches, told apart by their path.
  EXPECT_EQ(m.tensor("if0.then_branch/w").data<float>()[0], 16.0f);
  EXPECT_EQ(m.tensor("if0.else_branch/w").data<float>()[0], 8.0f);
  EXPECT_EQ(m.tensor("Loop#6.body/lw").data<int32_t>()[0], 42);

  EXPECT_EQ(m.tensors.size(), 8u);  // W B q h vf_out, w in each branch, lw; not cos_out
  EXPECT_FALSE(m.tensors.contains("cos_out"));
  EXPECT_EQ(m.skipped.at("D"), "data type DOUBLE");
  expect_error([&] { m.tensor("D"); }, ErrorKind::unsupported, {"test.onnx", "'D'", "DOUBLE"});
  expect_error([&] { m.tensor("shape_out"); }, ErrorKind::unsupported, {"INT64"});
  expect_error([&] { m.tensor("nope"); }, ErrorKind::not_found, {"test.onnx", "nope"});
}

TEST(OnnxTest, EveryTruncationThrowsNamingTheFile) {
  const auto full = synthetic_model();
  for (size_t cut = 0; cut < full.size(); ++cut) {
    const std::vector<uint8_t> part(full.begin(), full.begin() + long(cut));
    try {
      parse(part, "cut.onnx");
      ADD_FAILURE() << "cut at " << cut << " of " << full.size() << " parsed";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::invalid_argument) << e.what();
      EXPECT_NE(std::string(e.what()).find("[onnx] cut.onnx"), std::string::npos) << e.what();
    }
  }
}

std::vector<uint8_t> with_initializer(const Pb& t) { return model(Pb().msg(5, t)); }

TEST(OnnxTest, RejectsMalformedWireFormat) {
  const auto E = ErrorKind::invalid_argument;
  // ir_version as an 11-byte varint, and as a 10-byte one that overflows 64 bits.
  std::vector<uint8_t> b = {0x08};
  b.insert(b.end(), 10, 0xff);
  b.push_back(0x01);
  expect_error([&] { parse(b); }, E, {"test.onnx", "ModelProto", "varint longer than 10 bytes"});
  b = {0x08};
  b.insert(b.end(), 9, 0xff);
  b.push_back(0x02);
  expect_error([&] { parse(b); }, E, {"varint overflows 64 bits"});
  // A graph field claiming 1000 bytes with 3 present.
  b = {0x3a, 0xe8, 0x07, 0x0a, 0x00, 0x00};
  expect_error([&] { parse(b); }, E, {"field 7: length 1000 runs past the end"});
  expect_error([&] { parse({0x08}); }, E, {"varint runs past the end"});
  expect_error([&] { parse({0x0b, 0x0c}); }, E, {"group wire type 3"});
  expect_error([&] { parse({0x0e}); }, E, {"invalid wire type 6"});
  expect_error([&] { parse({0x00, 0x00}); }, E, {"invalid field number 0"});
  expect_error([&] { parse({0x0d, 1, 2}); }, E, {"fixed32 runs past the end"});
  // data_type sent length-delimited instead of as a varint.
  expect_error([&] { parse(with_initializer(Pb().str(8, "x").str(2, "a"))); }, E,
               {"TensorProto", "field 2 (data_type) has wire type length-delimited"});
  expect_error([&] { parse({0x08, 0x01}); }, E, {"no graph"});
}

TEST(OnnxTest, RejectsMalformedTensors) {
  const auto E = ErrorKind::invalid_argument;
  expect_error([&] { parse(with_initializer(tensor("x", 1, {3}).bytes(9, kW, 8))); }, E,
               {"test.onnx", "tensor 'x' of type FLOAT and shape [3] needs 3 values", "8 bytes"});
  expect_error([&] { parse(with_initializer(tensor("x", 1, {-1}).bytes(9, kW, 4))); }, E,
               {"tensor 'x' has an impossible shape [-1]"});
  expect_error(
      [&] {
        parse(with_initializer(tensor("x", 1, {0, int64_t(1) << 40, int64_t(1) << 40})));
      },
      E, {"impossible shape"});
  expect_error(
      [&] {
        parse(with_initializer(tensor("x", 1, {1ll << 62, 1ll << 62}).bytes(9, kW, 4)));
      },
      E, {"impossible shape"});
  expect_error([&] { parse(with_initializer(tensor("", 1, {1}).bytes(9, kW, 4))); }, E,
               {"initializer without a name"});
  expect_error([&] { parse(with_initializer(tensor("x", 0, {1}).bytes(9, kW, 4))); }, E,
               {"tensor 'x' has no data_type"});
  expect_error([&] { parse(with_initializer(tensor("x", 1, {2}))); }, E, {"needs 2 values"});
  expect_error([&] { parse(with_initializer(tensor("x", 1, {1}).bytes(9, kW, 4).f32(4, 1))); }, E,
               {"both raw_data and typed data"});
  expect_error([&] { parse(with_initializer(tensor("x", 6, {1}).f32(4, 1))); }, E,
               {"wrong typed field"});
  expect_error([&] { parse(with_initializer(tensor("x", 3, {1}).packed_varints(5, {200}))); }, E,
               {"int32_data value 200 is out of range for INT8"});
  expect_error([&] { parse(with_initializer(tensor("x", 6, {1}).packed_varints(5, {1ll << 40}))); },
               E, {"out of range for INT32"});
  expect_error([&] { parse(with_initializer(tensor("x", 1, {1}).msg(4, Pb().str(1, "abc")))); }, E,
               {"packed float_data of 5 bytes"});
  // Duplicates: two initializers, or an initializer and a Constant of the same name.
  Pb dup;
  dup.msg(5, tensor("x", 1, {1}).f32(4, 1)).msg(5, tensor("x", 1, {1}).f32(4, 2));
  expect_error([&] { parse(model(dup)); }, E, {"duplicate tensor name 'x'"});
  Pb dup2;
  dup2.msg(5, tensor("x", 1, {1}).f32(4, 1)).msg(1, constant_node("x", tensor("", 7, {})));
  expect_error([&] { parse(model(dup2)); }, E, {"duplicate tensor name 'x'"});
  // A rank-7 tensor is listed as skipped, not an error.
  EXPECT_EQ(
      parse(with_initializer(tensor("x", 1, {1, 1, 1, 1, 1, 1, 1}).f32(4, 1))).skipped.at("x"),
      "rank 7 (at most 6 dimensions)");
}

TEST(OnnxTest, RejectsExternalData) {
  Pb t = tensor("x", 1, {4});
  t.msg(13, Pb().str(1, "location").str(2, "weights.bin")).i(14, 1);
  expect_error([&] { parse(with_initializer(t)); }, ErrorKind::unsupported,
               {"test.onnx", "tensor 'x'", "external file"});
}

// A graph holding `levels` If nodes nested through their then_branch, the innermost
// holding one Constant.
Pb nested_graph(int levels) {
  Pb g = Pb().msg(1, constant_node("c", tensor("leaf", 1, {1}).f32(4, 3.0f)));
  for (int k = 0; k < levels; ++k) {
    Pb node;
    node.str(3, "n").str(4, "If").msg(5, graph_attribute("then_branch", g));
    g = Pb().msg(1, node);
  }
  return g;
}

TEST(OnnxTest, BoundsNesting) {
  // Each level is GraphProto > NodeProto > AttributeProto: 3 messages.
  const OnnxModel m = parse(model(nested_graph(20)));
  std::string key;
  for (int k = 0; k < 20; ++k) key += "n.then_branch/";
  EXPECT_EQ(m.tensor(key + "leaf").data<float>()[0], 3.0f);
  expect_error([&] { parse(model(nested_graph(40))); }, ErrorKind::invalid_argument,
               {"test.onnx", "nested deeper than 100"});
}

TEST(OnnxTest, ProtoReaderReadsPackedAndUnpackedForms) {
  Pb p;
  p.u(1, 5).packed_varints(1, {6, 300}).f32(2, 1.5f).packed_floats(2, {2.0f, -3.0f});
  ProtoReader r(p.b, "[test] buf", "Msg");
  std::vector<uint64_t> ints;
  std::vector<uint32_t> floats;
  ProtoField f;
  while (r.next(f)) {
    if (f.number == 1) r.append_varints(f, "ints", ints);
    if (f.number == 2) r.append_fixed32(f, "floats", floats);
  }
  EXPECT_EQ(ints, (std::vector<uint64_t>{5, 6, 300}));
  ASSERT_EQ(floats.size(), 3u);
  EXPECT_EQ(std::bit_cast<float>(floats[0]), 1.5f);
  EXPECT_EQ(std::bit_cast<float>(floats[2]), -3.0f);
}

// --- The real Silero VAD models. --------------------------------------------------------
// Expected names, shapes and values were read with Python's onnx package
// (numpy_helper.to_array on every Constant's tensor). Both files keep all weights as
// Constant nodes inside If_0's branches: then_branch runs at 16 kHz, else_branch at 8 kHz.

std::string vad_path(const std::string& file) {
  return std::string(PARLEY_TEST_DATA) + "/vad/" + file;
}

struct Weight {
  const char* name;
  Shape shape16k, shape8k;
};
const Weight kSileroWeights[] = {
    {"stft.forward_basis_buffer", {258, 1, 256}, {130, 1, 128}},
    {"encoder.0.reparam_conv.weight", {128, 129, 3}, {128, 65, 3}},
    {"encoder.0.reparam_conv.bias", {128}, {128}},
    {"encoder.1.reparam_conv.weight", {64, 128, 3}, {64, 128, 3}},
    {"encoder.1.reparam_conv.bias", {64}, {64}},
    {"encoder.2.reparam_conv.weight", {64, 64, 3}, {64, 64, 3}},
    {"encoder.2.reparam_conv.bias", {64}, {64}},
    {"encoder.3.reparam_conv.weight", {128, 64, 3}, {128, 64, 3}},
    {"encoder.3.reparam_conv.bias", {128}, {128}},
    {"decoder.rnn.weight_ih", {512, 128}, {512, 128}},
    {"decoder.rnn.weight_hh", {512, 128}, {512, 128}},
    {"decoder.rnn.bias_ih", {512}, {512}},
    {"decoder.rnn.bias_hh", {512}, {512}},
    {"decoder.decoder.2.weight", {1, 128, 1}, {1, 128, 1}},
    {"decoder.decoder.2.bias", {1}, {1}},
};

uint32_t bits_at(const Tensor& t, int64_t i) { return std::bit_cast<uint32_t>(t.data<float>()[i]); }

void expect_silero_layout(const OnnxModel& m) {
  EXPECT_EQ(m.ir_version, 8);
  EXPECT_EQ(m.opset(), 16);
  EXPECT_EQ(m.producer_name, "spox");
  EXPECT_EQ(m.graph_name, "spox_graph");
  EXPECT_TRUE(m.metadata.empty());
  // 15 weights and 2 scalar stft constants per branch; 307 INT64 shape constants.
  EXPECT_EQ(m.tensors.size(), 34u);
  EXPECT_EQ(m.int64_tensors.size(), 307u);
  EXPECT_TRUE(m.skipped.empty());
  for (const Weight& w : kSileroWeights) {
    const Tensor& t16 = m.tensor(std::string("If_0.then_branch/") + w.name);
    const Tensor& t8 = m.tensor(std::string("If_0.else_branch/") + w.name);
    EXPECT_EQ(t16.shape(), w.shape16k) << w.name;
    EXPECT_EQ(t8.shape(), w.shape8k) << w.name;
    EXPECT_EQ(t16.dtype(), DType::f32);
  }
  // The sample rate the If tests against.
  const auto& sr = m.int64_tensors.at("Constant_0_output");
  EXPECT_EQ(sr.shape.ndim(), 0);
  EXPECT_EQ(sr.values, (std::vector<int64_t>{16000}));
}

TEST(OnnxSileroTest, V6_2NamesShapesAndValues) {
  const OnnxModel m = read_onnx(vad_path("silero_vad_v6.2.onnx"));
  expect_silero_layout(m);
  const Tensor& conv16 = m.tensor("If_0.then_branch/encoder.0.reparam_conv.weight");
  EXPECT_EQ(bits_at(conv16, 0), 0x3cb0f9e4u);
  EXPECT_EQ(bits_at(conv16, 2), 0xbc970779u);
  EXPECT_EQ(bits_at(conv16, conv16.numel() - 1), 0x3ba1dca4u);
  const Tensor& conv8 = m.tensor("If_0.else_branch/encoder.0.reparam_conv.weight");
  EXPECT_EQ(bits_at(conv8, 0), 0x3d112339u);
  EXPECT_EQ(bits_at(conv8, conv8.numel() - 1), 0xc05f8b94u);
  EXPECT_EQ(bits_at(m.tensor("If_0.then_branch/decoder.decoder.2.bias"), 0), 0xbf1fe5a3u);
  EXPECT_EQ(bits_at(m.tensor("If_0.else_branch/decoder.decoder.2.bias"), 0), 0xbf170fecu);
  const Tensor& bhh = m.tensor("If_0.then_branch/decoder.rnn.bias_hh");
  double sum = 0;
  for (int64_t i = 0; i < bhh.numel(); ++i) sum += bhh.data<float>()[i];
  EXPECT_NEAR(sum, 10.158531800028868, 1e-9);
}

TEST(OnnxSileroTest, V5_1_2NamesShapesAndValues) {
  const OnnxModel m = read_onnx(vad_path("silero_vad_v5.1.2.onnx"));
  expect_silero_layout(m);
  EXPECT_EQ(bits_at(m.tensor("If_0.then_branch/encoder.0.reparam_conv.weight"), 0), 0x3cbce80au);
  EXPECT_EQ(bits_at(m.tensor("If_0.then_branch/decoder.decoder.2.bias"), 0), 0xbe43365cu);
  EXPECT_EQ(bits_at(m.tensor("If_0.else_branch/decoder.decoder.2.bias"), 0), 0xbecdc670u);
}

TEST(OnnxSileroTest, V6_2StftBasisMatchesTheSafetensorsExport) {
  // Of the 15 tensors in silero_vad_v6.2_16k.safetensors, only the STFT basis holds the
  // same numbers as the ONNX file; the conv, LSTM and final weights differ (checked in
  // Python: the upstream silero-vad 6.2.1 wheel ships the same two files).
  const OnnxModel m = read_onnx(vad_path("silero_vad_v6.2.onnx"));
  const SafetensorsFile st = read_safetensors(vad_path("silero_vad_v6.2_16k.safetensors"));
  const Tensor& a = m.tensor("If_0.then_branch/stft.forward_basis_buffer");
  const Tensor& b = st.tensors.at("[test]", "stft_conv.weight");
  ASSERT_EQ(a.shape(), b.shape());
  ASSERT_EQ(b.dtype(), DType::f32);
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0);
  for (const char* name : {"conv1.weight", "conv2.bias", "lstm_cell.weight_ih", "final_conv.bias"})
    EXPECT_TRUE(st.tensors.contains(name)) << name;
  EXPECT_EQ(st.tensors.at("[test]", "conv1.weight").shape(),
            m.tensor("If_0.then_branch/encoder.0.reparam_conv.weight").shape());
}

}  // namespace
}  // namespace parley::io
