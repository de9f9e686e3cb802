#include "io/npy.h"

#include <cstring>
#include <optional>
#include <string_view>

#include "io/byte_reader.h"
#include "io/io_util.h"
#include "io/mapped_file.h"

namespace parley::io {

namespace {

constexpr uint8_t kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
// numpy pads the header so the data starts at a multiple of 64 bytes.
constexpr size_t kHeaderAlign = 64;

struct DescrName {
  std::string_view descr;
  DType dtype;
};
constexpr DescrName kDescrs[] = {{"<f4", DType::f32},
                                 {"<f2", DType::f16},
                                 {"<i4", DType::i32},
                                 {"|i1", DType::i8},
                                 {"<i1", DType::i8}};

struct Header {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

// Parses the header dict, a Python literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (80, 201), }
// Like numpy, it requires exactly the keys descr, fortran_order and shape.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& source) : s_(text), source_(source) {}

  Header parse() {
    Header h;
    bool seen[3] = {false, false, false};
    ws();
    expect('{');
    for (;;) {
      ws();
      if (peek() == '}') break;
      const std::string key = quoted();
      ws();
      expect(':');
      ws();
      int slot = -1;
      if (key == "descr") {
        slot = 0;
        if (peek() != '\'' && peek() != '"')
          throw Error(ErrorKind::unsupported, source_ + ": structured dtypes are not supported");
        h.descr = quoted();
      } else if (key == "fortran_order") {
        slot = 1;
        h.fortran_order = boolean();
      } else if (key == "shape") {
        slot = 2;
        h.shape = tuple();
      } else {
        fail("unexpected key '" + key + "'");
      }
      if (seen[slot]) fail("duplicate key '" + key + "'");
      seen[slot] = true;
      ws();
      if (peek() != ',') break;
      ++pos_;
    }
    ws();
    expect('}');
    ws();
    if (pos_ != s_.size()) fail("unexpected text after the header dict");
    if (!seen[0] || !seen[1] || !seen[2]) fail("header needs the keys descr, fortran_order, shape");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ErrorKind::invalid_argument,
                source_ + ": bad header: " + what + " (header byte " + std::to_string(pos_) + ")");
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t')) ++pos_;
  }
  void expect(char c) {
    if (peek() != c || pos_ >= s_.size()) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  // A string in single or double quotes, without escapes (none of our keys or descrs
  // need them).
  std::string quoted() {
    const char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted string");
    const size_t end = s_.find(q, pos_ + 1);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string out(s_.substr(pos_ + 1, end - pos_ - 1));
    if (out.find('\\') != std::string::npos) fail("escapes in strings are not supported");
    pos_ = end + 1;
    return out;
  }
  bool boolean() {
    if (s_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (s_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    fail("expected True or False");
  }
  int64_t integer() {
    int64_t v = 0;
    const size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      if (v > (kMaxFileTensorElements - 9) / 10) fail("dimension too large");
      v = v * 10 + (s_[pos_++] - '0');
    }
    if (pos_ == start) fail("expected a non-negative integer");
    if (peek() == 'L') ++pos_;  // Python 2 long literals: (3L, 4L)
    return v;
  }
  std::vector<int64_t> tuple() {
    std::vector<int64_t> dims;
    expect('(');
    ws();
    while (peek() != ')') {
      if (dims.size() == size_t(Shape::kMaxDims))
        throw Error(ErrorKind::unsupported, source_ + ": more than " +
                                                std::to_string(Shape::kMaxDims) +
                                                " dimensions are not supported");
      dims.push_back(integer());
      ws();
      if (peek() == ',') {
        ++pos_;
        ws();
      } else if (peek() != ')') {
        fail("expected ',' or ')' in shape");
      }
    }
    ++pos_;
    return dims;
  }

  std::string_view s_;
  const std::string& source_;
  size_t pos_ = 0;
};

std::string_view descr_of(DType t) {
  switch (t) {
    case DType::f32: return "<f4";
    case DType::bf16: return "<f4";  // widened on write
    case DType::f16: return "<f2";
    case DType::i32: return "<i4";
    case DType::i8: return "|i1";
  }
  return "?";
}

// Reads the magic, version and header dict; leaves `r` at the data.
Header read_header(ByteReader& r, std::span<const uint8_t> bytes, const std::string& source) {
  check_arg(bytes.size() >= 8 && std::memcmp(bytes.data(), kMagic, 6) == 0,
            source + ": not a .npy array (bad magic)");
  r.skip(6);
  const auto major = r.read<uint8_t>();
  const auto minor = r.read<uint8_t>();
  check(major >= 1 && major <= 3 && minor == 0, ErrorKind::unsupported,
        source + ": .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
            " is not supported (1.0, 2.0, 3.0)");
  const uint64_t header_len = major == 1 ? r.read<uint16_t>() : r.read<uint32_t>();
  check_arg(header_len <= r.remaining(), source + ": header length " + std::to_string(header_len) +
                                             " runs past the end (" + std::to_string(bytes.size()) +
                                             " bytes)");
  const auto text = r.bytes(header_len);
  const Header h =
      HeaderParser(std::string_view(reinterpret_cast<const char*>(text.data()), text.size()),
                   source)
          .parse();
  return h;
}

}  // namespace

Tensor parse_npy(std::span<const uint8_t> bytes, std::shared_ptr<const void> owner,
                 const std::string& source) {
  ByteReader r(bytes, source);
  const Header h = read_header(r, bytes, source);
  check(!h.fortran_order || h.shape.size() <= 1, ErrorKind::unsupported,
        source + ": fortran_order arrays are not supported");
  std::optional<DType> dtype;
  for (const auto& d : kDescrs)
    if (d.descr == h.descr) dtype = d.dtype;
  check(dtype.has_value(), ErrorKind::unsupported,
        source + ": dtype '" + h.descr + "' is not supported (<f4, <f2, <i4, |i1)");
  const std::optional<int64_t> numel = checked_numel(h.shape);
  check_arg(numel.has_value(), source + ": shape has more than 2^50 elements");
  const Shape shape(h.shape.begin(), h.shape.end());
  const uint64_t nbytes = uint64_t(*numel) * dtype_size(*dtype);
  check_arg(nbytes == r.remaining(), source + ": " + std::string(dtype_name(*dtype)) + shape.str() +
                                         " needs " + std::to_string(nbytes) +
                                         " data bytes, found " + std::to_string(r.remaining()));
  return view_or_copy(bytes.data() + r.offset(), shape, *dtype, std::move(owner));
}

std::optional<Int64Array> parse_npy_int64(std::span<const uint8_t> bytes,
                                          const std::string& source) {
  ByteReader r(bytes, source);
  const Header h = read_header(r, bytes, source);
  if (h.descr != "<i8") return std::nullopt;
  const std::optional<int64_t> numel = checked_numel(h.shape);
  check_arg(numel.has_value(), source + ": shape has more than 2^50 elements");
  check_arg(uint64_t(*numel) * 8 == r.remaining(),
            source + ": int64 array of " + std::to_string(*numel) + " elements needs " +
                std::to_string(uint64_t(*numel) * 8) + " data bytes, found " +
                std::to_string(r.remaining()));
  // np.savez of a transposed index array (e.g. np.asarray(mask.nonzero()).T) is
  // fortran_order: column-major, read back into row-major here.
  check(!h.fortran_order || h.shape.size() <= 2, ErrorKind::unsupported,
        source + ": fortran_order arrays of more than 2 dimensions are not supported");
  Int64Array a{Shape(h.shape.begin(), h.shape.end()), std::vector<int64_t>(size_t(*numel))};
  if (*numel) std::memcpy(a.values.data(), bytes.data() + r.offset(), size_t(*numel) * 8);
  if (h.fortran_order && h.shape.size() == 2) {
    const int64_t rows = h.shape[0], cols = h.shape[1];
    std::vector<int64_t> c(a.values.size());
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) c[size_t(i * cols + j)] = a.values[size_t(j * rows + i)];
    a.values = std::move(c);
  }
  return a;
}

Tensor read_npy(const std::string& path) {
  auto file = MappedFile::open(path);
  return parse_npy(file->bytes(), file, "[npy] " + path);
}

std::vector<uint8_t> serialize_npy(const Tensor& tensor) {
  Tensor t = tensor.is_cuda() ? tensor.to(Device::cpu) : tensor;
  std::string dict =
      "{'descr': '" + std::string(descr_of(t.dtype())) + "', 'fortran_order': False, 'shape': (";
  for (int i = 0; i < t.ndim(); ++i) dict += (i ? ", " : "") + std::to_string(t.dim(i));
  dict += t.ndim() == 1 ? ",), }" : "), }";  // Python's one-element tuple: (5,)
  // magic(6) + version(2) + u16 length, then the dict padded with spaces and ending in '\n'.
  const size_t total = (10 + dict.size() + 1 + kHeaderAlign - 1) / kHeaderAlign * kHeaderAlign;
  dict.resize(total - 10 - 1, ' ');
  dict += '\n';

  const bool widen = t.dtype() == DType::bf16;
  const size_t data_bytes = widen ? size_t(t.numel()) * 4 : t.nbytes();
  std::vector<uint8_t> out(total + data_bytes);
  std::memcpy(out.data(), kMagic, 6);
  out[6] = 1;
  out[7] = 0;
  const auto len = uint16_t(dict.size());
  std::memcpy(out.data() + 8, &len, 2);
  std::memcpy(out.data() + 10, dict.data(), dict.size());
  uint8_t* data = out.data() + total;
  if (widen) {
    const auto* src = t.data<uint16_t>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      const float f = bf16_to_f32(src[i]);
      std::memcpy(data + 4 * i, &f, 4);
    }
  } else if (data_bytes) {
    std::memcpy(data, t.raw(), data_bytes);
  }
  return out;
}

void write_npy(const std::string& path, const Tensor& t) {
  write_file(path, serialize_npy(t), "[npy]");
}

}  // namespace parley::io
