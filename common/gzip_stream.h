#pragma once
// An output stream that gzip-compresses (zlib, the gzip format Perfetto and chrome://tracing open)
// into another stream: `--trace timeline.json.gz`. finish() writes the gzip trailer and must be
// called before the target is closed; a stream destroyed unfinished leaves a truncated file,
// which the atomic writer then discards.

#include <zlib.h>

#include <ostream>
#include <streambuf>
#include <vector>

namespace evsim {

class GzipStreamBuf : public std::streambuf {
 public:
  explicit GzipStreamBuf(std::ostream& target);
  ~GzipStreamBuf() override;
  GzipStreamBuf(const GzipStreamBuf&) = delete;
  GzipStreamBuf& operator=(const GzipStreamBuf&) = delete;

  // Compresses what is buffered and writes the trailer. Throws EnvironmentError on a zlib or
  // target failure.
  void finish();

 protected:
  int_type overflow(int_type ch) override;
  int sync() override;

 private:
  void deflateBuffered(int flush);

  std::ostream& target_;
  z_stream zs_{};
  std::vector<char> in_, out_;
  bool finished_ = false;
};

class GzipOstream : public std::ostream {
 public:
  explicit GzipOstream(std::ostream& target) : std::ostream(nullptr), buf_(target) { rdbuf(&buf_); }
  void finish() { buf_.finish(); }

 private:
  GzipStreamBuf buf_;
};

// True when `path` ends in ".gz".
bool isGzipPath(const std::string& path);

}  // namespace evsim
