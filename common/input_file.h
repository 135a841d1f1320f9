#pragma once
// Every input file the tools read (YAML configs, profile databases, events files, CSVs, nccl-tests
// logs) goes through readInputFile (issue 17, item 2): a regular file (not a directory, /dev/zero
// or a FIFO that never ends), at most the input size limit (64 MiB, or EVSIM_MAX_INPUT_MIB), and
// valid UTF-8 (so names read from it survive into JSON). Anything else is one InputError naming
// the file and the rule.

#include <cstdint>
#include <string>
#include <string_view>

namespace evsim {

inline constexpr int64_t kDefaultMaxInputMiB = 64;

// The limit in bytes: EVSIM_MAX_INPUT_MIB (a positive integer) when set, else 64 MiB. InputError
// for a malformed value.
int64_t maxInputBytes();

// The whole file, checked as above; `what` names the kind of input in messages ("model",
// "profile database").
std::string readInputFile(const std::string& path, const std::string& what);

// The same checks but the UTF-8 one: for binary inputs (a CBOR profile database, io/profile_db.h).
std::string readInputBytes(const std::string& path, const std::string& what);

// The offset of the first byte of `text` that is not part of a valid UTF-8 sequence, or -1.
int64_t firstInvalidUtf8(std::string_view text);

}  // namespace evsim
