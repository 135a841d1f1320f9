#pragma once
// The main() of an MPI tool (eventprof, eventrun): MPI_Init, then `body`, then MPI_Finalize, with
// the project's error policy around it:
//   - CollectiveInputError (every rank has it): rank 0 prints "<program>: message" once, every rank
//     finalizes and exits with kInputErrorExitCode;
//   - any other error on one rank: "[rank r@host] message" and MPI_Abort (kInputErrorExitCode for
//     InputError, 1 otherwise), so the other ranks never hang.

#include <functional>
#include <string_view>

#include "profiler/mpi_env.h"

namespace evsim {

// Returns the process exit code; never throws.
int runMpiMain(int argc, char** argv, std::string_view program,
               const std::function<int(int, char**, const MpiWorld&)>& body);

}  // namespace evsim
