#include "modeler/cli/events_command.h"
#include "ops/parameter_counts.h"

#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/strings.h"
#include "events/event_file.h"
#include "plan/iteration_plan.h"
#include "plan/schedules/schedule_file.h"
#include "plan/strategy_space.h"
#include "io/cli_checks.h"
#include "io/run_options.h"
#include "modeler/json_schema.h"

namespace evsim {

namespace {

struct EventsArgs {
  RunOptions run;
  int64_t gpus = 0;
  std::string micro_batches = "1,2,4,8";
  bool json = false;
  std::string output;
  std::string schedule_output;  // --write-schedule: the strategy's schedule as torchtitan CSV
};

nlohmann::json eventsJson(const EventTable& table, int64_t op_executions) {
  nlohmann::json events = nlohmann::json::array();
  for (const UniqueEvent& u : table.events()) {
    const Event& e = u.event;
    nlohmann::json item = {{"signature", u.signature},
                           {"kind", eventKindName(e.kind)},
                           {"op", e.op},
                           {"count", u.count},
                           {"flops", e.flops},
                           {"dtype", dtypeName(e.dtype)}};
    if (isCommunication(e.kind)) {
      item["bytes"] = e.message_bytes;
      item["group_size"] = e.placement.group_size;
      item["nodes"] = e.placement.nodes;
      item["ranks_per_node"] = e.placement.ranks_per_node;
      item["scope"] = scopeName(e.placement);
    } else {
      item["bytes"] = e.memory_bytes;
    }
    events.push_back(std::move(item));
  }
  return {{"op_executions", op_executions}, {"unique_events", table.size()}, {"events", events}};
}

void printText(const EventTable& table, int64_t op_executions, const std::string& title) {
  fmt::print("{}\n\n", title);
  fmt::print("{:>10}  {:<9} {:>14} {:>12}  {:<6} {}\n", "count", "kind", "GFLOP/exec", "bytes",
             "scope", "signature");
  for (const UniqueEvent& u : table.events()) {
    const Event& e = u.event;
    bool comm = isCommunication(e.kind);
    fmt::print("{:>10}  {:<9} {:>14.4f} {:>12}  {:<6} {}\n", u.count, eventKindName(e.kind),
               e.flops / 1e9, comm ? e.message_bytes : e.memory_bytes,
               comm ? scopeName(e.placement) : "-", u.signature);
  }
  double ratio = table.size() ? double(op_executions) / table.size() : 0;
  fmt::print("\n{} op executions collapse into {} unique events ({:.0f}x)\n", op_executions,
             table.size(), ratio);
}

void run(const EventsArgs& args, const JsonSink& sink) {
  args.run.acceptMegatronExtras();

  ModelConfig model = args.run.loadModel();
  ClusterConfig cluster = args.run.loadCluster();
  EventTable union_table;
  const EventTable* table = nullptr;
  int64_t op_executions = 0;
  std::unique_ptr<IterationPlan> plan;
  std::vector<std::pair<std::string, std::string>> source = {{"model", model.name},
                                                             {"cluster", cluster.name}};
  std::string title;
  if (args.gpus > 0) {
    const auto [base, space] = args.run.unionSpace(args.gpus, args.micro_batches);
    union_table = unionOfEvents(model, cluster, base, space);
    if (union_table.size() == 0) {
      EVSIM_THROW(InputError, "--gpus {}: no valid strategy for {} on {} (global batch {})",
                  args.gpus, model.name, cluster.name, base.global_batch);
    }
    table = &union_table;
    for (const UniqueEvent& u : union_table.events()) op_executions += u.count;
    source.push_back({"gpus", std::to_string(args.gpus)});
    source.push_back({"global_batch", std::to_string(base.global_batch)});
    source.push_back({"micro_batches", args.micro_batches});
    title = fmt::format("Union of events over every valid strategy: {} on {} x {} ({} GPUs)",
                        model.name, cluster.name, cluster.device.name, args.gpus);
  } else {
    Strategy strategy = args.run.strategy(model);
    args.run.checkTpPlacement(model, cluster, strategy);
    plan = std::make_unique<IterationPlan>(buildIterationPlan(model, cluster, strategy));
    table = &plan->events;
    op_executions = plan->op_executions;
    source.push_back({"strategy", strategy.name()});
    if (!strategy.techniques().empty())
      source.push_back({"techniques", strategy.techniques().substr(1)});
    source.push_back({"micro_batch", std::to_string(strategy.micro_batch)});
    source.push_back({"global_batch", std::to_string(strategy.global_batch)});
    title = fmt::format("{} on {}: {}{} (b={}, B={}, m={} micro-batches, {} GPUs)", model.name,
                        cluster.name, strategy.name(), strategy.techniques(), strategy.micro_batch,
                        strategy.global_batch, plan->micro_batches, strategy.gpus());
  }
  if (!args.output.empty()) {
    writeFileAtomically(args.output, eventsFileYaml(*table, op_executions, source));
  }
  if (!args.schedule_output.empty()) {
    const Schedule schedule = plan->strategy.schedule;
    const PipelineLayout layout = plan->pipelineLayout();
    const std::shared_ptr<const DeviceOrders> orders = scheduleOrders(
        schedule, PipelineShape{layout.devices(), layout.chunks(), plan->micro_batches,
                                plan->strategy.microbatch_group});
    writeFileAtomically(args.schedule_output,
                        scheduleCsv(*orders, layout, pipelineSchedule(schedule).splitsBackward()));
  }
  if (args.json || sink) {
    nlohmann::json out = eventsJson(*table, op_executions);
    out["schema_version"] = kJsonSchemaVersion;
    out["parameters_total"] = totalParameters(model);
    out["parameters_active"] = activeParameters(model);
    nlohmann::json src = nlohmann::json::object();
    for (const auto& [k, v] : source) src[k] = v;
    out["source"] = src;
    if (sink) {
      sink(out);
    } else {
      std::cout << out.dump(2) << "\n";
    }
  } else {
    printText(*table, op_executions, title);
    if (!args.output.empty()) fmt::print("events written to {}\n", args.output);
  }
}

}  // namespace

void registerEventsCommand(CLI::App& app, JsonSink sink) {
  auto args = std::make_shared<EventsArgs>();
  CLI::App* cmd = app.add_subcommand("events", "list the unique events of a model and strategy");
  args->run.addModelOptions(*cmd);
  args->run.addMegatronExtras(*cmd);
  args->run.addStrategyOptions(*cmd, /*strategy_required=*/false);
  CLI::Option* gpus =
      cmd->add_option("--gpus", args->gpus,
                      "instead of one strategy: the union over every valid strategy for N GPUs")
          ->check(kGpuCount);
  // A strategy beside --gpus would be ignored: refuse the pair (issue 17, item 6).
  for (const char* one : {"--strategy", "--tp", "--pp", "--dp"})
    gpus->excludes(cmd->get_option(one));
  cmd->add_option("--micro-batches", args->micro_batches, "micro-batch sizes for --gpus")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "print JSON");
  cmd->add_option("-o,--output", args->output, "write the events file (YAML) for eventprof")
      ->check(kFileName);
  cmd->add_option("--write-schedule", args->schedule_output,
                  "write the strategy's pipeline schedule as per-rank actions (torchtitan CSV), "
                  "to edit and load with --schedule FILE.csv")
      ->check(kFileName)
      ->excludes(gpus);
  cmd->callback([args, sink] { run(*args, sink); });
}

}  // namespace evsim
