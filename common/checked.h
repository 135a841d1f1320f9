#pragma once
// Checked arithmetic for numbers that come from input (issue 17, item 3). Bounds where a value is
// read keep most products far inside int64; these helpers cover the products whose operands the
// bounds alone do not make safe (sizes of loops, allocations and byte counts built from several
// inputs). Each throws InputError naming `what` instead of wrapping (a wrapped count became a
// negative parameter count, or a group of 4294967298 GPUs became one of 2).

#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <string_view>
#include <type_traits>

#include "common/error.h"

namespace evsim {

// a x b, or InputError "`what`: a x b overflows". `what` names the input, e.g. "--global-batch".
template <std::integral T>
T checkedMul(T a, T b, std::string_view what) {
  T out{};
  if (__builtin_mul_overflow(a, b, &out)) {
    EVSIM_THROW(InputError, "{}: {} x {} is too large (overflows a {}-bit integer)", what, a, b,
                sizeof(T) * 8);
  }
  return out;
}

// a + b, or InputError as above.
template <std::integral T>
T checkedAdd(T a, T b, std::string_view what) {
  T out{};
  if (__builtin_add_overflow(a, b, &out)) {
    EVSIM_THROW(InputError, "{}: {} + {} is too large (overflows a {}-bit integer)", what, a, b,
                sizeof(T) * 8);
  }
  return out;
}

// `value` as a narrower or other integer type, or InputError when it does not fit (a static_cast
// would silently wrap 4294967298 to 2).
template <std::integral To, std::integral From>
To checkedNarrow(From value, std::string_view what) {
  To out{};
  if (__builtin_add_overflow(value, From{0}, &out)) {
    EVSIM_THROW(InputError, "{}: {} is out of range (at most {})", what, value,
                std::numeric_limits<To>::max());
  }
  return out;
}

// a + b and a x b clamped to T's maximum: for estimates compared against a capacity (a memory peak
// beyond int64 does not fit any device, and a search must see it as out of memory, not fail).
template <std::integral T>
T saturatingAdd(T a, T b) {
  T out{};
  return __builtin_add_overflow(a, b, &out) ? std::numeric_limits<T>::max() : out;
}
template <std::integral T>
T saturatingMul(T a, T b) {
  T out{};
  return __builtin_mul_overflow(a, b, &out) ? std::numeric_limits<T>::max() : out;
}

// A finite double in [0, 2^62] rounded down to int64 (a cast of a larger or non-finite value is
// undefined behaviour), or InputError. `what` names the input; on hot paths pass a callable that
// returns it, so that the name is formatted only when the check fails.
template <typename What>
int64_t checkedToInt64(double value, const What& what) {
  constexpr double kMax = 4611686018427387904.0;  // 2^62
  if (!std::isfinite(value) || value < 0 || value > kMax) {
    if constexpr (std::is_invocable_v<What>) {
      EVSIM_THROW(InputError, "{}: {:.4g} is out of range (0 to 2^62)", what(), value);
    } else {
      EVSIM_THROW(InputError, "{}: {:.4g} is out of range (0 to 2^62)", std::string_view(what),
                  value);
    }
  }
  return static_cast<int64_t>(value);
}

}  // namespace evsim
