#include "common/gzip_stream.h"

#include <string>

#include "common/error.h"

namespace evsim {

namespace {

constexpr size_t kChunk = 1 << 18;
// zlib's windowBits: 15 (32 KiB window) + 16 selects the gzip wrapper instead of zlib's.
constexpr int kGzipWindowBits = 15 + 16;

}  // namespace

GzipStreamBuf::GzipStreamBuf(std::ostream& target) : target_(target), in_(kChunk), out_(kChunk) {
  if (deflateInit2(&zs_, Z_DEFAULT_COMPRESSION, Z_DEFLATED, kGzipWindowBits, 8,
                   Z_DEFAULT_STRATEGY) != Z_OK) {
    EVSIM_THROW(EnvironmentError, "gzip: zlib could not start a stream");
  }
  setp(in_.data(), in_.data() + in_.size());
}

GzipStreamBuf::~GzipStreamBuf() { deflateEnd(&zs_); }

void GzipStreamBuf::deflateBuffered(int flush) {
  zs_.next_in = reinterpret_cast<Bytef*>(pbase());
  zs_.avail_in = static_cast<uInt>(pptr() - pbase());
  do {
    zs_.next_out = reinterpret_cast<Bytef*>(out_.data());
    zs_.avail_out = static_cast<uInt>(out_.size());
    const int rc = deflate(&zs_, flush);
    if (rc == Z_STREAM_ERROR) EVSIM_THROW(EnvironmentError, "gzip: zlib stream error");
    target_.write(out_.data(), static_cast<std::streamsize>(out_.size() - zs_.avail_out));
    if (!target_) EVSIM_THROW(EnvironmentError, "gzip: writing the compressed output failed");
  } while (zs_.avail_out == 0);
  setp(in_.data(), in_.data() + in_.size());
}

GzipStreamBuf::int_type GzipStreamBuf::overflow(int_type ch) {
  deflateBuffered(Z_NO_FLUSH);
  if (!traits_type::eq_int_type(ch, traits_type::eof())) {
    *pptr() = traits_type::to_char_type(ch);
    pbump(1);
  }
  return traits_type::not_eof(ch);
}

int GzipStreamBuf::sync() {
  // Only buffered input is handed over; the compressor keeps its state until finish().
  deflateBuffered(Z_NO_FLUSH);
  return 0;
}

void GzipStreamBuf::finish() {
  if (finished_) return;
  deflateBuffered(Z_FINISH);
  finished_ = true;
}

bool isGzipPath(const std::string& path) {
  return path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
}

}  // namespace evsim
