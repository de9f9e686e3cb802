#include "io/ggml_legacy.h"

#include "io/byte_reader.h"
#include "io/ggml_types.h"
#include "io/io_util.h"
#include "io/mapped_file.h"

namespace parley::io {

namespace {

constexpr int32_t kMaxDims = 4;  // whisper.cpp reads ne[4]

int32_t read_count(ByteReader& r, const char* what, uint64_t min_bytes_each) {
  const auto n = r.read<int32_t>();
  if (n < 0 || uint64_t(n) > r.remaining() / min_bytes_each)
    r.fail(std::string(what) + " " + std::to_string(n) + " is impossible with " +
           std::to_string(r.remaining()) + " bytes left");
  return n;
}

WhisperHparams read_hparams(ByteReader& r) {
  WhisperHparams h;
  int32_t* fields[] = {&h.n_vocab,       &h.n_audio_ctx, &h.n_audio_state, &h.n_audio_head,
                       &h.n_audio_layer, &h.n_text_ctx,  &h.n_text_state,  &h.n_text_head,
                       &h.n_text_layer,  &h.n_mels,      &h.ftype};
  for (int32_t* f : fields) *f = r.read<int32_t>();
  return h;
}

Tensor read_mel_filters(ByteReader& r, const std::shared_ptr<const void>& owner) {
  const auto n_mel = r.read<int32_t>();
  const auto n_fft = r.read<int32_t>();
  const int64_t dims[2] = {n_mel, n_fft};
  const auto numel = checked_numel(dims);
  if (!numel || uint64_t(*numel) > r.remaining() / 4)
    r.fail("mel filters " + std::to_string(n_mel) + "x" + std::to_string(n_fft) +
           " do not fit in the remaining " + std::to_string(r.remaining()) + " bytes");
  const auto data = r.bytes(uint64_t(*numel) * 4);
  return view_or_copy(data.data(), Shape{n_mel, n_fft}, DType::f32, owner);
}

std::vector<std::string> read_vocab(ByteReader& r) {
  const int32_t n = read_count(r, "vocabulary size", 4);
  std::vector<std::string> vocab;
  vocab.reserve(size_t(n));
  for (int32_t i = 0; i < n; ++i) {
    const auto len = r.read<uint32_t>();
    if (len > r.remaining())
      r.fail("token " + std::to_string(i) + " length " + std::to_string(len) +
             " runs past the end");
    vocab.push_back(r.string(len));
  }
  return vocab;
}

// One tensor record: n_dims, name length, ggml type (int32 each), n_dims int32 dims
// (innermost first), the name, then the data.
void read_tensor(ByteReader& r, const std::shared_ptr<const void>& owner, TensorMap& out) {
  const auto n_dims = r.read<int32_t>();
  const auto name_len = r.read<int32_t>();
  const auto type = r.read<int32_t>();
  if (n_dims < 1 || n_dims > kMaxDims)
    r.fail("tensor with " + std::to_string(n_dims) + " dimensions (1 to 4 allowed)");
  int64_t ne[kMaxDims];
  for (int32_t i = 0; i < n_dims; ++i) ne[i] = r.read<int32_t>();
  if (name_len < 0 || uint64_t(name_len) > r.remaining())
    r.fail("tensor name length " + std::to_string(name_len) + " runs past the end");
  const std::string name = r.string(uint64_t(name_len));
  const std::string what = "tensor '" + name + "'";

  const std::span<const int64_t> dims(ne, size_t(n_dims));
  const auto numel = checked_numel(dims);
  if (!numel) r.fail(what + ": dimensions are negative or hold more than 2^50 elements");
  const auto info = ggml_type_info(uint32_t(type));
  if (type < 0 || !info) r.fail(what + ": unknown ggml type " + std::to_string(type));
  if (ne[0] % info->block_size != 0)
    r.fail(what + ": row length " + std::to_string(ne[0]) + " is not a multiple of the " +
           info->name + " block size");
  const uint64_t nbytes = uint64_t(*numel / info->block_size * info->block_bytes);
  if (nbytes > r.remaining())
    r.fail(what + ": " + std::to_string(nbytes) + " data bytes run past the end (" +
           std::to_string(r.remaining()) + " left)");
  const auto dtype = ggml_type_dtype(uint32_t(type));
  check(type == 0 || type == 1, ErrorKind::unsupported,
        r.source() + ": " + what + " has ggml type " + info->name +
            "; only f32 and f16 are supported");
  Shape shape;
  for (int32_t i = n_dims; i-- > 0;) shape.push_back(ne[i]);
  const auto data = r.bytes(nbytes);
  out.insert(r.source(), name, view_or_copy(data.data(), shape, *dtype, owner));
}

}  // namespace

GgmlWhisperFile parse_ggml_whisper(std::span<const uint8_t> bytes,
                                   std::shared_ptr<const void> owner, const std::string& name) {
  const std::string src = "[ggml] " + name;
  ByteReader r(bytes, src);
  check_arg(bytes.size() >= 4,
            src + ": file is " + std::to_string(bytes.size()) + " bytes, too short for the magic");
  const auto magic = r.read<uint32_t>();
  check_arg(magic == kGgmlMagic, src + ": bad magic (not a whisper.cpp ggml model)");
  GgmlWhisperFile f;
  f.hparams = read_hparams(r);
  f.mel_filters = read_mel_filters(r, owner);
  f.vocab = read_vocab(r);
  while (!r.at_end()) read_tensor(r, owner, f.tensors);
  return f;
}

GgmlWhisperFile read_ggml_whisper(const std::string& path) {
  auto file = MappedFile::open(path);
  return parse_ggml_whisper(file->bytes(), file, path);
}

}  // namespace parley::io
