#include "common/input_file.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "common/error.h"
#include "common/strings.h"

namespace evsim {

namespace fs = std::filesystem;

int64_t maxInputBytes() {
  constexpr int64_t kMiB = int64_t{1} << 20;
  const char* env = std::getenv("EVSIM_MAX_INPUT_MIB");
  if (env == nullptr || *env == '\0') return kDefaultMaxInputMiB * kMiB;
  const std::optional<int64_t> mib = parseInteger(env);
  if (!mib || *mib <= 0 || *mib > (int64_t{1} << 20)) {
    EVSIM_THROW(InputError, "EVSIM_MAX_INPUT_MIB={}: must be a whole number of MiB, 1 to 1048576",
                env);
  }
  return *mib * kMiB;
}

int64_t firstInvalidUtf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    // ASCII eight bytes at a time (a profile's signatures are ASCII: 40 MB checked in ~10 ms).
    uint64_t word = 0;
    if (i + 8 <= n && (std::memcpy(&word, s + i, 8), (word & 0x8080808080808080ULL) == 0)) {
      i += 8;
      continue;
    }
    const unsigned char c = s[i];
    size_t len = 0;
    uint32_t min = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, min = 0x10000;
    } else {
      return static_cast<int64_t>(i);
    }
    if (i + len > n) return static_cast<int64_t>(i);
    uint32_t cp = c & (0xFF >> (len + 1));
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return static_cast<int64_t>(i);
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    // Overlong forms, UTF-16 surrogates and code points past U+10FFFF are not UTF-8.
    if (cp < min || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
      return static_cast<int64_t>(i);
    }
    i += len;
  }
  return -1;
}

std::string readInputBytes(const std::string& path, const std::string& what) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec && status.type() != fs::file_type::not_found) {
    // A symbolic-link loop, a name too long, a directory without permission: the system says.
    EVSIM_THROW(InputError, "{}: cannot read the {} ({})", clipped(path, 200), what, ec.message());
  }
  if (status.type() == fs::file_type::not_found) {
    EVSIM_THROW(InputError, "{}: cannot open file (no such {})", path, what);
  }
  if (status.type() == fs::file_type::directory) {
    EVSIM_THROW(InputError, "{}: is a directory, not a {} file", path, what);
  }
  if (status.type() != fs::file_type::regular) {
    EVSIM_THROW(InputError, "{}: not a regular file (a {} must be a file)", path, what);
  }
  const int64_t limit = maxInputBytes();
  const auto size = fs::file_size(path, ec);
  if (!ec && static_cast<int64_t>(size) > limit) {
    EVSIM_THROW(InputError,
                "{}: {} MiB is larger than the {} MiB limit for a {} (set EVSIM_MAX_INPUT_MIB to "
                "raise it)",
                path, (static_cast<int64_t>(size) + (1 << 20) - 1) >> 20, limit >> 20, what);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) EVSIM_THROW(InputError, "{}: cannot open {}: {}", path, what, std::strerror(errno));
  // In blocks (a 40 MB binary profile is read at disk speed, not a character at a time); up to
  // one byte past the limit, so a file that grew while read is still caught below.
  std::string text;
  if (!ec) text.reserve(static_cast<size_t>(size) + 1);
  constexpr size_t kBlock = size_t{1} << 20;
  while (in && static_cast<int64_t>(text.size()) <= limit) {
    const size_t at = text.size();
    // Within the reserved room while the file is its stated size: a block past it would move the
    // whole text to a buffer twice the size (a second copy of a 40 MB profile at the peak).
    const size_t block = !ec && at <= size ? std::min(kBlock, static_cast<size_t>(size) + 1 - at)
                                           : kBlock;
    text.resize(at + block);
    in.read(text.data() + at, static_cast<std::streamsize>(block));
    text.resize(at + static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) EVSIM_THROW(InputError, "{}: read error", path);
  if (static_cast<int64_t>(text.size()) > limit) {  // grew while read
    EVSIM_THROW(InputError, "{}: larger than the {} MiB limit for a {}", path, limit >> 20, what);
  }
  return text;
}

std::string readInputFile(const std::string& path, const std::string& what) {
  std::string text = readInputBytes(path, what);
  if (const int64_t bad = firstInvalidUtf8(text); bad >= 0) {
    EVSIM_THROW(InputError, "{}: not UTF-8 text (invalid byte at offset {})", path, bad);
  }
  return text;
}

}  // namespace evsim
