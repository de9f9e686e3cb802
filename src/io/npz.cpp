#include "io/npz.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "io/byte_reader.h"
#include "io/mapped_file.h"
#include "io/npy.h"

namespace parley::io {

namespace {

// Record signatures and fixed sizes from PKWARE's APPNOTE.TXT (sections 4.3.7 - 4.3.16).
constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr size_t kLocalSize = 30;
constexpr size_t kCentralSize = 46;
constexpr size_t kEndSize = 22;
constexpr size_t kZip64LocatorSize = 20;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint32_t kFull32 = 0xffffffff;
constexpr uint16_t kFull16 = 0xffff;
// Deflate cannot expand data by more than about 1032:1; a larger claimed ratio is a
// corrupt size (and would make us allocate memory for nothing).
constexpr uint64_t kMaxDeflateRatio = 1032;

struct Directory {
  uint64_t entries = 0;
  uint64_t offset = 0;  // of the central directory
  uint64_t size = 0;
};

struct Entry {
  std::string name;
  uint16_t flags = 0, method = 0;
  uint32_t crc = 0;
  uint64_t csize = 0, usize = 0, local_offset = 0;
};

// The end of central directory record: the last signature whose comment fits in the file.
size_t find_end_record(std::span<const uint8_t> b, const std::string& src) {
  check_arg(b.size() >= kEndSize,
            src + ": file is " + std::to_string(b.size()) + " bytes, too short for a zip archive");
  const size_t lowest = b.size() >= kEndSize + 0xffff ? b.size() - kEndSize - 0xffff : 0;
  for (size_t pos = b.size() - kEndSize + 1; pos-- > lowest;) {
    uint32_t sig;
    uint16_t comment_len;
    std::memcpy(&sig, b.data() + pos, 4);
    std::memcpy(&comment_len, b.data() + pos + kEndSize - 2, 2);
    if (sig == kEndSig && comment_len <= b.size() - pos - kEndSize) return pos;
  }
  throw Error(ErrorKind::invalid_argument,
              src + ": not a zip archive (no end of central directory)");
}

Directory read_directory(std::span<const uint8_t> b, const std::string& src) {
  const size_t end_pos = find_end_record(b, src);
  ByteReader r(b, src);
  r.seek(end_pos + 4);
  const auto disk = r.read<uint16_t>();
  const auto cd_disk = r.read<uint16_t>();
  const auto disk_entries = r.read<uint16_t>();
  Directory d;
  d.entries = r.read<uint16_t>();
  d.size = r.read<uint32_t>();
  d.offset = r.read<uint32_t>();
  check(disk == 0 && cd_disk == 0 && disk_entries == d.entries, ErrorKind::unsupported,
        src + ": multi-disk zip archives are not supported");

  // ZIP64: a locator right before the end record points at the 64-bit end record.
  if (end_pos >= kZip64LocatorSize) {
    r.seek(end_pos - kZip64LocatorSize);
    if (r.read<uint32_t>() == kZip64LocatorSig) {
      r.skip(4);
      const auto rec = r.read<uint64_t>();
      check_arg(rec < end_pos, src + ": ZIP64 end record offset " + std::to_string(rec) +
                                   " is past the end record");
      r.seek(size_t(rec));
      check_arg(r.read<uint32_t>() == kZip64EndSig, src + ": bad ZIP64 end record signature");
      r.skip(8 + 2 + 2);
      const auto disk64 = r.read<uint32_t>();
      const auto cd_disk64 = r.read<uint32_t>();
      const auto disk_entries64 = r.read<uint64_t>();
      d.entries = r.read<uint64_t>();
      d.size = r.read<uint64_t>();
      d.offset = r.read<uint64_t>();
      check(disk64 == 0 && cd_disk64 == 0 && disk_entries64 == d.entries, ErrorKind::unsupported,
            src + ": multi-disk zip archives are not supported");
    } else {
      check_arg(d.entries != kFull16 && d.size != kFull32 && d.offset != kFull32,
                src + ": ZIP64 sizes without a ZIP64 end record");
    }
  }
  check_arg(d.offset <= end_pos && d.size <= end_pos - d.offset,
            src + ": central directory [" + std::to_string(d.offset) + ", +" +
                std::to_string(d.size) + ") runs past the end record at " +
                std::to_string(end_pos));
  check_arg(d.entries <= d.size / kCentralSize,
            src + ": " + std::to_string(d.entries) +
                " entries cannot fit in a central directory of " + std::to_string(d.size) +
                " bytes");
  return d;
}

// Replaces the 32-bit fields of `e` that are 0xFFFFFFFF with their values from the ZIP64
// extra field, which holds only those, in the order usize, csize, offset.
void apply_zip64_extra(Entry& e, std::span<const uint8_t> extra, const std::string& src) {
  ByteReader r(extra, src + ": entry '" + e.name + "' extra field");
  const bool need_u = e.usize == kFull32, need_c = e.csize == kFull32,
             need_o = e.local_offset == kFull32;
  while (r.remaining() >= 4) {
    const auto id = r.read<uint16_t>();
    const auto len = r.read<uint16_t>();
    auto field = r.bytes(len);
    if (id != kZip64ExtraId) continue;
    ByteReader z(field, r.source());
    if (need_u) e.usize = z.read<uint64_t>();
    if (need_c) e.csize = z.read<uint64_t>();
    if (need_o) e.local_offset = z.read<uint64_t>();
    return;
  }
  check_arg(!need_u && !need_c && !need_o,
            src + ": entry '" + e.name + "' has 0xFFFFFFFF sizes but no ZIP64 extra field");
}

std::vector<Entry> read_entries(std::span<const uint8_t> b, const Directory& d,
                                const std::string& src) {
  ByteReader r(b.subspan(size_t(d.offset), size_t(d.size)), src + ": central directory");
  std::vector<Entry> entries;
  entries.reserve(size_t(d.entries));
  for (uint64_t i = 0; i < d.entries; ++i) {
    check_arg(r.read<uint32_t>() == kCentralSig,
              src + ": bad signature of central directory entry " + std::to_string(i));
    Entry e;
    r.skip(4);  // versions made by / needed
    e.flags = r.read<uint16_t>();
    e.method = r.read<uint16_t>();
    r.skip(4);  // time, date
    e.crc = r.read<uint32_t>();
    e.csize = r.read<uint32_t>();
    e.usize = r.read<uint32_t>();
    const auto name_len = r.read<uint16_t>();
    const auto extra_len = r.read<uint16_t>();
    const auto comment_len = r.read<uint16_t>();
    const auto disk = r.read<uint16_t>();
    r.skip(6);  // internal, external attributes
    e.local_offset = r.read<uint32_t>();
    e.name = r.string(name_len);
    apply_zip64_extra(e, r.bytes(extra_len), src);
    r.skip(comment_len);
    check(disk == 0 || disk == kFull16, ErrorKind::unsupported,
          src + ": multi-disk zip archives are not supported");
    entries.push_back(std::move(e));
  }
  return entries;
}

// The entry's data: after its local header, whose name and extra lengths may differ from
// the central directory's.
std::span<const uint8_t> entry_data(std::span<const uint8_t> b, const Entry& e,
                                    const std::string& src) {
  const std::string what = src + ": entry '" + e.name + "'";
  check_arg(e.local_offset <= b.size() && b.size() - e.local_offset >= kLocalSize,
            what + ": local header offset " + std::to_string(e.local_offset) + " is past the end");
  ByteReader r(b, what);
  r.seek(size_t(e.local_offset));
  check_arg(r.read<uint32_t>() == kLocalSig, what + ": bad local header signature");
  r.skip(kLocalSize - 4 - 4);
  const auto name_len = r.read<uint16_t>();
  const auto extra_len = r.read<uint16_t>();
  check_arg(r.string(name_len) == e.name, what + ": local header names another file");
  r.skip(extra_len);
  check_arg(e.csize <= r.remaining(), what + ": " + std::to_string(e.csize) +
                                          " compressed bytes at offset " +
                                          std::to_string(r.offset()) + " run past the end (" +
                                          std::to_string(b.size()) + " bytes)");
  return r.bytes(e.csize);
}

// Raw deflate (no zlib header: window bits -15) of exactly e.usize bytes.
Tensor inflate_entry(std::span<const uint8_t> in, const Entry& e, const std::string& what) {
  check_arg(e.usize / kMaxDeflateRatio <= e.csize,
            what + ": " + std::to_string(e.usize) + " bytes cannot inflate from " +
                std::to_string(e.csize) + " compressed bytes");
  Tensor out = Tensor::empty({int64_t(e.usize)}, DType::i8);
  z_stream zs{};
  check(inflateInit2(&zs, -15) == Z_OK, ErrorKind::resource_exhausted,
        what + ": inflateInit failed");
  zs.next_in = const_cast<Bytef*>(in.data());
  zs.next_out = static_cast<Bytef*>(out.raw());
  uint64_t in_left = in.size(), out_left = e.usize;
  int rc = Z_OK;
  // zlib counts in 32-bit uInt: feed both buffers in slices.
  constexpr uint64_t kSlice = uint64_t(1) << 30;
  while (rc == Z_OK) {
    if (zs.avail_in == 0 && in_left) {
      zs.avail_in = uInt(std::min(in_left, kSlice));
      in_left -= zs.avail_in;
    }
    if (zs.avail_out == 0 && out_left) {
      zs.avail_out = uInt(std::min(out_left, kSlice));
      out_left -= zs.avail_out;
    }
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && in_left == 0) break;    // input ended early
    if (rc == Z_BUF_ERROR && zs.avail_out == 0 && out_left == 0) break;  // more output than usize
    if (rc == Z_BUF_ERROR) rc = Z_OK;                                    // refill and go on
  }
  const uint64_t produced = e.usize - out_left - zs.avail_out;
  const std::string zmsg = zs.msg ? zs.msg : "";
  inflateEnd(&zs);
  check_arg(rc == Z_STREAM_END,
            what + ": corrupt deflate data" + (zmsg.empty() ? "" : " (" + zmsg + ")"));
  check_arg(produced == e.usize, what + ": inflated to " + std::to_string(produced) +
                                     " bytes, the directory says " + std::to_string(e.usize));
  return out;
}

uint32_t crc32_of(std::span<const uint8_t> b) {
  uLong crc = crc32(0L, Z_NULL, 0);
  constexpr size_t kSlice = size_t(1) << 30;
  for (size_t off = 0; off < b.size(); off += kSlice)
    crc = crc32(crc, b.data() + off, uInt(std::min(kSlice, b.size() - off)));
  return uint32_t(crc);
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

TensorMap parse_npz(std::span<const uint8_t> bytes, std::shared_ptr<const void> owner,
                    const std::string& name, const NpzOptions& options) {
  const std::string src = "[npz] " + name;
  const Directory dir = read_directory(bytes, src);
  TensorMap out;
  for (const Entry& e : read_entries(bytes, dir, src)) {
    if (!ends_with(e.name, ".npy")) continue;  // directories, non-array members
    const std::string what = src + ": " + e.name;
    check(!(e.flags & 1), ErrorKind::unsupported,
          what + ": encrypted zip entries are not supported");
    check(e.method == 0 || e.method == 8, ErrorKind::unsupported,
          what + ": compression method " + std::to_string(e.method) +
              " is not supported (0 stored, 8 deflate)");
    const std::span<const uint8_t> data = entry_data(bytes, e, src);
    std::span<const uint8_t> npy = data;
    std::shared_ptr<const void> npy_owner = owner;
    if (e.method == 8) {
      auto buf = std::make_shared<Tensor>(inflate_entry(data, e, what));
      npy = {static_cast<const uint8_t*>(buf->raw()), size_t(e.usize)};
      npy_owner = buf;
    } else {
      check_arg(e.usize == e.csize, what + ": stored entry has size " + std::to_string(e.csize) +
                                        " but uncompressed size " + std::to_string(e.usize));
    }
    if (options.verify_crc)
      check_arg(crc32_of(npy) == e.crc, what + ": CRC-32 mismatch (corrupt archive)");
    const std::string array = e.name.substr(0, e.name.size() - 4);
    if (options.int64_arrays) {
      if (auto a = parse_npy_int64(npy, what)) {
        check_arg(options.int64_arrays->emplace(array, std::move(*a)).second,
                  src + ": duplicate array name '" + array + "'");
        continue;
      }
    }
    out.insert(src, array, parse_npy(npy, npy_owner, what));
  }
  return out;
}

TensorMap read_npz(const std::string& path, const NpzOptions& options) {
  auto file = MappedFile::open(path);
  return parse_npz(file->bytes(), file, path, options);
}

}  // namespace parley::io
