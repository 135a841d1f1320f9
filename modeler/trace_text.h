#pragma once
// The trace writers' text buffer: appends literal pieces, integers and fixed three-decimal numbers
// without parsing a format string per call, and hands the bytes to the output stream in 1 MiB
// writes. Exporting all 2048 ranks of a GPT-3 trace (~18 GB) through fmt's runtime formatting
// was bound by format parsing (86% of the time, issue 14); these appenders make it bound by the
// disk.
//
// Numbers are byte-identical to fmt's: integers through fmt::format_int, fixed-point through
// appendFixed3, which prints what fmt's "{:.3f}" prints (a fast exact path, fmt as the fallback).

#include <fmt/compile.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <ostream>
#include <string_view>

namespace evsim {

class TraceText {
 public:
  // Flushes to the stream once the buffer holds this much, so memory stays flat.
  static constexpr size_t kFlushBytes = 1 << 20;

  explicit TraceText(std::ostream& out) : out_(out) { buf_.reserve(kFlushBytes + 4096); }

  TraceText& operator<<(std::string_view text) {
    buf_.append(text.data(), text.data() + text.size());
    return *this;
  }
  TraceText& operator<<(char c) {
    buf_.push_back(c);
    return *this;
  }
  template <typename Int>
  requires std::is_integral_v<Int> TraceText& operator<<(Int value) {
    const fmt::format_int text(value);
    buf_.append(text.data(), text.data() + text.size());
    return *this;
  }

  // What fmt::format("{:.3f}", value) prints.
  TraceText& fixed3(double value) {
    appendFixed3(buf_, value);
    return *this;
  }

  // Writes the buffer out when full (`force`: always), then empties it.
  void flush(bool force = false) {
    if (buf_.size() >= kFlushBytes || force) {
      out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
      buf_.clear();
    }
  }

  // Exact fast path: y = value * 1000 is within |y| * 2^-53 of the true product (one rounding),
  // so when y's fraction is farther than twice that from one half, rounding y to the nearest
  // integer rounds the true product the same way and the printed digits are fmt's. Ties, negative
  // values, NaN and values beyond 2^50 go through fmt itself.
  static void appendFixed3(fmt::memory_buffer& buf, double value) {
    const double y = value * 1000.0;
    if (value >= 0 && y < 0x1p50) {
      const double floor_y = std::floor(y);
      const double frac = y - floor_y;
      const double margin = y * 0x1p-51 + 0x1p-60;
      if (std::fabs(frac - 0.5) > margin) {
        const auto scaled = static_cast<uint64_t>(floor_y) + (frac > 0.5 ? 1 : 0);
        const fmt::format_int whole(scaled / 1000);
        buf.append(whole.data(), whole.data() + whole.size());
        const auto milli = static_cast<unsigned>(scaled % 1000);
        const char digits[4] = {'.', static_cast<char>('0' + milli / 100),
                                static_cast<char>('0' + milli / 10 % 10),
                                static_cast<char>('0' + milli % 10)};
        buf.append(digits, digits + 4);
        return;
      }
    }
    fmt::format_to(std::back_inserter(buf), FMT_COMPILE("{:.3f}"), value);
  }

 private:
  std::ostream& out_;
  fmt::memory_buffer buf_;
};

}  // namespace evsim
