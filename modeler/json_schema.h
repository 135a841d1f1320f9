#pragma once
// The version of the JSON that `eventsim events|simulate|search|compare --json` print
// (docs/JSON.md). Raise it when a key is renamed or removed or its meaning changes; adding a key
// keeps it.

namespace evsim {

// 2: search's speedup_over_worst (over a pruned leftover) gave way to time_vs_best (issue 31).
inline constexpr int kJsonSchemaVersion = 2;

}  // namespace evsim
