// ProtoReader: a schema-less reader of the protobuf wire format, enough to pull tensors
// out of ONNX files (and, later, SentencePiece models) without libprotobuf. It walks
// the fields of one message at a time; nested messages are read by asking for a child
// reader over a length-delimited field. Every length is checked against the enclosing
// message and the buffer (through ByteReader), varints are at most 10 bytes, and
// nesting is bounded, so a hostile file is an Error, never a crash.
// Wire format: https://protobuf.dev/programming-guides/encoding/
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/byte_reader.h"

namespace parley::io {

// The wire types a field can have. Groups (3, 4) are deprecated and not accepted.
enum class WireType : uint8_t { varint = 0, fixed64 = 1, bytes = 2, fixed32 = 5 };

struct ProtoField {
  uint32_t number = 0;
  WireType type = WireType::varint;
  // varint: the raw 64-bit value; fixed64 / fixed32: the little-endian bits.
  uint64_t value = 0;
  // bytes: the payload (a view of the buffer) and its offset in the buffer.
  std::span<const uint8_t> payload;
  size_t payload_offset = 0;
};

class ProtoReader {
 public:
  // Messages nested deeper than this are rejected (protobuf's own default limit).
  static constexpr int kMaxDepth = 100;

  // A reader over a whole buffer holding one top-level message named `message`
  // ("ModelProto"). `source` names the format and file: "[onnx] model.onnx".
  ProtoReader(std::span<const uint8_t> buffer, std::string source, std::string_view message);

  // Reads the next field into `field`; false at the end of the message.
  bool next(ProtoField& field);

  // A reader over the message carried by the length-delimited `field`.
  ProtoReader child(const ProtoField& field, std::string_view message) const;

  // Typed views of a field; each checks the wire type and names `what` when it fails.
  uint64_t as_varint(const ProtoField& field, std::string_view what) const;
  int64_t as_int64(const ProtoField& field, std::string_view what) const;  // int64 / int32 / enum
  float as_float(const ProtoField& field, std::string_view what) const;    // fixed32
  std::string as_string(const ProtoField& field, std::string_view what) const;
  std::span<const uint8_t> as_bytes(const ProtoField& field, std::string_view what) const;

  // Repeated scalar fields arrive either packed (one length-delimited field) or as one
  // field per element; these append either form to `out`.
  void append_varints(const ProtoField& field, std::string_view what,
                      std::vector<uint64_t>& out) const;
  void append_fixed32(const ProtoField& field, std::string_view what,
                      std::vector<uint32_t>& out) const;
  void append_fixed64(const ProtoField& field, std::string_view what,
                      std::vector<uint64_t>& out) const;

  int depth() const { return depth_; }
  std::string_view message() const { return message_; }
  // "[onnx] model.onnx: TensorProto at byte 120: what": an invalid_argument Error.
  [[noreturn]] void fail(const std::string& what) const;

 private:
  ProtoReader(ByteReader reader, size_t begin, size_t end, std::string_view message, int depth);
  void expect(const ProtoField& field, WireType type, std::string_view what) const;
  uint64_t read_varint(ByteReader& r, size_t end) const;

  ByteReader r_;      // over the whole buffer, so offsets in messages are absolute
  size_t begin_ = 0;  // [begin_, end_): this message's bytes in the buffer
  size_t end_ = 0;
  std::string_view message_;  // a static name: "TensorProto"
  int depth_ = 0;
};

}  // namespace parley::io
