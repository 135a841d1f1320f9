#pragma once
// The constants of the binary profile's layout (profile_cbor.h) that its reader
// (profile_cbor.cpp) and its writer (profile_cbor_write.cpp) both need: the format name, the
// layout versions and the fixed-width CBOR heads. Shared only by those two files.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace evsim {

constexpr std::string_view kFormatName = "eventsim-profile";
// Layout 1 (session 9's files, still read): the columns are byte strings inside the map. Layout 2
// (written now): the map refers to them in the file's trailing column bytes (profile_cbor.h).
constexpr int64_t kColumnsInlineVersion = 1;
constexpr int64_t kColumnsByReferenceVersion = 2;
constexpr size_t kFixedHeadBytes = 9;
constexpr uint8_t kMajorUnsigned = 0, kMajorBytes = 2;

}  // namespace evsim
