#pragma once
// The main() of an MPI tool (eventprof, eventrun): MPI_Init, then `body`, then MPI_Finalize, with
// the project's error policy around it:
//   - CollectiveInputError (every rank has it): rank 0 prints "<program>: message" once, every rank
//     finalizes and exits with kInputErrorExitCode;
//   - any other error on one rank: "[rank r@host] message" and MPI_Abort (kInputErrorExitCode for
//     InputError, 1 otherwise), so the other ranks never hang.

#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <string_view>

#include "mpi/mpi_env.h"

namespace evsim {

// Parses the flags on every rank (each has the same arguments). Returns the exit code when the run
// ends here (--help: 0, a bad flag: kInputErrorExitCode with one line "<tool>: error: ..." printed
// by rank 0 only), nullopt to go on.
std::optional<int> parseFlagsOnEveryRank(CLI::App& app, int argc, char** argv,
                                         const MpiWorld& world, std::string_view tool);

// Returns the process exit code; never throws.
int runMpiMain(int argc, char** argv, std::string_view program,
               const std::function<int(int, char**, const MpiWorld&)>& body);

}  // namespace evsim
