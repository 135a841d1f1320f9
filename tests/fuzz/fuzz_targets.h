#pragma once
// The loaders fuzzed (issue 17, item 7), by index: what the libFuzzer targets (fuzz_loader.cpp,
// clang builds) and the mutation smoke of every build (mutation_smoke.cpp, ctest) feed.

#include <array>
#include <string>
#include <string_view>

namespace evsim::fuzz {

// profile_size: the input inside the events list of a generated 1,000-entry profile (the loader
// at size: entries streamed, an entry's error kept until the version is checked; issue 33).
// nccl_header: the input as the column header (and any lines) of an nccl-tests log whose data
// rows follow (a header ending at "time" read past the row, issue 33).
// profile_cbor: the binary profile database (io/profile_cbor.h), fed any bytes (not only UTF-8).
inline constexpr std::array<std::string_view, 11> kTargets = {
    "model",    "cluster",   "device",       "profile",     "events",      "runs_csv",
    "nccl_log", "signature", "profile_size", "nccl_header", "profile_cbor"};
inline constexpr int kProfileCborTarget = 10;

// Feeds `text` to loader `target` as readInputFile would (invalid UTF-8 is refused before any
// loader sees it). Returns normally when the loader accepted the input or refused it with an
// InputError; anything else escapes (a finding).
void feed(int target, const std::string& text);

}  // namespace evsim::fuzz
