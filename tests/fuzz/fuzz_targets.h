#pragma once
// The loaders fuzzed (issue 17, item 7), by index: what the libFuzzer targets (fuzz_loader.cpp,
// clang builds) and the mutation smoke of every build (mutation_smoke.cpp, ctest) feed.

#include <array>
#include <string>
#include <string_view>

namespace evsim::fuzz {

inline constexpr std::array<std::string_view, 8> kTargets = {
    "model", "cluster", "device", "profile", "events", "runs_csv", "nccl_log", "signature"};

// Feeds `text` to loader `target` as readInputFile would (invalid UTF-8 is refused before any
// loader sees it). Returns normally when the loader accepted the input or refused it with an
// InputError; anything else escapes (a finding).
void feed(int target, const std::string& text);

}  // namespace evsim::fuzz
