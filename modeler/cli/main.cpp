// eventsim: events, simulate, search, compare, calibrate, import-nccl-tests, import-kineto,
// convert-profile,
// list. The composition root: parses the command line, runs one subcommand, and turns exceptions into one line and an
// exit code: 2 bad input, 1 the environment failed (disk, memory, a library call), 3 a bug
// (common/error.h).

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/strings.h"
#include "io/args_file.h"
#include "io/cli_errors.h"
#include "io/megatron_args.h"
#include "io/torchtitan_config.h"
#include "modeler/cli/calibrate_command.h"
#include "modeler/cli/collective_command.h"
#include "modeler/cli/compare_command.h"
#include "modeler/cli/convert_command.h"
#include "modeler/cli/events_command.h"
#include "modeler/cli/import_command.h"
#include "modeler/cli/import_kineto_command.h"
#include "modeler/cli/list_command.h"
#include "modeler/cli/search_command.h"
#include "modeler/cli/simulate_command.h"
#include "modeler/search_heap.h"

int main(int argc, char** argv) {
  // The executable owns its process, so it may set the heap as a search needs it; the library
  // does not (the Python module runs searches inside the user's interpreter).
  evsim::useSearchHeap();
  using evsim::ExpandedArgs;
  using evsim::expandArgsFile;
  CLI::App app{"eventsim: predict distributed transformer training from profiled events"};
  app.set_version_flag("--version", std::string("eventsim ") + EVSIM_VERSION);
  app.require_subcommand(1);
  evsim::registerEventsCommand(app);
  evsim::registerSimulateCommand(app);
  evsim::registerSearchCommand(app);
  evsim::registerCompareCommand(app);
  evsim::registerCalibrateCommand(app);
  evsim::registerImportCommand(app);
  evsim::registerImportKinetoCommand(app);
  evsim::registerConvertCommand(app);
  evsim::registerCollectiveCommand(app);
  evsim::registerListCommand(app);
  ExpandedArgs expanded;  // kept for the errors: a flag's value may come from --args-file
  try {
    // "eventsim simulat", "eventsim --verbose" and a bare "eventsim" were all "A subcommand is
    // required": name the word (or its absence) and the commands.
    const std::string first = argc > 1 ? argv[1] : "";
    if (first != "-h" && first != "--help" && first != "--version") {
      const CLI::App& commands = app;
      std::string names;
      bool known = false;
      for (const CLI::App* sub : commands.get_subcommands([](const CLI::App*) { return true; })) {
        names += (names.empty() ? "" : ", ") + sub->get_name();
        known = known || sub->check_name(first);
      }
      if (argc == 1) EVSIM_THROW(InputError, "no command given (commands: {})", names);
      if (first.starts_with("-")) {
        EVSIM_THROW(InputError, "{}: a command comes first (commands: {}; --help, --version)",
                    evsim::clipped(first), names);
      }
      if (!known) {
        EVSIM_THROW(InputError, "unknown command '{}' (commands: {})", first, names);
      }
    }
    // --args-file: a Megatron launch script's arguments in place (io/args_file.h). CLI11 takes
    // a vector last argument first.
    expanded = expandArgsFile(std::vector<std::string>(argv + 1, argv + argc));
    if (!expanded.dropped.empty()) {
      fmt::print(stderr, "eventsim: note: --args-file: left out, not set in the file: {}\n",
                 fmt::join(expanded.dropped, " "));
    }
    // The file's --seed, --lr, --save: Megatron's, without effect, named with the command line's
    // once the command's flags have parsed (io/megatron_args.h).
    evsim::deferFileIgnoredArgs(expanded.ignored);
    // --model train.toml: a torchtitan job config's arguments in place (io/torchtitan_config.h).
    std::vector<std::string> ignored;
    const std::vector<std::string> args = evsim::expandTorchtitanConfig(expanded.args, ignored);
    if (!ignored.empty()) {
      fmt::print(stderr, "eventsim: note: torchtitan config: without effect, left out: {}\n",
                 fmt::join(ignored, " "));
    }
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.parse(reversed);
    // A command that takes no Megatron arguments did not name the file's: said here, not dropped.
    if (const std::vector<std::string> left = evsim::takeFileIgnoredArgs(); !left.empty()) {
      fmt::print(stderr, "eventsim: {}\n", evsim::ignoredArgsNote(left));
    }
    // Output lost on a full or closed standard output must not end in exit code 0.
    std::cout.flush();
    if (!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout)) {
      EVSIM_THROW(EnvironmentError, "writing to standard output failed");
    }
  } catch (const CLI::ParseError& e) {
    return evsim::exitOnParseError(app, e, "eventsim", evsim::fromArgsFile(expanded, e.what()));
  } catch (const evsim::InputError& e) {
    fmt::print(stderr, "eventsim: error: {}{}\n", e.what(),
               evsim::fromArgsFile(expanded, e.what()));
    return evsim::kInputErrorExitCode;
  } catch (const evsim::EnvironmentError& e) {
    fmt::print(stderr, "eventsim: error: {}\n", e.what());
    return evsim::kEnvironmentErrorExitCode;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "eventsim: error: out of memory\n");
    return evsim::kEnvironmentErrorExitCode;
  } catch (const std::exception& e) {
    fmt::print(stderr, "eventsim: internal error (a bug in eventsim, please report it): {}\n",
               e.what());
    return evsim::kBugExitCode;
  }
  return 0;
}
