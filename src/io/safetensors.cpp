#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string_view>

#include "io/byte_reader.h"
#include "io/io_util.h"
#include "io/json_lite.h"
#include "io/mapped_file.h"

namespace parley::io {

namespace {

// The reference implementation refuses headers above 100 MB; so do we, before parsing.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// I64 tensors are copied out as values: index tensors, never weights.
constexpr int64_t kMaxInt64Elements = int64_t(1) << 20;

struct DTypeName {
  std::string_view name;
  DType dtype;
};
constexpr DTypeName kSupported[] = {{"F32", DType::f32},
                                    {"F16", DType::f16},
                                    {"BF16", DType::bf16},
                                    {"I32", DType::i32},
                                    {"I8", DType::i8}};

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& d : kSupported)
    if (d.name == name) return d.dtype;
  return std::nullopt;
}

std::string_view name_of(DType t) {
  for (const auto& d : kSupported)
    if (d.dtype == t) return d.name;
  return "?";
}

struct Entry {
  std::string name;
  DType dtype;
  bool int64 = false;  // an I64 tensor (dtype unused)
  Shape shape;
  uint64_t begin, end;  // byte offsets into the data section
};

// Reads one tensor's header entry: {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]}.
// Unknown members are ignored, as the reference implementation does.
Entry parse_entry(const std::string& src, const std::string& name, const json::Value& v) {
  const std::string what = src + ": tensor '" + name + "'";
  check_arg(v.is(json::Value::Kind::object), what + ": entry is not an object");
  const json::Value* dtype = v.find("dtype");
  const json::Value* shape = v.find("shape");
  const json::Value* offsets = v.find("data_offsets");
  check_arg(dtype && dtype->is(json::Value::Kind::string), what + ": missing string \"dtype\"");
  check_arg(shape && shape->is(json::Value::Kind::array), what + ": missing array \"shape\"");
  check_arg(offsets && offsets->is(json::Value::Kind::array) && offsets->as_array().size() == 2,
            what + ": \"data_offsets\" is not an array of 2 offsets");

  Entry e{name, DType::f32, false, Shape(), 0, 0};
  e.int64 = dtype->as_string() == "I64";
  const std::optional<DType> dt = dtype_from_name(dtype->as_string());
  check(
      dt.has_value() || e.int64, ErrorKind::unsupported,
      what + ": dtype " + dtype->as_string() + " is not supported (F32, F16, BF16, I32, I8, I64)");
  if (dt) e.dtype = *dt;

  const json::Array& dims = shape->as_array();
  check(dims.size() <= size_t(Shape::kMaxDims), ErrorKind::unsupported,
        what + ": " + std::to_string(dims.size()) + " dimensions, at most " +
            std::to_string(Shape::kMaxDims) + " are supported");
  std::vector<int64_t> d;
  for (const json::Value& x : dims) {
    std::optional<uint64_t> n;
    if (x.is(json::Value::Kind::number)) n = x.as_uint64();
    check_arg(n && *n <= uint64_t(kMaxFileTensorElements),
              what + ": shape entries must be integers in [0, 2^50]");
    d.push_back(int64_t(*n));
  }
  const std::optional<int64_t> numel = checked_numel(d);
  check_arg(numel.has_value(), what + ": shape has more than 2^50 elements");
  e.shape = Shape(d.begin(), d.end());

  uint64_t bounds[2];
  for (int i = 0; i < 2; ++i) {
    const json::Value& x = offsets->as_array()[size_t(i)];
    std::optional<uint64_t> n;
    if (x.is(json::Value::Kind::number)) n = x.as_uint64();
    check_arg(n.has_value(), what + ": data_offsets must be non-negative 64-bit integers");
    bounds[i] = *n;
  }
  e.begin = bounds[0];
  e.end = bounds[1];
  check_arg(e.begin <= e.end, what + ": data_offsets [" + std::to_string(e.begin) + ", " +
                                  std::to_string(e.end) + "] end before they begin");
  check(!e.int64 || *numel <= kMaxInt64Elements, ErrorKind::unsupported,
        what + ": I64" + e.shape.str() + " is larger than the 2^20 elements read as I64");
  const uint64_t want = uint64_t(*numel) * (e.int64 ? 8 : dtype_size(e.dtype));
  check_arg(e.end - e.begin == want, what + ": data_offsets span " +
                                         std::to_string(e.end - e.begin) + " bytes, but " +
                                         std::string(e.int64 ? "I64" : name_of(e.dtype)) +
                                         e.shape.str() + " needs " + std::to_string(want));
  return e;
}

std::map<std::string, std::string> parse_metadata(const std::string& src, const json::Value& v) {
  check_arg(v.is(json::Value::Kind::object), src + ": __metadata__ is not an object");
  std::map<std::string, std::string> out;
  for (const auto& [k, x] : v.as_object()) {
    check_arg(x.is(json::Value::Kind::string),
              src + ": __metadata__ value '" + k + "' is not a string");
    out.emplace(k, x.as_string());
  }
  return out;
}

// Two tensors sharing bytes means a corrupt (or hostile) header.
void check_no_overlap(const std::string& src, std::vector<const Entry*> entries) {
  std::sort(entries.begin(), entries.end(),
            [](const Entry* a, const Entry* b) { return a->begin < b->begin; });
  const Entry* prev = nullptr;
  for (const Entry* e : entries) {
    if (e->begin == e->end) continue;
    if (prev && e->begin < prev->end)
      throw Error(ErrorKind::invalid_argument, src + ": tensors '" + prev->name + "' and '" +
                                                   e->name + "' overlap in the data section");
    prev = e;
  }
}

std::string dims_json(const Shape& s) {
  std::string out = "[";
  for (int i = 0; i < s.ndim(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

SafetensorsFile parse_safetensors(std::span<const uint8_t> bytes, std::shared_ptr<const void> owner,
                                  const std::string& name) {
  const std::string src = "[safetensors] " + name;
  ByteReader r(bytes, src);
  check_arg(bytes.size() >= 8, src + ": file is " + std::to_string(bytes.size()) +
                                   " bytes, too short for the 8-byte header length");
  const uint64_t header_len = r.read<uint64_t>();
  check_arg(header_len <= bytes.size() - 8, src + ": header length " + std::to_string(header_len) +
                                                " exceeds file size " +
                                                std::to_string(bytes.size()));
  check_arg(header_len <= kMaxHeaderBytes, src + ": header length " + std::to_string(header_len) +
                                               " exceeds the limit of " +
                                               std::to_string(kMaxHeaderBytes) + " bytes");
  const auto header = r.bytes(header_len);
  const std::string_view text(reinterpret_cast<const char*>(header.data()), header.size());
  check_arg(!text.empty() && text[0] == '{', src + ": header does not start with '{'");
  const json::Value root = json::parse(text, src);
  check_arg(root.is(json::Value::Kind::object), src + ": header is not a JSON object");

  const std::span<const uint8_t> data = bytes.subspan(r.offset());
  SafetensorsFile out;
  std::vector<Entry> entries;
  for (const auto& [key, value] : root.as_object()) {
    if (key == "__metadata__") {
      out.metadata = parse_metadata(src, value);
      continue;
    }
    Entry e = parse_entry(src, key, value);
    check_arg(e.end <= data.size(), src + ": tensor '" + key + "': data_offsets [" +
                                        std::to_string(e.begin) + ", " + std::to_string(e.end) +
                                        "] run past the data section (" +
                                        std::to_string(data.size()) + " bytes)");
    entries.push_back(std::move(e));
  }
  std::vector<const Entry*> ptrs;
  for (const Entry& e : entries) ptrs.push_back(&e);
  check_no_overlap(src, ptrs);
  for (const Entry& e : entries) {
    if (e.int64) {
      Int64Array a{e.shape, std::vector<int64_t>(size_t(e.shape.numel()))};
      if (!a.values.empty()) std::memcpy(a.values.data(), data.data() + e.begin, e.end - e.begin);
      out.int64_tensors.emplace(e.name, std::move(a));
      continue;
    }
    out.tensors.insert(src, e.name, view_or_copy(data.data() + e.begin, e.shape, e.dtype, owner));
  }
  return out;
}

SafetensorsFile read_safetensors(const std::string& path) {
  auto file = MappedFile::open(path);
  return parse_safetensors(file->bytes(), file, path);
}

std::vector<uint8_t> serialize_safetensors(const TensorMap& tensors,
                                           const std::map<std::string, std::string>& metadata) {
  std::vector<std::pair<std::string, Tensor>> order;
  for (const auto& [name, t] : tensors)
    order.emplace_back(name, t.is_cuda() ? t.to(Device::cpu) : t);
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return dtype_size(a.second.dtype()) > dtype_size(b.second.dtype());
  });

  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      header += (first ? "" : ",") + json::quote(k) + ":" + json::quote(v);
      first = false;
    }
    header += "}";
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : order) {
    check_arg(name != "__metadata__", "[safetensors] a tensor cannot be named __metadata__");
    if (header.size() > 1) header += ",";
    header += json::quote(name) + ":{\"dtype\":\"" + std::string(name_of(t.dtype())) +
              "\",\"shape\":" + dims_json(t.shape()) + ",\"data_offsets\":[" +
              std::to_string(offset) + "," + std::to_string(offset + t.nbytes()) + "]}";
    offset += t.nbytes();
  }
  header += "}";
  header.resize((header.size() + 7) / 8 * 8, ' ');

  std::vector<uint8_t> out(8 + header.size() + offset);
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);  // little-endian hosts only, as everywhere in parley
  std::memcpy(out.data() + 8, header.data(), header.size());
  uint8_t* p = out.data() + 8 + header.size();
  for (const auto& [name, t] : order) {
    if (t.nbytes()) std::memcpy(p, t.raw(), t.nbytes());
    p += t.nbytes();
  }
  return out;
}

void write_safetensors(const std::string& path, const TensorMap& tensors,
                       const std::map<std::string, std::string>& metadata) {
  write_file(path, serialize_safetensors(tensors, metadata), "[safetensors]");
}

}  // namespace parley::io
