#include "io/gguf.h"

#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "io/byte_reader.h"
#include "io/io_util.h"
#include "io/mapped_file.h"

namespace parley::io {

namespace {

constexpr uint8_t kMagic[4] = {'G', 'G', 'U', 'F'};
constexpr uint64_t kDefaultAlignment = 32;
constexpr int kMaxDims = 4;  // GGML_MAX_DIMS
// Arrays of arrays are legal GGUF but unused in practice; a deep nest is an attack.
constexpr int kMaxArrayDepth = 8;
// The fewest bytes a metadata pair (u64 key length, u32 type, 1-byte value) and a tensor
// info (u64 name length, u32 n_dims, u32 type, u64 offset) can take: counts above
// remaining / these are impossible.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;

constexpr const char* kTypeNames[] = {"uint8",  "int8",    "uint16", "int16",  "uint32",
                                      "int32",  "float32", "bool",   "string", "array",
                                      "uint64", "int64",   "float64"};
constexpr uint32_t kNumTypes = 13;

// Bytes an element of type `t` takes at least on disk (strings: the length; arrays: type
// and count).
uint64_t min_element_bytes(uint32_t t) {
  switch (GgufType(t)) {
    case GgufType::uint8:
    case GgufType::int8:
    case GgufType::boolean: return 1;
    case GgufType::uint16:
    case GgufType::int16: return 2;
    case GgufType::uint32:
    case GgufType::int32:
    case GgufType::float32: return 4;
    case GgufType::string:
    case GgufType::uint64:
    case GgufType::int64:
    case GgufType::float64: return 8;
    case GgufType::array: return 12;
  }
  return 1;
}

class Parser {
 public:
  Parser(std::span<const uint8_t> bytes, const std::string& src) : r_(bytes, src) {}

  ByteReader& reader() { return r_; }

  std::string read_string(const char* what) {
    const auto len = r_.read<uint64_t>();
    if (len > r_.remaining())
      r_.fail(std::string(what) + " length " + std::to_string(len) + " runs past the end (" +
              std::to_string(r_.size()) + " bytes)");
    return r_.string(len);
  }

  uint32_t read_type(const char* what) {
    const auto t = r_.read<uint32_t>();
    if (t >= kNumTypes) r_.fail(std::string(what) + ": unknown metadata type " + std::to_string(t));
    return t;
  }

  GgufValue read_value(uint32_t type, int depth) {
    switch (GgufType(type)) {
      case GgufType::uint8: return r_.read<uint8_t>();
      case GgufType::int8: return r_.read<int8_t>();
      case GgufType::uint16: return r_.read<uint16_t>();
      case GgufType::int16: return r_.read<int16_t>();
      case GgufType::uint32: return r_.read<uint32_t>();
      case GgufType::int32: return r_.read<int32_t>();
      case GgufType::float32: return r_.read<float>();
      case GgufType::boolean: return read_bool();
      case GgufType::string: return read_string("string");
      case GgufType::array: return read_array(depth + 1);
      case GgufType::uint64: return r_.read<uint64_t>();
      case GgufType::int64: return r_.read<int64_t>();
      case GgufType::float64: return r_.read<double>();
    }
    r_.fail("unknown metadata type " + std::to_string(type));
  }

 private:
  bool read_bool() {
    const auto b = r_.read<uint8_t>();
    if (b > 1) r_.fail("bool value " + std::to_string(b) + " is neither 0 nor 1");
    return b == 1;
  }

  template <typename T>
  std::vector<T> read_scalars(uint64_t n) {
    std::vector<T> v(static_cast<size_t>(n));
    const auto b = r_.bytes(n * sizeof(T));  // n was checked against remaining()
    if (n) std::memcpy(v.data(), b.data(), b.size());
    return v;
  }

  GgufArray read_array(int depth) {
    if (depth > kMaxArrayDepth)
      r_.fail("arrays nested deeper than " + std::to_string(kMaxArrayDepth) + " levels");
    const uint32_t type = read_type("array element");
    const auto n = r_.read<uint64_t>();
    if (n > r_.remaining() / min_element_bytes(type))
      r_.fail("array of " + std::to_string(n) + " " + kTypeNames[type] +
              " values cannot fit in the remaining " + std::to_string(r_.remaining()) + " bytes");
    GgufArray a;
    switch (GgufType(type)) {
      case GgufType::uint8: a.items = read_scalars<uint8_t>(n); break;
      case GgufType::int8: a.items = read_scalars<int8_t>(n); break;
      case GgufType::uint16: a.items = read_scalars<uint16_t>(n); break;
      case GgufType::int16: a.items = read_scalars<int16_t>(n); break;
      case GgufType::uint32: a.items = read_scalars<uint32_t>(n); break;
      case GgufType::int32: a.items = read_scalars<int32_t>(n); break;
      case GgufType::float32: a.items = read_scalars<float>(n); break;
      case GgufType::uint64: a.items = read_scalars<uint64_t>(n); break;
      case GgufType::int64: a.items = read_scalars<int64_t>(n); break;
      case GgufType::float64: a.items = read_scalars<double>(n); break;
      case GgufType::boolean: {
        std::vector<bool> v;
        v.reserve(size_t(n));
        for (uint64_t i = 0; i < n; ++i) v.push_back(read_bool());
        a.items = std::move(v);
        break;
      }
      case GgufType::string: {
        std::vector<std::string> v;
        v.reserve(size_t(n));
        for (uint64_t i = 0; i < n; ++i) v.push_back(read_string("string"));
        a.items = std::move(v);
        break;
      }
      case GgufType::array: {
        std::vector<GgufArray> v;
        v.reserve(size_t(n));
        for (uint64_t i = 0; i < n; ++i) v.push_back(read_array(depth + 1));
        a.items = std::move(v);
        break;
      }
    }
    return a;
  }

  ByteReader r_;
};

void check_version(const std::string& src, uint32_t version) {
  // A big-endian file has its version byte-swapped: 3 reads as 0x03000000.
  check(!(version >= 0x10000 && (version & 0xffff) == 0), ErrorKind::unsupported,
        src + ": big-endian GGUF files are not supported");
  check(version == 2 || version == 3, ErrorKind::unsupported,
        src + ": GGUF version " + std::to_string(version) + " is not supported (2, 3)");
}

uint64_t read_alignment(const std::vector<std::pair<std::string, GgufValue>>& kv,
                        const std::string& src) {
  for (const auto& [key, value] : kv) {
    if (key != "general.alignment") continue;
    const auto* a = std::get_if<uint32_t>(&value);
    check_arg(a != nullptr, src + ": general.alignment is a " +
                                gguf_type_name(gguf_type_of(value)) + ", not a uint32");
    check_arg(*a != 0 && (*a & (*a - 1)) == 0,
              src + ": general.alignment " + std::to_string(*a) + " is not a power of two");
    return *a;
  }
  return kDefaultAlignment;
}

GgufTensorInfo read_tensor_info(Parser& p, const std::string& src) {
  ByteReader& r = p.reader();
  GgufTensorInfo t;
  t.name = p.read_string("tensor name");
  const std::string what = src + ": tensor '" + t.name + "'";
  const auto n_dims = r.read<uint32_t>();
  check_arg(n_dims <= uint32_t(kMaxDims),
            what + ": " + std::to_string(n_dims) + " dimensions, at most 4 are allowed");
  int64_t ne[kMaxDims];
  for (uint32_t i = 0; i < n_dims; ++i) {
    const auto d = r.read<uint64_t>();
    check_arg(d <= uint64_t(kMaxFileTensorElements),
              what + ": dimension " + std::to_string(d) + " is larger than 2^50");
    ne[i] = int64_t(d);
  }
  t.type = r.read<uint32_t>();
  t.offset = r.read<uint64_t>();
  const std::span<const int64_t> dims(ne, n_dims);
  const auto numel = checked_numel(dims);
  check_arg(numel.has_value(), what + ": more than 2^50 elements");
  for (uint32_t i = n_dims; i-- > 0;) t.shape.push_back(ne[i]);
  if (const auto info = ggml_type_info(t.type)) {
    const int64_t row = n_dims ? ne[0] : 1;
    check_arg(row % info->block_size == 0, what + ": row length " + std::to_string(row) +
                                               " is not a multiple of the " + info->name +
                                               " block size " + std::to_string(info->block_size));
    t.nbytes = uint64_t(*numel / info->block_size * info->block_bytes);
  }
  return t;
}

void check_tensor_data(std::vector<GgufTensorInfo>& tensors, uint64_t data_size, uint64_t alignment,
                       const std::string& src) {
  std::unordered_set<std::string> names;
  std::vector<const GgufTensorInfo*> known;
  for (const GgufTensorInfo& t : tensors) {
    const std::string what = src + ": tensor '" + t.name + "'";
    check_arg(names.insert(t.name).second, src + ": duplicate tensor name '" + t.name + "'");
    check_arg(t.offset % alignment == 0, what + ": data offset " + std::to_string(t.offset) +
                                             " is not a multiple of the alignment " +
                                             std::to_string(alignment));
    if (!ggml_type_info(t.type)) continue;  // unknown type: size unknown, data unreadable
    check_arg(t.offset <= data_size && t.nbytes <= data_size - t.offset,
              what + ": data [" + std::to_string(t.offset) + ", +" + std::to_string(t.nbytes) +
                  ") runs past the data section (" + std::to_string(data_size) + " bytes)");
    known.push_back(&t);
  }
  std::sort(known.begin(), known.end(),
            [](const auto* a, const auto* b) { return a->offset < b->offset; });
  const GgufTensorInfo* prev = nullptr;
  for (const GgufTensorInfo* t : known) {
    if (t->nbytes == 0) continue;
    if (prev && t->offset < prev->offset + prev->nbytes)
      throw Error(ErrorKind::invalid_argument, src + ": tensors '" + prev->name + "' and '" +
                                                   t->name + "' overlap in the data section");
    prev = t;
  }
}

}  // namespace

std::string gguf_type_name(GgufType t) {
  const auto i = uint32_t(t);
  return i < kNumTypes ? kTypeNames[i] : "type " + std::to_string(i);
}

size_t GgufArray::size() const {
  return std::visit([](const auto& v) { return v.size(); }, items);
}

const GgufValue* GgufFile::find(const std::string& key) const {
  for (const auto& [k, v] : metadata_)
    if (k == key) return &v;
  return nullptr;
}

const GgufValue& GgufFile::require(const std::string& key) const {
  const GgufValue* v = find(key);
  check(v != nullptr, ErrorKind::not_found, source_ + ": no metadata key '" + key + "'");
  return *v;
}

void GgufFile::wrong_type(const std::string& key, const GgufValue& v, GgufType want) const {
  throw Error(ErrorKind::invalid_argument, source_ + ": metadata '" + key + "' is a " +
                                               gguf_type_name(gguf_type_of(v)) + ", not a " +
                                               gguf_type_name(want));
}

const GgufTensorInfo& GgufFile::info(const std::string& name) const {
  for (const GgufTensorInfo& t : tensors_)
    if (t.name == name) return t;
  throw Error(ErrorKind::not_found, source_ + ": no tensor named '" + name + "'");
}

std::span<const uint8_t> GgufFile::raw(const std::string& name) const {
  const GgufTensorInfo& t = info(name);
  check(ggml_type_info(t.type).has_value(), ErrorKind::unsupported,
        source_ + ": tensor '" + name + "' has unknown ggml type " + std::to_string(t.type));
  if (t.nbytes == 0) return {};  // the data section may be empty, even start past the end
  return bytes_.subspan(data_offset_ + size_t(t.offset), size_t(t.nbytes));
}

Tensor GgufFile::tensor(const std::string& name) const {
  const GgufTensorInfo& t = info(name);
  const auto dtype = ggml_type_dtype(t.type);
  check(dtype.has_value(), ErrorKind::unsupported,
        source_ + ": tensor '" + name + "' has ggml type " + ggml_type_name(t.type) +
            "; only f32, f16, bf16, i8, i32 load as tensors (q8_0: raw + dequantize_q8_0)");
  return view_or_copy(raw(name).data(), t.shape, *dtype, owner_);
}

TensorMap GgufFile::float_tensors() const {
  TensorMap out;
  for (const GgufTensorInfo& t : tensors_)
    if (ggml_type_dtype(t.type)) out.insert(source_, t.name, tensor(t.name));
  return out;
}

GgufFile parse_gguf(std::span<const uint8_t> bytes, std::shared_ptr<const void> owner,
                    const std::string& name) {
  const std::string src = "[gguf] " + name;
  check_arg(bytes.size() >= 4 && std::memcmp(bytes.data(), kMagic, 4) == 0,
            src + ": not a GGUF file (bad magic)");
  Parser p(bytes, src);
  ByteReader& r = p.reader();
  r.skip(4);
  GgufFile f;
  f.source_ = src;
  f.version_ = r.read<uint32_t>();
  check_version(src, f.version_);
  const auto n_tensors = r.read<uint64_t>();
  const auto n_kv = r.read<uint64_t>();
  check_arg(n_kv <= r.remaining() / kMinKvBytes, src + ": metadata count " + std::to_string(n_kv) +
                                                     " is impossible in a file of " +
                                                     std::to_string(bytes.size()) + " bytes");
  check_arg(n_tensors <= r.remaining() / kMinTensorInfoBytes,
            src + ": tensor count " + std::to_string(n_tensors) + " is impossible in a file of " +
                std::to_string(bytes.size()) + " bytes");

  std::unordered_set<std::string> keys;
  f.metadata_.reserve(size_t(n_kv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = p.read_string("metadata key");
    check_arg(keys.insert(key).second, src + ": duplicate metadata key '" + key + "'");
    const uint32_t type = p.read_type(("metadata '" + key + "'").c_str());
    GgufValue v = p.read_value(type, 0);
    f.metadata_.emplace_back(std::move(key), std::move(v));
  }
  f.alignment_ = read_alignment(f.metadata_, src);

  f.tensors_.reserve(size_t(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) f.tensors_.push_back(read_tensor_info(p, src));

  // The data section starts at the next multiple of the alignment (offset <= size < 2^63).
  const uint64_t pos = r.offset();
  f.data_offset_ = size_t((pos + f.alignment_ - 1) / f.alignment_ * f.alignment_);
  const uint64_t data_size = bytes.size() > f.data_offset_ ? bytes.size() - f.data_offset_ : 0;
  check_tensor_data(f.tensors_, data_size, f.alignment_, src);
  f.bytes_ = bytes;
  f.owner_ = std::move(owner);
  return f;
}

GgufFile read_gguf(const std::string& path) {
  auto file = MappedFile::open(path);
  return parse_gguf(file->bytes(), file, path);
}

}  // namespace parley::io
