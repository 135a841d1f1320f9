#pragma once
// Units used across eventsim. Times are double microseconds and sizes int64 bytes everywhere; the
// names of variables and fields carry the unit (`_us`, `_bytes`) so a mix-up shows in review.

#include <cstdint>

namespace evsim {

inline constexpr double kUsPerSecond = 1e6;
inline constexpr double kUsPerMs = 1e3;
inline constexpr double kBytesPerGB = 1e9;  // links and memory bandwidth are quoted in GB/s
inline constexpr double kBytesPerGiB = 1073741824.0;  // memory capacity in GiB
inline constexpr double kFlopsPerTflop = 1e12;

// Bytes per second from a bandwidth in GB/s.
constexpr double bytesPerUs(double gb_per_s) { return gb_per_s * kBytesPerGB / kUsPerSecond; }

}  // namespace evsim
