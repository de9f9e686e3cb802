// Tests of the CTranslate2 model.bin reader: a small synthetic file written here (every
// binary version's layout, and malformed variants of it), then the real Whisper tiny.en.
#include "io/ctranslate2.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/error.h"

namespace parley::io {
namespace {

// Writes model.bin records the way ctranslate2/specs/model_spec.py does.
struct Ct2Writer {
  std::vector<uint8_t> out;

  void u8(uint8_t v) { out.push_back(v); }
  void u16(uint16_t v) { raw(&v, 2); }
  void u32(uint32_t v) { raw(&v, 4); }
  void raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  }
  void str(const std::string& s) {  // length counts the terminating NUL
    u16(uint16_t(s.size() + 1));
    raw(s.data(), s.size());
    u8(0);
  }
  // One variable record; `type` is the v4+ type id, `item` the v1-3 item size.
  void variable(uint32_t version, const std::string& name, std::vector<uint32_t> dims, uint8_t type,
                uint8_t item, const std::vector<uint8_t>& data) {
    str(name);
    u8(uint8_t(dims.size()));
    for (uint32_t d : dims) u32(d);
    if (version >= 4) {
      u8(type);
      u32(uint32_t(data.size()));
    } else {
      u8(item);
      u32(uint32_t(data.size() / item));
    }
    raw(data.data(), data.size());
  }
};

template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

const std::vector<float> kWeight = {1.5f, -2.0f, 3.25f, 0.0f, -0.5f, 8.0f};  // [2, 3]
const std::vector<uint16_t> kBias = {0x3c00, 0xc000, 0x3800};                // f16 1, -2, 0.5
const std::vector<int8_t> kInt8 = {-128, -1, 0, 127};

// A small model: a float32 matrix, a float16 vector, an int8 vector, an int16 scalar
// and, from version 3, an alias of the matrix.
std::vector<uint8_t> tiny_model(uint32_t version = 6) {
  Ct2Writer w;
  w.u32(version);
  if (version >= 2) {
    w.str("TinySpecV2");  // 10 chars: puts enc/weight's data at byte 52
    w.u32(2);
  }
  const bool typed = version >= 4;
  w.u32(typed ? 4 : 3);
  w.variable(version, "enc/weight", {2, 3}, 0, 4, bytes_of(kWeight));
  if (typed) w.variable(version, "enc/bias", {3}, 4, 2, bytes_of(kBias));
  w.variable(version, "enc/q", {4}, 1, 1, bytes_of(kInt8));
  w.variable(version, "num_heads", {}, 2, 2, bytes_of(std::vector<int16_t>{6}));
  if (version >= 3) {
    w.u32(1);
    w.str("dec/projection");
    w.str("enc/weight");
  }
  return w.out;
}

Ct2Model parse(const std::vector<uint8_t>& b, const std::string& name = "tiny.bin") {
  return parse_ctranslate2(b, name);
}

// Runs `fn`, expecting a parley::Error of `kind` whose message contains every needle.
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

TEST(Ctranslate2Test, ParsesSyntheticModel) {
  const auto bytes = tiny_model();
  const Ct2Model m = parse(bytes);
  EXPECT_EQ(m.binary_version, 6u);
  EXPECT_EQ(m.spec_name, "TinySpecV2");
  EXPECT_EQ(m.spec_revision, 2u);
  EXPECT_EQ(m.variables.size(), 4u);
  ASSERT_EQ(m.aliases.size(), 1u);
  EXPECT_EQ(m.aliases.at("dec/projection"), "enc/weight");

  const Tensor& w = m.tensor("enc/weight");
  EXPECT_EQ(w.shape(), Shape({2, 3}));
  EXPECT_EQ(w.dtype(), DType::f32);
  for (size_t i = 0; i < kWeight.size(); ++i) EXPECT_EQ(w.data<float>()[i], kWeight[i]);
  // The alias is the same memory, not a copy.
  EXPECT_EQ(m.tensor("dec/projection").raw(), w.raw());

  const Tensor& b = m.tensor("enc/bias");
  EXPECT_EQ(b.dtype(), DType::f16);
  EXPECT_EQ(f16_to_f32(b.data<uint16_t>()[1]), -2.0f);
  const Tensor& q = m.tensor("enc/q");
  EXPECT_EQ(q.dtype(), DType::i8);
  EXPECT_EQ(q.data<int8_t>()[0], -128);
  EXPECT_EQ(q.data<int8_t>()[3], 127);

  EXPECT_EQ(m.variables.at("num_heads").type, Ct2Type::int16);
  EXPECT_EQ(m.variables.at("num_heads").shape.ndim(), 0);
  EXPECT_EQ(m.scalar_int("num_heads"), 6);
  expect_error([&] { m.tensor("num_heads"); }, ErrorKind::unsupported, {"tiny.bin", "int16"});
  expect_error([&] { m.tensor("missing"); }, ErrorKind::not_found, {"tiny.bin", "missing"});
  expect_error([&] { m.scalar_int("enc/q"); }, ErrorKind::invalid_argument, {"not a scalar"});
}

TEST(Ctranslate2Test, AlignedDataIsAViewOfTheBuffer) {
  // In the synthetic file the f32 matrix's data starts at byte 52, a multiple of 4, so
  // it must be a view; the f16 vector's starts at byte 97 and is copied. (The vector's
  // storage is at least 8-aligned, so offsets in it are alignments.)
  const auto bytes = tiny_model();
  const Ct2Model m = parse(bytes);
  const auto& wv = m.variables.at("enc/weight");
  ASSERT_EQ(size_t(wv.bytes.data() - bytes.data()) % 4, 0u);
  EXPECT_EQ(m.tensor("enc/weight").raw(), wv.bytes.data());
  const auto& bv = m.variables.at("enc/bias");
  ASSERT_NE(size_t(bv.bytes.data() - bytes.data()) % 2, 0u);
  EXPECT_NE(m.tensor("enc/bias").raw(), bv.bytes.data());
  EXPECT_EQ(std::memcmp(m.tensor("enc/bias").raw(), bv.bytes.data(), 6), 0);
}

TEST(Ctranslate2Test, ReadsOlderBinaryVersions) {
  const Ct2Model v1 = parse(tiny_model(1));
  EXPECT_EQ(v1.binary_version, 1u);
  EXPECT_EQ(v1.spec_name, "");
  EXPECT_EQ(v1.spec_revision, 1u);
  EXPECT_EQ(v1.tensor("enc/weight").data<float>()[2], 3.25f);
  EXPECT_EQ(v1.variables.at("num_heads").type, Ct2Type::int16);  // item size 2 meant int16
  EXPECT_TRUE(v1.aliases.empty());

  const Ct2Model v3 = parse(tiny_model(3));
  EXPECT_EQ(v3.spec_name, "TinySpecV2");
  EXPECT_EQ(v3.tensor("dec/projection").raw(), v3.tensor("enc/weight").raw());
  EXPECT_EQ(v3.tensor("enc/q").dtype(), DType::i8);

  for (uint32_t v = 4; v <= 6; ++v) EXPECT_EQ(parse(tiny_model(v)).variables.size(), 4u);
}

TEST(Ctranslate2Test, EveryTruncationThrowsNamingTheFile) {
  for (uint32_t version : {1u, 3u, 6u}) {
    const auto full = tiny_model(version);
    for (size_t cut = 0; cut < full.size(); ++cut) {
      const std::vector<uint8_t> part(full.begin(), full.begin() + long(cut));
      try {
        parse(part, "cut.bin");
        ADD_FAILURE() << "version " << version << " cut at " << cut << " parsed";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::invalid_argument) << e.what();
        EXPECT_NE(std::string(e.what()).find("[ctranslate2] cut.bin"), std::string::npos)
            << e.what();
      }
    }
  }
}

TEST(Ctranslate2Test, RejectsBadVersions) {
  auto b = tiny_model();
  b[0] = 0;
  expect_error([&] { parse(b); }, ErrorKind::invalid_argument, {"tiny.bin", "binary version 0"});
  b[0] = 7;
  expect_error([&] { parse(b); }, ErrorKind::unsupported, {"binary version 7"});
  const std::vector<uint8_t> zip = {'P', 'K', 3, 4, 20, 0, 0, 0};
  expect_error([&] { parse(zip); }, ErrorKind::unsupported, {"zip archive"});
}

// A v6 model with one float32 variable described by the arguments.
std::vector<uint8_t> one_variable(const std::string& name, std::vector<uint32_t> dims, uint8_t type,
                                  uint32_t num_bytes, size_t data_bytes) {
  Ct2Writer w;
  w.u32(6);
  w.str("S");
  w.u32(1);
  w.u32(1);
  w.str(name);
  w.u8(uint8_t(dims.size()));
  for (uint32_t d : dims) w.u32(d);
  w.u8(type);
  w.u32(num_bytes);
  w.out.resize(w.out.size() + data_bytes);
  w.u32(0);  // no aliases
  return w.out;
}

TEST(Ctranslate2Test, RejectsMalformedVariables) {
  const auto E = ErrorKind::invalid_argument;
  // Sanity: the helper writes a valid file.
  EXPECT_EQ(parse(one_variable("x", {2}, 0, 8, 8)).tensor("x").numel(), 2);
  expect_error([&] { parse(one_variable("x", {2}, 0, 1u << 30, 8)); }, E,
               {"tiny.bin", "variable 'x'", "does not match"});
  expect_error([&] { parse(one_variable("x", {1u << 28}, 0, 1u << 30, 8)); }, E,
               {"variable 'x' size 1073741824 exceeds the file"});
  expect_error(
      [&] {
        parse(one_variable("x", {1, 1, 1, 1, 1, 1, 1}, 0, 4, 4));
      },
      E, {"variable 'x' has rank 7"});
  expect_error([&] { parse(one_variable("x", {2}, 6, 8, 8)); }, E, {"unknown type id 6"});
  expect_error([&] { parse(one_variable("x", {2}, 255, 8, 8)); }, E, {"unknown type id 255"});
  expect_error(
      [&] {
        parse(one_variable("x", {0xffffffff, 0xffffffff, 0xffffffff}, 0, 0, 0));
      },
      E, {"does not match"});
  // A zero-element variable with absurd other dims: no data, but not a real shape either.
  expect_error(
      [&] {
        parse(one_variable("x", {0, 0xffffffff, 0xffffffff, 0xffffffff}, 0, 0, 0));
      },
      E, {"does not match"});
  EXPECT_EQ(parse(one_variable("x", {0, 384}, 4, 0, 0)).tensor("x").numel(), 0);
  expect_error([&] { parse(one_variable("", {2}, 0, 8, 8)); }, E, {"variable name is empty"});
  expect_error([&] { parse(one_variable(std::string("a\0b", 3), {2}, 0, 8, 8)); }, E,
               {"contains a NUL byte"});
  auto trailing = one_variable("x", {2}, 0, 8, 8);
  trailing.push_back(0);
  expect_error([&] { parse(trailing); }, E, {"1 bytes after the last record"});
}

TEST(Ctranslate2Test, RejectsDuplicateNamesAndDanglingAliases) {
  const auto E = ErrorKind::invalid_argument;
  auto with = [](const std::string& second, const std::string& alias, const std::string& target) {
    Ct2Writer w;
    w.u32(6);
    w.str("S");
    w.u32(1);
    w.u32(2);
    w.variable(6, "a", {1}, 0, 4, bytes_of(std::vector<float>{1}));
    w.variable(6, second, {1}, 0, 4, bytes_of(std::vector<float>{2}));
    w.u32(1);
    w.str(alias);
    w.str(target);
    return w.out;
  };
  EXPECT_EQ(parse(with("b", "c", "a")).tensor("c").data<float>()[0], 1.0f);
  expect_error([&] { parse(with("a", "c", "a")); }, E, {"tiny.bin", "duplicate variable 'a'"});
  expect_error([&] { parse(with("b", "b", "a")); }, E, {"alias 'b' duplicates"});
  expect_error([&] { parse(with("b", "c", "zz")); }, E,
               {"alias 'c' names a missing variable 'zz'"});
}

TEST(Ctranslate2Test, HugeVariableCountEndsAtTheEndOfTheFile) {
  Ct2Writer w;
  w.u32(6);
  w.str("S");
  w.u32(1);
  w.u32(0xffffffff);
  expect_error([&] { parse(w.out); }, ErrorKind::invalid_argument, {"tiny.bin", "truncated"});
}

// --- The real model: Whisper tiny.en, float16, from faster-whisper's conversion. -----
// Expected values were read with a Python parser of the same layout (numpy.frombuffer
// at each variable's offset) and cross-checked against model_spec.py's writer.

std::string real_model_path() { return std::string(PARLEY_TEST_MODEL_DIR) + "/model.bin"; }

class Ctranslate2RealModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (std::filesystem::exists(real_model_path()))
      model_ = new Ct2Model(read_ctranslate2(real_model_path()));
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  void SetUp() override {
    if (!model_)
      GTEST_SKIP() << "no model at " << real_model_path() << " (scripts/setup.sh installs it)";
  }
  static Ct2Model* model_;
};
Ct2Model* Ctranslate2RealModelTest::model_ = nullptr;

std::vector<uint16_t> bits(const Tensor& t, int64_t begin, int64_t n) {
  const auto* p = t.data<uint16_t>() + begin;
  return std::vector<uint16_t>(p, p + n);
}

TEST_F(Ctranslate2RealModelTest, Header) {
  const Ct2Model& m = *model_;
  EXPECT_EQ(m.binary_version, 6u);
  EXPECT_EQ(m.spec_name, "WhisperSpec");
  EXPECT_EQ(m.spec_revision, 3u);
  EXPECT_EQ(m.variables.size(), 148u);
  ASSERT_EQ(m.aliases.size(), 1u);
  EXPECT_EQ(m.aliases.at("decoder/projection/weight"), "decoder/embeddings/weight");
  // 139 float16 + 5 int8 variables have tensors; the 4 int16 scalars do not; plus the alias.
  EXPECT_EQ(m.tensors.size(), 139u + 5u + 1u);
  int f16 = 0, i8 = 0, i16 = 0;
  for (const auto& [name, v] : m.variables) {
    f16 += v.type == Ct2Type::float16;
    i8 += v.type == Ct2Type::int8;
    i16 += v.type == Ct2Type::int16;
  }
  EXPECT_EQ(f16, 139);
  EXPECT_EQ(i8, 5);
  EXPECT_EQ(i16, 4);
}

TEST_F(Ctranslate2RealModelTest, ShapesAndValues) {
  const Ct2Model& m = *model_;
  const Tensor& conv1 = m.tensor("encoder/conv1/weight");
  EXPECT_EQ(conv1.shape(), Shape({384, 80, 3}));
  EXPECT_EQ(conv1.dtype(), DType::f16);
  EXPECT_EQ(bits(conv1, 0, 4), (std::vector<uint16_t>{10078, 10069, 10161, 42421}));
  EXPECT_EQ(bits(conv1, conv1.numel() - 2, 2), (std::vector<uint16_t>{40127, 8966}));
  EXPECT_EQ(m.tensor("encoder/conv2/weight").shape(), Shape({384, 384, 3}));

  const Tensor& emb = m.tensor("decoder/embeddings/weight");
  EXPECT_EQ(emb.shape(), Shape({51864, 384}));
  EXPECT_EQ(bits(emb, 0, 4), (std::vector<uint16_t>{10353, 40300, 42037, 36632}));
  EXPECT_EQ(bits(emb, 50256 * 384, 3), (std::vector<uint16_t>{10470, 39078, 41629}));
  EXPECT_EQ(bits(emb, emb.numel() - 2, 2), (std::vector<uint16_t>{41615, 9664}));
  EXPECT_EQ(m.tensor("decoder/projection/weight").raw(), emb.raw());

  EXPECT_EQ(m.tensor("encoder/position_encodings/encodings").shape(), Shape({1500, 384}));
  EXPECT_EQ(m.tensor("decoder/layer_0/attention/linear_1/weight").shape(), Shape({768, 384}));
  EXPECT_EQ(m.tensor("encoder/layer_3/self_attention/linear_0/bias").shape(), Shape({1152}));

  const Tensor& bias = m.tensor("encoder/layer_3/ffn/linear_1/bias");
  double sum = 0;
  for (int64_t i = 0; i < bias.numel(); ++i) sum += f16_to_f32(bias.data<uint16_t>()[i]);
  EXPECT_NEAR(sum, 3.6458511352539062, 1e-9);
  EXPECT_FLOAT_EQ(f16_to_f32(m.tensor("encoder/layer_norm/gamma").data<uint16_t>()[0]), 1.0380859f);
}

TEST_F(Ctranslate2RealModelTest, Scalars) {
  const Ct2Model& m = *model_;
  EXPECT_EQ(m.scalar_int("encoder/num_heads"), 6);
  EXPECT_EQ(m.scalar_int("decoder/num_heads"), 6);
  EXPECT_EQ(m.scalar_int("decoder/alignment_layer"), -1);
  EXPECT_EQ(m.scalar_int("decoder/activation"), 3);
  EXPECT_EQ(m.scalar_int("decoder/pre_norm"), 1);
  EXPECT_EQ(m.tensor("decoder/pre_norm").dtype(), DType::i8);
  expect_error([&] { m.tensor("decoder/num_heads"); }, ErrorKind::unsupported,
               {"model.bin", "decoder/num_heads", "int16"});
}

TEST_F(Ctranslate2RealModelTest, AlignedTensorsAreViewsOfTheMap) {
  // Variables are packed back to back, so only some start at an even offset.
  const Ct2Model& m = *model_;
  int views = 0, copies = 0;
  for (const auto& [name, v] : m.variables) {
    const Tensor* t = m.tensors.find(name);
    if (!t) continue;
    const bool aligned = reinterpret_cast<uintptr_t>(v.bytes.data()) % dtype_size(t->dtype()) == 0;
    EXPECT_EQ(t->raw() == v.bytes.data(), aligned) << name;
    (aligned ? views : copies)++;
  }
  EXPECT_GT(views, 0);
  EXPECT_GT(copies, 0);
  EXPECT_EQ(m.tensor("encoder/conv1/weight").raw(),
            m.variables.at("encoder/conv1/weight").bytes.data());
}

}  // namespace
}  // namespace parley::io
