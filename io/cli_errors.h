#pragma once
// How every tool ends on a command-line error (eventsim, eventprof, eventrun): --help prints as
// CLI11 prints it and exits 0; any other parse error is one line naming the tool, the flag and
// the problem — "eventsim: error: --micro-batch: Could not convert: x" — and exit code 2, where
// CLI11's own exit() prints two lines without the tool's name.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string_view>

#include "common/error.h"

namespace evsim {

// `suffix`: where the flag's value came from, when not the command line (io/args_file.h).
inline int exitOnParseError(const CLI::App& app, const CLI::ParseError& e, std::string_view tool,
                            std::string_view suffix = "") {
  if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
  fmt::print(stderr, "{}: error: {}{}\n", tool, e.what(), suffix);
  return kInputErrorExitCode;
}

}  // namespace evsim
