// `eventsim._core`, the native half of the `eventsim` Python package (python/eventsim/: the typed
// API over it). Each function returns what `eventsim <command> --json` prints, as Python objects:
// simulate, search, events, collective, list and calibrate. Each call builds the CLI's
// own subcommand and parses a command line made from the keyword arguments, so flags, aliases,
// defaults, checks and messages are the CLI's, and no second implementation can drift from it.
// The subcommand hands its report to a sink (modeler/cli/json_sink.h) instead of standard output.

#include <fmt/format.h>
#include <pybind11/pybind11.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <filesystem>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/cancel.h"
#include "common/data_dir.h"
#include "common/error.h"
#include "io/args_file.h"
#include "io/torchtitan_config.h"
#include "modeler/cli/calibrate_command.h"
#include "modeler/cli/collective_command.h"
#include "modeler/cli/events_command.h"
#include "modeler/cli/json_sink.h"
#include "modeler/cli/list_command.h"
#include "modeler/cli/search_command.h"
#include "modeler/cli/simulate_command.h"

namespace py = pybind11;

namespace evsim {
namespace {

// A keyword the subcommand has no flag for, or a value of the wrong Python type: TypeError, as
// Python raises for a bad keyword argument.
class KeywordError : public InputError {
 public:
  using InputError::InputError;
};

using Registrar = void (*)(CLI::App&, JsonSink);

struct Command {
  const char* name;  // the subcommand, and the Python function
  Registrar add;
};

constexpr Command kSimulate{"simulate", &registerSimulateCommand};
constexpr Command kSearch{"search", &registerSearchCommand};
constexpr Command kEvents{"events", &registerEventsCommand};
constexpr Command kCollective{"collective", &registerCollectiveCommand};
constexpr Command kList{"list", &registerListCommand};
constexpr Command kCalibrate{"calibrate", &registerCalibrateCommand};

// The CLI's app with one subcommand, whose report goes to `report`.
std::unique_ptr<CLI::App> makeApp(const Command& command, std::optional<nlohmann::json>* report) {
  auto app = std::make_unique<CLI::App>("eventsim");
  app->require_subcommand(1);
  command.add(*app, [report](const nlohmann::json& j) { *report = j; });
  return app;
}

// "sequence_parallel" -> "--sequence-parallel".
std::string flagName(std::string keyword) {
  std::replace(keyword.begin(), keyword.end(), '_', '-');
  return "--" + keyword;
}

// `text` as UTF-8, refused with a ValueError naming the keyword when it cannot be passed on a
// command line: a lone surrogate ("Unable to cast" before) or a NUL (which cut the value short).
std::string utf8Text(const Command& command, const std::string& keyword, const py::str& text) {
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(text.ptr(), &size);
  if (data == nullptr) {
    PyErr_Clear();
    EVSIM_THROW(InputError, "{}(): {}: not valid text (a lone surrogate?); give UTF-8 text",
                command.name, keyword);
  }
  std::string out(data, static_cast<size_t>(size));
  if (const size_t nul = out.find('\0'); nul != std::string::npos) {
    EVSIM_THROW(InputError, "{}(): {}: a NUL character at index {} is not allowed", command.name,
                keyword, nul);
  }
  return out;
}

// One value as the command line spells it; lists and tuples are comma-joined ("1,2,4").
std::string valueText(const Command& command, const std::string& keyword, py::handle value) {
  if (py::isinstance<py::bool_>(value)) {
    EVSIM_THROW(KeywordError, "{}(): {}={} but {} takes a value, not True/False", command.name,
                keyword, py::str(value).cast<std::string>(), flagName(keyword));
  }
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    std::string out;
    for (py::handle item : value) {
      out += (out.empty() ? "" : ",") + valueText(command, keyword, item);
    }
    return out;
  }
  return utf8Text(command, keyword, py::str(value));
}

// The command line for `kwargs`: `tp=8` -> "--tp=8", `sequence_parallel=True` -> a bare flag,
// False and None -> left out. "=" keeps a value that starts with '-' from reading as a flag.
std::vector<std::string> commandLine(const Command& command, const py::kwargs& kwargs) {
  std::optional<nlohmann::json> unused;
  std::unique_ptr<CLI::App> app = makeApp(command, &unused);
  CLI::App* cmd = app->get_subcommand(command.name);
  std::vector<std::string> args = {"eventsim", command.name};
  // `list`'s one positional argument (models, clusters, devices), as a keyword.
  if (kwargs.contains("what") && cmd->get_option_no_throw("what") != nullptr) {
    if (!kwargs["what"].is_none()) args.push_back(valueText(command, "what", kwargs["what"]));
  }
  for (const auto& [key, value] : kwargs) {
    std::string keyword = utf8Text(command, "a keyword", py::str(key));
    std::string flag = flagName(keyword);
    if (keyword == "what" && cmd->get_option_no_throw("what") != nullptr) continue;
    const CLI::Option* option = cmd->get_option_no_throw(flag);
    if (option == nullptr || keyword == "help") {
      EVSIM_THROW(KeywordError, "{}() got an unexpected keyword argument '{}' (no flag {})",
                  command.name, keyword, flag);
    }
    if (value.is_none()) continue;
    if (option->get_expected_max() == 0) {  // a flag: on or off
      if (!py::isinstance<py::bool_>(value)) {
        EVSIM_THROW(KeywordError, "{}(): {} is a flag: give True or False", command.name, keyword);
      }
      if (value.cast<bool>()) args.push_back(flag);
      continue;
    }
    args.push_back(flag + "=" + valueText(command, keyword, value));
  }
  return args;
}

// Runs the subcommand as the CLI would and returns its JSON report as Python objects.
py::object run(const Command& command, const py::kwargs& kwargs) {
  std::vector<std::string> args = commandLine(command, kwargs);
  // args_file= and model="train.toml" are read in place, as the CLI's main() reads them: the
  // subcommand's --args-file option only documents the flag, so given to the parser alone it
  // was dropped without a word (a missing file too). The CLI's notes are left out: the module
  // prints nothing.
  const ExpandedArgs expanded =
      expandArgsFile(std::vector<std::string>(args.begin() + 1, args.end()));
  std::vector<std::string> ignored;
  args = expandTorchtitanConfig(expanded.args, ignored);
  args.insert(args.begin(), "eventsim");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::optional<nlohmann::json> report;
  // The command runs on a worker thread while this one, every 50 ms, lets Python look at its
  // signals: Ctrl-C waited for the call to return before (issue 33). On KeyboardInterrupt the
  // worker is asked to stop (common/cancel.h), joined, and the interrupt raised.
  std::exception_ptr failure;
  std::atomic<bool> finished{false};
  std::thread worker([&] {
    try {
      std::unique_ptr<CLI::App> app = makeApp(command, &report);
      app->parse(static_cast<int>(argv.size()), argv.data());
    } catch (const CLI::ParseError& e) {
      // Said as the CLI says it: where a flag's value came from when an args file gave it.
      failure = std::make_exception_ptr(InputError(e.what() + fromArgsFile(expanded, e.what())));
    } catch (const KeywordError&) {
      failure = std::current_exception();
    } catch (const InputError& e) {
      failure = std::make_exception_ptr(InputError(e.what() + fromArgsFile(expanded, e.what())));
    } catch (...) {
      failure = std::current_exception();
    }
    finished.store(true);
  });
  bool interrupted = false;
  while (!finished.load()) {
    {
      // A search may run for a while on every core: other Python threads go on meanwhile.
      py::gil_scoped_release release;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!interrupted && PyErr_CheckSignals() != 0) {
      interrupted = true;  // the KeyboardInterrupt stays set while the worker stops
      requestCancel(true);
    }
  }
  {
    py::gil_scoped_release release;
    worker.join();
  }
  requestCancel(false);
  if (interrupted) {
    py::error_already_set keyboard_interrupt;  // the KeyboardInterrupt PyErr_CheckSignals set
    throw keyboard_interrupt;
  }
  if (failure) std::rethrow_exception(failure);
  EVSIM_CHECK(report.has_value(), "eventsim {} returned without a report", command.name);
  // Through the text the CLI prints, so a value is exactly what json.loads of `--json` gives
  // (NaN, say, prints as null).
  return py::module_::import("json").attr("loads")(report->dump());
}

// The subcommand's flags as CLI11 lists them, for help(eventsim.simulate).
std::string docstring(const Command& command, const char* type, const char* returns) {
  std::optional<nlohmann::json> unused;
  std::unique_ptr<CLI::App> app = makeApp(command, &unused);
  return fmt::format(
      "{0}(**kwargs) -> {1}\n\n"
      "Runs `eventsim {0} --json` and returns {2}. Keywords are the command's long flags with "
      "'_' for '-' (tp=8, sequence_parallel=True, micro_batch=[1, 2]): a flag takes True or "
      "False, a list is comma-joined, None is left out. Bad input raises ValueError with the "
      "CLI's message; an unknown keyword, TypeError.\n\n{3}",
      command.name, type, returns, app->get_subcommand(command.name)->help());
}

// The bundled configs of an installed package: <site-packages>/eventsim/_core*.so with the
// prefix's share/eventsim/configs four folders up (lib/pythonX.Y/site-packages/eventsim), as both
// `pip install .` and `cmake --install` lay them out. A module in the build tree has none there
// and keeps the source tree's (common/data_dir.h).
void findInstalledConfigs(const std::string& module_file) {
  namespace fs = std::filesystem;
  const fs::path installed = fs::path(module_file).parent_path() / ".." / ".." / ".." / ".." /
                             "share" / "eventsim" / "configs";
  std::error_code ec;
  if (fs::is_directory(installed, ec)) setBundledConfigDir(installed.lexically_normal());
}

}  // namespace
}  // namespace evsim

PYBIND11_MODULE(_core, m) {
  m.attr("__version__") = EVSIM_VERSION;
  using evsim::Command;
  // The docstrings carry the signatures: pybind11's own would read "simulate(**kwargs) -> object".
  py::options options;
  options.disable_function_signatures();
  m.doc() =
      "eventsim._core: the eventsim CLI's commands in process, each returning its --json report "
      "(the typed API is the eventsim package)";
  m.def("_set_module_file", [](const std::string& file) { evsim::findInstalledConfigs(file); });
  m.def("_config_dir", [] { return evsim::bundledConfigDir().string(); });
  py::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const evsim::KeywordError& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    } catch (const CLI::ParseError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const evsim::InputError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const evsim::EnvironmentError& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    } catch (const std::bad_alloc&) {
      PyErr_SetString(PyExc_MemoryError, "out of memory");
    } catch (const py::error_already_set&) {
      throw;  // pybind11's own: its translator raises them
    } catch (const py::builtin_exception&) {
      throw;
    } catch (const std::exception& e) {
      PyErr_SetString(
          PyExc_RuntimeError,
          fmt::format("internal error (a bug in eventsim, please report it): {}", e.what())
              .c_str());
    }
  });
  for (const Command* command : {&evsim::kSimulate, &evsim::kSearch, &evsim::kEvents,
                                 &evsim::kCollective, &evsim::kList, &evsim::kCalibrate}) {
    m.def(
        command->name, [command](const py::kwargs& kwargs) { return evsim::run(*command, kwargs); },
        evsim::docstring(*command, "dict", "the report").c_str());
  }
}
