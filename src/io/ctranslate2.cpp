#include "io/ctranslate2.h"

#include <cstring>
#include <optional>
#include <vector>

#include "io/byte_reader.h"
#include "io/io_util.h"
#include "io/mapped_file.h"

namespace parley::io {

namespace {

constexpr uint32_t kMaxBinaryVersion = 6;
// "PK\3\4" read as a u32: a zip archive (a PyTorch checkpoint renamed model.bin).
constexpr uint32_t kZipMagic = 0x04034b50;

size_t type_size(Ct2Type t) {
  switch (t) {
    case Ct2Type::float32: return 4;
    case Ct2Type::int8: return 1;
    case Ct2Type::int16: return 2;
    case Ct2Type::int32: return 4;
    case Ct2Type::float16: return 2;
    case Ct2Type::bfloat16: return 2;
  }
  return 0;
}

std::optional<DType> to_dtype(Ct2Type t) {
  switch (t) {
    case Ct2Type::float32: return DType::f32;
    case Ct2Type::int8: return DType::i8;
    case Ct2Type::int32: return DType::i32;
    case Ct2Type::float16: return DType::f16;
    case Ct2Type::bfloat16: return DType::bf16;
    case Ct2Type::int16: return std::nullopt;
  }
  return std::nullopt;
}

// True when every dim, zeros counted as 1, multiplies out to at most kMaxBytes: a shape
// with a zero dim holds no data, but Tensor still refuses absurd sizes for it.
bool fits_tensor(const std::vector<int64_t>& dims, size_t elem_size) {
  constexpr uint64_t kMaxBytes = uint64_t(1) << 40;  // Tensor's own limit
  uint64_t bytes = elem_size;
  for (int64_t d : dims) {
    const uint64_t x = d > 1 ? uint64_t(d) : 1;
    if (bytes > kMaxBytes / x) return false;
    bytes *= x;
  }
  return true;
}

class Reader {
 public:
  Reader(std::span<const uint8_t> bytes, Ct2Model& out) : r_(bytes, out.source), out_(out) {}

  void read();

 private:
  std::string string(const char* what);
  void variable();
  void alias();
  [[noreturn]] void fail_at(size_t record, const std::string& what);

  ByteReader r_;
  Ct2Model& out_;
};

// A u16 length counting a terminating NUL, then the bytes. CTranslate2 builds a C
// string from them, so a NUL inside would silently cut the name; we reject it.
std::string Reader::string(const char* what) {
  const size_t at = r_.offset();
  const uint16_t n = r_.read<uint16_t>();
  std::string s = r_.string(n);
  if (!s.empty() && s.back() == '\0') s.pop_back();
  if (s.find('\0') != std::string::npos || s.empty())
    fail_at(at, std::string(what) + (s.empty() ? " is empty" : " contains a NUL byte"));
  return s;
}

void Reader::read() {
  const uint32_t version = r_.read<uint32_t>();
  if (version == 0 || version > kMaxBinaryVersion) {
    const std::string hint =
        version == kZipMagic ? " (this is a zip archive, such as a PyTorch checkpoint)" : "";
    throw Error(version == 0 ? ErrorKind::invalid_argument : ErrorKind::unsupported,
                out_.source + ": binary version " + std::to_string(version) +
                    " is not one this reader knows (1 to " + std::to_string(kMaxBinaryVersion) +
                    ")" + hint);
  }
  out_.binary_version = version;
  out_.spec_revision = 1;
  if (version >= 2) {
    // The spec name may be empty for generic specs, so read it without string()'s check.
    const uint16_t n = r_.read<uint16_t>();
    out_.spec_name = r_.string(n);
    if (!out_.spec_name.empty() && out_.spec_name.back() == '\0') out_.spec_name.pop_back();
    out_.spec_revision = r_.read<uint32_t>();
  }
  // No reserve(): the count is untrusted, and each record is at least 8 bytes, so a
  // bogus count ends at the end of the file.
  const uint32_t num_variables = r_.read<uint32_t>();
  for (uint32_t i = 0; i < num_variables; ++i) variable();
  if (version >= 3) {
    const uint32_t num_aliases = r_.read<uint32_t>();
    for (uint32_t i = 0; i < num_aliases; ++i) alias();
  }
  if (!r_.at_end()) r_.fail(std::to_string(r_.remaining()) + " bytes after the last record");
}

void Reader::variable() {
  const size_t record = r_.offset();
  const std::string name = string("variable name");
  const std::string what = "variable '" + name + "'";
  if (out_.variables.count(name)) fail_at(record, "duplicate " + what);
  const uint8_t rank = r_.read<uint8_t>();
  if (rank > Shape::kMaxDims) r_.fail(what + " has rank " + std::to_string(rank));
  std::vector<int64_t> dims(rank);
  for (auto& d : dims) d = r_.read<uint32_t>();

  Ct2Variable v;
  uint64_t num_bytes = 0;
  if (out_.binary_version >= 4) {
    const uint8_t id = r_.read<uint8_t>();
    if (id > uint8_t(Ct2Type::bfloat16))
      r_.fail(what + " has unknown type id " + std::to_string(id));
    v.type = Ct2Type(id);
    num_bytes = r_.read<uint32_t>();
  } else {
    const uint8_t item_size = r_.read<uint8_t>();
    switch (item_size) {
      case 4: v.type = Ct2Type::float32; break;
      case 2: v.type = Ct2Type::int16; break;
      case 1: v.type = Ct2Type::int8; break;
      default: r_.fail(what + " has unknown item size " + std::to_string(item_size));
    }
    num_bytes = uint64_t(r_.read<uint32_t>()) * item_size;
  }
  const auto numel = checked_numel(dims);
  v.shape = Shape(dims.begin(), dims.end());
  if (!numel || !fits_tensor(dims, type_size(v.type)) ||
      uint64_t(*numel) * type_size(v.type) != num_bytes)
    r_.fail(what + " of type " + std::string(ct2_type_name(v.type)) + " and shape " +
            v.shape.str() + " does not match its size of " + std::to_string(num_bytes) + " bytes");
  if (num_bytes > r_.remaining())
    r_.fail(what + " size " + std::to_string(num_bytes) + " exceeds the file (" +
            std::to_string(r_.remaining()) + " bytes left)");
  v.bytes = r_.bytes(num_bytes);
  if (const auto dtype = to_dtype(v.type))
    out_.tensors.insert(out_.source, name,
                        view_or_copy(v.bytes.data(), v.shape, *dtype, out_.owner));
  out_.variables.emplace(name, v);
}

void Reader::alias() {
  const size_t record = r_.offset();
  const std::string name = string("alias name");
  std::string target = string("alias target");
  // An alias may name an earlier alias; CTranslate2 resolves it the same way.
  if (auto it = out_.aliases.find(target); it != out_.aliases.end()) target = it->second;
  if (out_.contains(name)) fail_at(record, "alias '" + name + "' duplicates an existing name");
  if (!out_.variables.count(target))
    fail_at(record, "alias '" + name + "' names a missing variable '" + target + "'");
  out_.aliases.emplace(name, target);
  if (const Tensor* t = out_.tensors.find(target)) out_.tensors.insert(out_.source, name, *t);
}

void Reader::fail_at(size_t record, const std::string& what) {
  r_.seek(record);
  r_.fail(what);
}

}  // namespace

std::string_view ct2_type_name(Ct2Type t) {
  switch (t) {
    case Ct2Type::float32: return "float32";
    case Ct2Type::int8: return "int8";
    case Ct2Type::int16: return "int16";
    case Ct2Type::int32: return "int32";
    case Ct2Type::float16: return "float16";
    case Ct2Type::bfloat16: return "bfloat16";
  }
  return "?";
}

const Tensor& Ct2Model::tensor(const std::string& name) const {
  if (const Tensor* t = tensors.find(name)) return *t;
  const auto a = aliases.find(name);
  const auto v = variables.find(a == aliases.end() ? name : a->second);
  if (v != variables.end())
    throw Error(ErrorKind::unsupported, source + ": variable '" + name + "' has type " +
                                            std::string(ct2_type_name(v->second.type)) +
                                            ", which parley tensors cannot hold");
  return tensors.at(source, name);  // throws not_found
}

int64_t Ct2Model::scalar_int(const std::string& name) const {
  const auto a = aliases.find(name);
  const auto it = variables.find(a == aliases.end() ? name : a->second);
  check(it != variables.end(), ErrorKind::not_found, source + ": no variable '" + name + "'");
  const Ct2Variable& v = it->second;
  const auto& b = v.bytes;
  check_arg(v.shape.numel() == 1,
            source + ": variable '" + name + "' of shape " + v.shape.str() + " is not a scalar");
  switch (v.type) {
    case Ct2Type::int8: return int8_t(b[0]);
    case Ct2Type::int16: {
      int16_t x;
      std::memcpy(&x, b.data(), 2);
      return x;
    }
    case Ct2Type::int32: {
      int32_t x;
      std::memcpy(&x, b.data(), 4);
      return x;
    }
    default: break;
  }
  throw Error(ErrorKind::invalid_argument, source + ": variable '" + name + "' has type " +
                                               std::string(ct2_type_name(v.type)) +
                                               ", not an integer");
}

Ct2Model parse_ctranslate2(std::span<const uint8_t> bytes, const std::string& name,
                           std::shared_ptr<const void> owner) {
  Ct2Model m;
  m.source = "[ctranslate2] " + name;
  m.owner = std::move(owner);
  Reader(bytes, m).read();
  return m;
}

Ct2Model read_ctranslate2(const std::string& path) {
  auto file = MappedFile::open(path);
  return parse_ctranslate2(file->bytes(), path, file);
}

}  // namespace parley::io
