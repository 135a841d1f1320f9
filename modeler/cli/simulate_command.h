#pragma once
// `eventsim simulate`: one strategy's iteration from measured (or estimated) event costs: summary,
// Chrome trace, CSV.

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

#include "io/profile_db.h"
#include "io/run_options.h"
#include "modeler/cli/json_sink.h"
#include "modeler/cost_model.h"
#include "plan/iteration_plan.h"

namespace evsim {

// With a sink (the Python module), the summary JSON goes there instead of standard output.
void registerSimulateCommand(CLI::App& app, JsonSink sink = {});

// Cost sources from --profile / --fallback, shared with `eventsim search`.
struct CostSourceOptions {
  std::string profile;
  // "analytic", "none" (strict), or "" (the default: the device model costs every event when
  // there is no profile, and a given profile is strict).
  std::string fallback;
  // The framework's host time to issue one op, replacing the device file's host_op_us: it belongs
  // to the software that runs the model (PyTorch eager, a C++ executor, CUDA graphs), not the GPU.
  std::optional<double> host_op_us;

  void add(CLI::App& app);
  // Applies --host-op-us to the cluster's device model; InputError when the device has none.
  void applyHostTime(ClusterConfig& cluster) const;
  // Loads the database (if any); throws InputError when neither source is given.
  std::optional<ProfileDb> loadProfile() const;
  // Whether the device model costs the events the profile lacks (every event without a profile).
  bool analytic() const { return fallback == "analytic" || (fallback.empty() && profile.empty()); }
};

// The eventprof command line that would measure the events of `strategy`.
std::string eventprofHint(const RunOptions& run, const Strategy& strategy);

}  // namespace evsim
