#pragma once
// The version of the JSON that `eventsim events|simulate|search|compare --json` print
// (docs/JSON.md). Raise it when a key is renamed or removed or its meaning changes; adding a key
// keeps it.

namespace evsim {

inline constexpr int kJsonSchemaVersion = 1;

}  // namespace evsim
