// Audio decoding to mono float at a given rate (see decode.h). The FFmpeg path mirrors
// what the ffmpeg CLI does for `-ac 1 -ar RATE -acodec pcm_s16le`: the decoder that
// avcodec_find_decoder picks, an unknown channel layout replaced by the default layout for
// its channel count (the CLI's guess_input_channel_layout), and one SwrContext with default
// options converting straight to s16 mono at RATE (what the auto-inserted aresample filter
// does), flushed at the end. The s16 samples are then divided by 32768.
#include "audio/decode.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>

#include "audio/wav.h"
#include "engine/error.h"

#ifdef PARLEY_HAS_FFMPEG
extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/error.h>
#include <libavutil/log.h>
#include <libavutil/mem.h>
#include <libavutil/opt.h>
#include <libswresample/swresample.h>
}
#endif

namespace parley {
namespace {

[[noreturn]] void fail(ErrorKind kind, const std::string& name, const std::string& what) {
  throw Error(kind, "[audio] " + name + ": " + what);
}

size_t max_samples_for(const DecodeOptions& o) {
  const double n = o.max_seconds * double(o.sample_rate);
  return n >= double(std::numeric_limits<size_t>::max() / 8)
             ? std::numeric_limits<size_t>::max() / 8
             : size_t(n);
}

// A read-only map of a whole input file (parley_audio links only parley_engine, so it maps
// its own files rather than using io::MappedFile).
class MappedInput {
 public:
  explicit MappedInput(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      fail(err == ENOENT ? ErrorKind::not_found : ErrorKind::invalid_argument, path,
           std::string("cannot open: ") + std::strerror(err));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      fail(ErrorKind::invalid_argument, path, "not a regular file");
    }
    size_ = size_t(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        const int err = errno;
        ::close(fd);
        fail(ErrorKind::resource_exhausted, path, std::string("cannot map: ") + std::strerror(err));
      }
      data_ = static_cast<const uint8_t*>(p);
    }
    ::close(fd);
  }
  ~MappedInput() {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  }
  MappedInput(const MappedInput&) = delete;
  MappedInput& operator=(const MappedInput&) = delete;
  std::span<const uint8_t> bytes() const { return {data_, size_}; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

#ifdef PARLEY_HAS_FFMPEG

// Appends s16 samples to `out` as float, enforcing the length cap.
void append_s16(std::vector<float>& out, const int16_t* s, size_t n, size_t max_samples,
                const std::string& name, double max_seconds) {
  if (out.size() + n > max_samples)
    fail(ErrorKind::resource_exhausted, name,
         "decoded audio exceeds the limit of " + std::to_string(max_seconds) + " s");
  for (size_t i = 0; i < n; ++i) out.push_back(float(s[i]) / 32768.0f);
}

std::string av_err(int err) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(err, buf, sizeof(buf));
  return buf;
}

// Memory source for a custom AVIOContext.
struct MemoryReader {
  std::span<const uint8_t> bytes;
  int64_t pos = 0;

  static int read(void* opaque, uint8_t* buf, int size) {
    auto* r = static_cast<MemoryReader*>(opaque);
    const int64_t left = int64_t(r->bytes.size()) - r->pos;
    if (left <= 0) return AVERROR_EOF;
    const int n = int(std::min<int64_t>(left, size));
    std::memcpy(buf, r->bytes.data() + r->pos, size_t(n));
    r->pos += n;
    return n;
  }
  static int64_t seek(void* opaque, int64_t offset, int whence) {
    auto* r = static_cast<MemoryReader*>(opaque);
    const int64_t size = int64_t(r->bytes.size());
    if (whence & AVSEEK_SIZE) return size;
    int64_t target = 0;
    switch (whence & ~AVSEEK_FORCE) {
      case SEEK_SET: target = offset; break;
      case SEEK_CUR: target = r->pos + offset; break;
      case SEEK_END: target = size + offset; break;
      default: return AVERROR(EINVAL);
    }
    if (target < 0) return AVERROR(EINVAL);
    r->pos = target;
    return target;
  }
};

// RAII owners of the FFmpeg objects of one decode.
struct Decoder {
  AVIOContext* io = nullptr;
  AVFormatContext* fmt = nullptr;
  AVCodecContext* codec = nullptr;
  SwrContext* swr = nullptr;
  AVPacket* packet = nullptr;
  AVFrame* frame = nullptr;
  ~Decoder() {
    av_frame_free(&frame);
    av_packet_free(&packet);
    swr_free(&swr);
    avcodec_free_context(&codec);
    avformat_close_input(&fmt);  // does not free a custom pb
    if (io) av_freep(&io->buffer);
    avio_context_free(&io);
  }
};

struct Converter {
  Decoder& d;
  const std::string& name;
  const DecodeOptions& options;
  size_t max_samples;
  std::vector<float> out;
  std::vector<int16_t> buf;

  // Converts `frame` (or flushes the resampler when null) and appends the output.
  void convert(const AVFrame* frame) {
    const int in_count = frame ? frame->nb_samples : 0;
    const int cap = swr_get_out_samples(d.swr, in_count);
    if (cap < 0) fail(ErrorKind::internal, name, "swr_get_out_samples failed");
    buf.resize(size_t(cap) + 1);
    uint8_t* dst = reinterpret_cast<uint8_t*>(buf.data());
    const int n =
        swr_convert(d.swr, &dst, cap + 1,
                    frame ? const_cast<const uint8_t**>(frame->extended_data) : nullptr, in_count);
    if (n < 0) fail(ErrorKind::invalid_argument, name, "resampling failed: " + av_err(n));
    append_s16(out, buf.data(), size_t(n), max_samples, name, options.max_seconds);
  }
};

// The decoder's input layout as the ffmpeg CLI sees it: an unspecified order becomes the
// default layout for that many channels.
AVChannelLayout input_layout(const AVCodecContext* c) {
  AVChannelLayout layout{};
  if (c->ch_layout.order == AV_CHANNEL_ORDER_UNSPEC || !av_channel_layout_check(&c->ch_layout))
    av_channel_layout_default(&layout, c->ch_layout.nb_channels);
  else
    av_channel_layout_copy(&layout, &c->ch_layout);
  return layout;
}

void open_input(Decoder& d, MemoryReader& reader, const std::string& name) {
  constexpr int kIoBuffer = 1 << 16;
  auto* buffer = static_cast<uint8_t*>(av_malloc(kIoBuffer));
  if (!buffer) fail(ErrorKind::resource_exhausted, name, "out of memory");
  d.io = avio_alloc_context(buffer, kIoBuffer, 0, &reader, &MemoryReader::read, nullptr,
                            &MemoryReader::seek);
  if (!d.io) {
    av_free(buffer);
    fail(ErrorKind::resource_exhausted, name, "out of memory");
  }
  d.fmt = avformat_alloc_context();
  if (!d.fmt) fail(ErrorKind::resource_exhausted, name, "out of memory");
  d.fmt->pb = d.io;
  d.fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
  // The name is a probing hint (its extension), as the CLI's path is.
  int err = avformat_open_input(&d.fmt, name.c_str(), nullptr, nullptr);
  if (err < 0) {
    d.fmt = nullptr;  // freed by avformat_open_input on failure
    fail(ErrorKind::invalid_argument, name, "not a readable audio file (" + av_err(err) + ")");
  }
  err = avformat_find_stream_info(d.fmt, nullptr);
  if (err < 0)
    fail(ErrorKind::invalid_argument, name, "cannot read stream info (" + av_err(err) + ")");
}

int open_decoder(Decoder& d, const std::string& name, int sample_rate) {
  const AVCodec* codec = nullptr;
  const int stream = av_find_best_stream(d.fmt, AVMEDIA_TYPE_AUDIO, -1, -1, &codec, 0);
  if (stream == AVERROR_STREAM_NOT_FOUND)
    fail(ErrorKind::invalid_argument, name, "no audio stream");
  if (stream < 0 || !codec)
    fail(ErrorKind::invalid_argument, name,
         "no decoder for the audio stream (" + av_err(stream) + ")");
  d.codec = avcodec_alloc_context3(codec);
  int err = avcodec_parameters_to_context(d.codec, d.fmt->streams[stream]->codecpar);
  if (err >= 0) err = avcodec_open2(d.codec, codec, nullptr);
  if (err < 0)
    fail(ErrorKind::invalid_argument, name, "cannot open the decoder (" + av_err(err) + ")");
  if (d.codec->sample_rate <= 0 || d.codec->ch_layout.nb_channels <= 0)
    fail(ErrorKind::invalid_argument, name, "audio stream has no sample rate or channels");

  AVChannelLayout in_layout = input_layout(d.codec);
  AVChannelLayout mono = AV_CHANNEL_LAYOUT_MONO;
  err = swr_alloc_set_opts2(&d.swr, &mono, AV_SAMPLE_FMT_S16, sample_rate, &in_layout,
                            d.codec->sample_fmt, d.codec->sample_rate, 0, nullptr);
  av_channel_layout_uninit(&in_layout);
  if (err >= 0) err = swr_init(d.swr);
  if (err < 0)
    fail(ErrorKind::invalid_argument, name, "cannot set up resampling (" + av_err(err) + ")");
  return stream;
}

// Re-creates the resampler when a frame's format differs from the decoder's (mid-stream
// changes): the CLI reconfigures its filter graph then, which flushes the old one.
void check_frame_format(Converter& c, const AVFrame* f, int sample_rate) {
  if (f->format == c.d.codec->sample_fmt && f->sample_rate == c.d.codec->sample_rate &&
      f->ch_layout.nb_channels == c.d.codec->ch_layout.nb_channels)
    return;
  c.convert(nullptr);
  swr_free(&c.d.swr);
  c.d.codec->sample_fmt = AVSampleFormat(f->format);
  c.d.codec->sample_rate = f->sample_rate;
  av_channel_layout_uninit(&c.d.codec->ch_layout);
  av_channel_layout_copy(&c.d.codec->ch_layout, &f->ch_layout);
  AVChannelLayout in_layout = input_layout(c.d.codec);
  AVChannelLayout mono = AV_CHANNEL_LAYOUT_MONO;
  int err = swr_alloc_set_opts2(&c.d.swr, &mono, AV_SAMPLE_FMT_S16, sample_rate, &in_layout,
                                AVSampleFormat(f->format), f->sample_rate, 0, nullptr);
  av_channel_layout_uninit(&in_layout);
  if (err >= 0) err = swr_init(c.d.swr);
  if (err < 0)
    fail(ErrorKind::invalid_argument, c.name, "cannot set up resampling (" + av_err(err) + ")");
}

// Receives and converts every frame the decoder has ready. Returns AVERROR(EAGAIN) when it
// needs the next packet, AVERROR_EOF after the flush, or a decode error; after an error
// the CLI moves on to the next packet, and so does the caller.
int drain(Converter& c, int sample_rate) {
  while (true) {
    const int err = avcodec_receive_frame(c.d.codec, c.d.frame);
    if (err < 0) return err;
    check_frame_format(c, c.d.frame, sample_rate);
    c.convert(c.d.frame);
    av_frame_unref(c.d.frame);
  }
}

std::vector<float> decode_ffmpeg(std::span<const uint8_t> bytes, const std::string& name,
                                 const DecodeOptions& options) {
  // FFmpeg logs to stderr by default; parley reports through exceptions instead. The level
  // is process-wide in libavutil, so setting it on each call is idempotent.
  av_log_set_level(AV_LOG_QUIET);
  MemoryReader reader{bytes};
  Decoder d;
  open_input(d, reader, name);
  const int stream = open_decoder(d, name, options.sample_rate);
  d.packet = av_packet_alloc();
  d.frame = av_frame_alloc();
  if (!d.packet || !d.frame) fail(ErrorKind::resource_exhausted, name, "out of memory");

  Converter c{d, name, options, max_samples_for(options), {}, {}};
  int decode_errors = 0;
  int packets = 0;
  while (true) {
    const int err = av_read_frame(d.fmt, d.packet);
    if (err < 0) break;  // end of file, or a truncated/corrupt tail: keep what decoded
    if (d.packet->stream_index == stream) {
      ++packets;
      if (avcodec_send_packet(d.codec, d.packet) < 0) ++decode_errors;
      drain(c, options.sample_rate);
    }
    av_packet_unref(d.packet);
  }
  avcodec_send_packet(d.codec, nullptr);  // flush: the last frames, then AVERROR_EOF
  drain(c, options.sample_rate);
  c.convert(nullptr);
  if (c.out.empty() && (packets == 0 || decode_errors > 0))
    fail(ErrorKind::invalid_argument, name,
         packets == 0 ? "no audio data (empty or truncated file)" : "corrupt audio data");
  return std::move(c.out);
}

#endif  // PARLEY_HAS_FFMPEG

}  // namespace

bool has_ffmpeg() {
#ifdef PARLEY_HAS_FFMPEG
  return true;
#else
  return false;
#endif
}

std::vector<float> decode_audio(std::span<const uint8_t> bytes, const std::string& name,
                                const DecodeOptions& options) {
  check_arg(options.sample_rate > 0, "[audio] " + name + ": sample rate must be positive");
  check_arg(options.max_seconds > 0, "[audio] " + name + ": max_seconds must be positive");
  if (bytes.empty()) fail(ErrorKind::invalid_argument, name, "empty file (0 bytes)");
  if (const auto wav = parse_wav_header(bytes, name)) {
    if (options.wav_fast_path && wav_fast_path_ok(*wav, options.sample_rate)) {
      if (wav->data_bytes / 2 > max_samples_for(options))
        fail(ErrorKind::resource_exhausted, name,
             "audio exceeds the limit of " + std::to_string(options.max_seconds) + " s");
      return wav_pcm16_to_float(bytes, *wav);
    }
  }
#ifdef PARLEY_HAS_FFMPEG
  return decode_ffmpeg(bytes, name, options);
#else
  fail(ErrorKind::unsupported, name,
       "built without FFmpeg: only PCM s16 mono WAV at " + std::to_string(options.sample_rate) +
           " Hz can be read");
#endif
}

std::vector<float> decode_audio(std::span<const uint8_t> bytes, const std::string& name,
                                int sample_rate) {
  DecodeOptions options;
  options.sample_rate = sample_rate;
  return decode_audio(bytes, name, options);
}

std::vector<float> load_audio(const std::string& path, const DecodeOptions& options) {
  const MappedInput file(path);
  return decode_audio(file.bytes(), path, options);
}

std::vector<float> load_audio(const std::string& path, int sample_rate) {
  DecodeOptions options;
  options.sample_rate = sample_rate;
  return load_audio(path, options);
}

}  // namespace parley
