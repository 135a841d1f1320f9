#pragma once
// The binary profile database (issue 33, item 2): the same content as the YAML form
// (io/profile_db.h), in CBOR (RFC 8949) through nlohmann-json, laid out as columns.
//
// Why columns: a profile is a table of a few hundred thousand rows of the same nine fields. Row
// by row, every entry would be a CBOR map whose keys repeat in every row and the parser would
// build (and free) a node per field; as columns the file is a small header and a dozen arrays
// read in place: the signatures one after another ('\n' after each), the numbers as
// little-endian float64 / int32 arrays. What makes a row valid is checked exactly as in the YAML
// (the same rules, messages naming "events[i].<column>"). A 400,000-entry profile loads in about
// a tenth of its YAML's time (bench/RESULTS.md); the rest is per row (the signature's parse, the
// records), not the format.
//
// File layout (schema_version 2, written since session 11): the 3-byte CBOR self-describe tag
// D9 D9 F7 (the magic: how a reader tells it from YAML, whatever the file's name), then a CBOR
// sequence (RFC 8742) of three items:
//   1. the header's length H: a CBOR unsigned of fixed width (1B + 8 bytes, big-endian);
//   2. the header, H bytes, one CBOR map:
//      format: "eventsim-profile"        schema_version: 2
//      metadata: {backend, date, world_size, ranks_per_node, hosts: [..], devices: [..],
//                 versions: {name: version}}                    # as in the YAML
//      events: {entries: N,
//               signature: [offset, bytes] (N signatures, each followed by '\n'),
//               median_us, min_us, max_us, stddev_us: [offset, bytes] (N float64 LE),
//               count: [offset, bytes] (N int32 LE),
//               measured_group_size: [offset, bytes] (N int32 LE; 0 for compute events),
//               measured_nodes, measured_ranks_per_node: [offset, bytes] (N int32 LE; 0 for
//                 compute events and unknown layouts; session 15, absent before: derived then),
//               algbw_gb_s, busbw_gb_s: [offset, bytes] (N float64 LE; 0 for compute events)}
//      overlap: {entries: K, compute, transfer: (signatures as above),
//                alone_median_us, alone_min_us, ..., alone_count, beside_median_us, ...}
//   3. the column bytes: a CBOR byte string with a fixed-width head (5B + 8 bytes), the rest of
//      the file; every [offset, bytes] above points into it.
// Why the columns sit outside the map: nlohmann's CBOR reader copies a byte string a byte at a
// time into a vector of its own (a fifth of the load time and the file's size again in memory);
// referenced, they are read in place from the file's bytes.
// Layout 1 (schema_version 1, session 9-10 files) is still read: the magic then one map whose
// columns are CBOR byte strings inside it.
// kind, group_size, nodes, ranks_per_node, bytes and scaled, which the YAML repeats beside the
// signature (and checks against it), follow from the signature and measured_group_size here.

#include <string>
#include <string_view>

namespace evsim {

class ProfileDb;

// The CBOR self-describe tag (RFC 8949, section 3.4.6) that starts every binary profile.
inline constexpr std::string_view kProfileCborMagic = "\xD9\xD9\xF7";

// True when `bytes` starts with the magic (the file is read as a binary profile).
bool isCborProfile(std::string_view bytes);

// The whole file's bytes.
std::string encodeProfileCbor(const ProfileDb& db);

// Reads a binary profile; `origin` names it in errors. A corrupt or truncated file, a wrong
// version, or an entry the YAML loader would refuse is one InputError naming origin and where.
// The event rows keep `bytes` (layout 2) and are decoded when first looked up (io/profile_rows.h).
ProfileDb decodeProfileCbor(std::string bytes, const std::string& origin);

}  // namespace evsim
