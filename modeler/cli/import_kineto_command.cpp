#include "modeler/cli/import_kineto_command.h"

#include <fmt/format.h>

#include <memory>

#include "common/error.h"
#include "common/strings.h"
#include "io/cli_checks.h"
#include "io/profile_db.h"
#include "io/run_options.h"
#include "modeler/kineto/kineto_match.h"
#include "modeler/kineto/kineto_trace.h"
#include "plan/iteration_plan.h"

namespace evsim {
namespace {

struct ImportKinetoArgs {
  RunOptions run;
  std::string trace;
  std::string output;
  int list = 15;
};

void run(const ImportKinetoArgs& args) {
  args.run.acceptMegatronExtras();
  const ModelConfig model = args.run.loadModel();
  const ClusterConfig cluster = args.run.loadCluster();
  const Strategy strategy = args.run.strategy(model);
  const IterationPlan plan = buildIterationPlan(model, cluster, strategy);
  const KinetoTrace trace = loadKinetoTrace(args.trace);
  KinetoImport result = matchKinetoTrace(trace, plan.events, cluster.gpus_per_node);
  if (result.shape_matched_ops == 0) {
    EVSIM_THROW(InputError,
                "{}: no op matched an event of {} {} (b={}): is it a trace of this model and "
                "strategy, recorded with record_shapes=True?",
                args.trace, model.name, strategy.name(), strategy.micro_batch);
  }
  result.db.metadata.backend = "pytorch";
  result.db.metadata.date = utcNow();
  result.db.metadata.world_size = 1;
  result.db.metadata.ranks_per_node = 1;
  result.db.metadata.devices = {trace.has_device_kernels ? "GPU (PyTorch profiler trace)"
                                                         : "CPU (PyTorch profiler trace)"};
  result.db.save(args.output);

  const double share = result.total_us > 0 ? 100.0 * result.matched_us / result.total_us : 0;
  fmt::print(
      "{}: {} ops matched to {} of the plan's {} events: {:.1f} of {:.1f} us ({:.1f}%, {})\n",
      args.trace, result.matched_ops, result.db.records().size(), plan.events.size(),
      result.matched_us, result.total_us, share,
      trace.has_device_kernels ? "device time of the ops' kernels" : "CPU op time");
  if (result.matched_collectives > 0) {
    fmt::print("of them {} collectives (NCCL kernels): {:.1f} us\n", result.matched_collectives,
               result.collective_us);
  }
  if (!result.unmatched.empty()) {
    double unmatched_us = 0;
    for (const KinetoUnmatched& u : result.unmatched) unmatched_us += u.total_us;
    fmt::print("not matched: {} kinds of op, {:.1f} us; the longest:\n", result.unmatched.size(),
               unmatched_us);
    for (size_t i = 0; i < result.unmatched.size() && static_cast<int>(i) < args.list; ++i) {
      const KinetoUnmatched& u = result.unmatched[i];
      fmt::print("  {:>10.1f} us {:>5}x  {}  ({})\n", u.total_us, u.count, u.what, u.reason);
    }
  }
  if (!result.not_measured.empty()) {
    fmt::print(
        "events of the plan no op matched ({}; simulate --profile ... --fallback analytic costs "
        "them from the device model):\n",
        result.not_measured.size());
    for (size_t i = 0; i < result.not_measured.size() && static_cast<int>(i) < args.list; ++i) {
      fmt::print("  {}\n", result.not_measured[i]);
    }
    if (static_cast<int>(result.not_measured.size()) > args.list) {
      fmt::print("  and {} more\n", result.not_measured.size() - args.list);
    }
  }
  fmt::print("profile database: {} ({} records)\n", args.output, result.db.records().size());
}

}  // namespace

void registerImportKinetoCommand(CLI::App& app) {
  auto args = std::make_shared<ImportKinetoArgs>();
  CLI::App* cmd = app.add_subcommand(
      "import-kineto",
      "read a PyTorch profiler (Kineto, Chrome JSON) trace of one training step into a profile "
      "database: its ops matched to the events of --model/--strategy by op and shape "
      "(docs/PROFILER.md)");
  cmd->add_option("trace", args->trace, "the trace (torch.profiler export_chrome_trace)")
      ->required();
  args->run.addModelOptions(*cmd);
  args->run.addMegatronExtras(*cmd);
  args->run.addStrategyOptions(*cmd, /*strategy_required=*/false);
  cmd->add_option("-o,--output", args->output,
                  "profile database to write: YAML, or CBOR when the name ends in .cbor")
      ->required()
      ->check(kFileName);
  cmd->add_option("--list", args->list, "how many unmatched ops and unmeasured events to print")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  cmd->callback([args] { run(*args); });
}

}  // namespace evsim
