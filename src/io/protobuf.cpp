#include "io/protobuf.h"

#include <bit>
#include <cstring>

namespace parley::io {

// fixed32/fixed64 values and packed arrays are little-endian; they are copied as is.
static_assert(std::endian::native == std::endian::little,
              "protobuf reader assumes a little-endian host");

namespace {

// Field numbers are 29 bits; 0 is never valid.
constexpr uint64_t kMaxFieldNumber = (uint64_t(1) << 29) - 1;
// A 64-bit varint takes at most 10 bytes, the 10th holding only bit 63.
constexpr int kMaxVarintBytes = 10;

std::string_view wire_type_name(WireType t) {
  switch (t) {
    case WireType::varint: return "varint";
    case WireType::fixed64: return "fixed64";
    case WireType::bytes: return "length-delimited";
    case WireType::fixed32: return "fixed32";
  }
  return "?";
}

}  // namespace

ProtoReader::ProtoReader(std::span<const uint8_t> buffer, std::string source,
                         std::string_view message)
    : r_(buffer, std::move(source)), begin_(0), end_(buffer.size()), message_(message) {}

ProtoReader::ProtoReader(ByteReader reader, size_t begin, size_t end, std::string_view message,
                         int depth)
    : r_(std::move(reader)), begin_(begin), end_(end), message_(message), depth_(depth) {
  r_.seek(begin);
}

void ProtoReader::fail(const std::string& what) const {
  throw Error(ErrorKind::invalid_argument, r_.source() + ": " + std::string(message_) +
                                               " at byte " + std::to_string(begin_) + ": " + what +
                                               " (at byte " + std::to_string(r_.offset()) + ")");
}

uint64_t ProtoReader::read_varint(ByteReader& r, size_t end) const {
  uint64_t v = 0;
  for (int i = 0;; ++i) {
    if (r.offset() >= end) fail("varint runs past the end of the " + std::string(message_));
    const uint8_t b = r.read<uint8_t>();
    if (i == kMaxVarintBytes - 1) {
      if (b & 0x80) fail("varint longer than 10 bytes");
      if (b > 1) fail("varint overflows 64 bits");
    }
    v |= uint64_t(b & 0x7f) << (7 * i);
    if (!(b & 0x80)) return v;
  }
}

bool ProtoReader::next(ProtoField& f) {
  if (r_.offset() >= end_) return false;
  const uint64_t tag = read_varint(r_, end_);
  const uint64_t number = tag >> 3;
  const uint32_t type = uint32_t(tag & 7);
  if (number == 0 || number > kMaxFieldNumber)
    fail("invalid field number " + std::to_string(number));
  f = ProtoField{};
  f.number = uint32_t(number);
  const std::string field = "field " + std::to_string(number);
  switch (type) {
    case 0:
      f.type = WireType::varint;
      f.value = read_varint(r_, end_);
      break;
    case 1:
      f.type = WireType::fixed64;
      if (end_ - r_.offset() < 8) fail(field + ": fixed64 runs past the end of the message");
      f.value = r_.read<uint64_t>();
      break;
    case 5:
      f.type = WireType::fixed32;
      if (end_ - r_.offset() < 4) fail(field + ": fixed32 runs past the end of the message");
      f.value = r_.read<uint32_t>();
      break;
    case 2: {
      f.type = WireType::bytes;
      const uint64_t n = read_varint(r_, end_);
      if (n > end_ - r_.offset())
        fail(field + ": length " + std::to_string(n) + " runs past the end of the message (" +
             std::to_string(end_ - r_.offset()) + " bytes left)");
      f.payload_offset = r_.offset();
      f.payload = r_.bytes(n);
      break;
    }
    case 3:
    case 4: fail(field + ": group wire type " + std::to_string(type) + " is not supported");
    default: fail(field + ": invalid wire type " + std::to_string(type));
  }
  return true;
}

ProtoReader ProtoReader::child(const ProtoField& f, std::string_view message) const {
  expect(f, WireType::bytes, message);
  if (depth_ + 1 > kMaxDepth)
    fail(std::string(message) + " nested deeper than " + std::to_string(kMaxDepth) + " messages");
  return ProtoReader(r_, f.payload_offset, f.payload_offset + f.payload.size(), message,
                     depth_ + 1);
}

void ProtoReader::expect(const ProtoField& f, WireType type, std::string_view what) const {
  if (f.type != type)
    fail("field " + std::to_string(f.number) + " (" + std::string(what) + ") has wire type " +
         std::string(wire_type_name(f.type)) + ", expected " + std::string(wire_type_name(type)));
}

uint64_t ProtoReader::as_varint(const ProtoField& f, std::string_view what) const {
  expect(f, WireType::varint, what);
  return f.value;
}

int64_t ProtoReader::as_int64(const ProtoField& f, std::string_view what) const {
  // int32 and enum values are sign-extended to 64 bits on the wire, so one cast serves all.
  return int64_t(as_varint(f, what));
}

float ProtoReader::as_float(const ProtoField& f, std::string_view what) const {
  expect(f, WireType::fixed32, what);
  const uint32_t bits = uint32_t(f.value);
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

std::string ProtoReader::as_string(const ProtoField& f, std::string_view what) const {
  expect(f, WireType::bytes, what);
  return std::string(reinterpret_cast<const char*>(f.payload.data()), f.payload.size());
}

std::span<const uint8_t> ProtoReader::as_bytes(const ProtoField& f, std::string_view what) const {
  expect(f, WireType::bytes, what);
  return f.payload;
}

void ProtoReader::append_varints(const ProtoField& f, std::string_view what,
                                 std::vector<uint64_t>& out) const {
  if (f.type == WireType::varint) {
    out.push_back(f.value);
    return;
  }
  expect(f, WireType::bytes, what);
  ByteReader r = r_;
  r.seek(f.payload_offset);
  const size_t end = f.payload_offset + f.payload.size();
  while (r.offset() < end) out.push_back(read_varint(r, end));
}

void ProtoReader::append_fixed32(const ProtoField& f, std::string_view what,
                                 std::vector<uint32_t>& out) const {
  if (f.type == WireType::fixed32) {
    out.push_back(uint32_t(f.value));
    return;
  }
  expect(f, WireType::bytes, what);
  if (f.payload.size() % 4)
    fail("packed " + std::string(what) + " of " + std::to_string(f.payload.size()) +
         " bytes is not a whole number of 4-byte values");
  const size_t n = f.payload.size() / 4;
  const size_t old = out.size();
  out.resize(old + n);
  if (n) std::memcpy(out.data() + old, f.payload.data(), n * 4);
}

void ProtoReader::append_fixed64(const ProtoField& f, std::string_view what,
                                 std::vector<uint64_t>& out) const {
  if (f.type == WireType::fixed64) {
    out.push_back(f.value);
    return;
  }
  expect(f, WireType::bytes, what);
  if (f.payload.size() % 8)
    fail("packed " + std::string(what) + " of " + std::to_string(f.payload.size()) +
         " bytes is not a whole number of 8-byte values");
  const size_t n = f.payload.size() / 8;
  const size_t old = out.size();
  out.resize(old + n);
  if (n) std::memcpy(out.data() + old, f.payload.data(), n * 8);
}

}  // namespace parley::io
