#pragma once
// `eventsim convert-profile IN OUT`: a profile database from YAML to the binary (CBOR) form or back
// (io/profile_db.h, io/profile_cbor.h).

#include <CLI/CLI.hpp>

namespace evsim {

void registerConvertCommand(CLI::App& app);

}  // namespace evsim
