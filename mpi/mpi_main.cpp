#include "mpi/mpi_main.h"

#include <mpi.h>

#include <cstdio>
#include <exception>
#include <new>
#include <string>

#include "common/error.h"
#include "io/cli_errors.h"
#include "mpi/mpi_env.h"

namespace evsim {

std::optional<int> parseFlagsOnEveryRank(CLI::App& app, int argc, char** argv,
                                         const MpiWorld& world, std::string_view tool) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Every rank parsed the same arguments; one message is enough.
    if (world.rank == 0) return exitOnParseError(app, e, tool);
    return e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success) ? 0 : kInputErrorExitCode;
  }
  return std::nullopt;
}

int runMpiMain(int argc, char** argv, std::string_view program,
               const std::function<int(int, char**, const MpiWorld&)>& body) {
  MPI_Init(&argc, &argv);
  MpiWorld world;
  MPI_Comm_rank(MPI_COMM_WORLD, &world.rank);
  char host[MPI_MAX_PROCESSOR_NAME] = {};
  int host_length = 0;
  MPI_Get_processor_name(host, &host_length);
  world.host.assign(host, static_cast<size_t>(host_length));

  auto die = [&](const char* message, int code) {
    std::fprintf(stderr, "[rank %d@%s] %s\n", world.rank, world.host.c_str(), message);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    return code;
  };
  try {
    world = queryMpiWorld();
    int code = body(argc, argv, world);
    MPI_Finalize();
    return code;
  } catch (const CollectiveInputError& e) {
    // Every rank has this error; rank 0 reports it and all leave normally.
    if (world.rank == 0) {
      std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(program.size()), program.data(),
                   e.what());
    }
    MPI_Finalize();
    return kInputErrorExitCode;
  } catch (const InputError& e) {
    return die(e.what(), kInputErrorExitCode);
  } catch (const EnvironmentError& e) {
    return die(e.what(), kEnvironmentErrorExitCode);
  } catch (const std::bad_alloc&) {
    return die("out of memory", kEnvironmentErrorExitCode);
  } catch (const std::exception& e) {
    return die((std::string("internal error (a bug, please report it): ") + e.what()).c_str(),
               kBugExitCode);
  } catch (...) {
    return die("internal error (a bug, please report it): unknown exception", kBugExitCode);
  }
}

}  // namespace evsim
