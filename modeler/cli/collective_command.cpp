#include "modeler/cli/collective_command.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/strings.h"
#include "config/cluster_config.h"
#include "events/comm_factors.h"
#include "io/cli_checks.h"
#include "io/nccl_options.h"
#include "io/run_options.h"
#include "modeler/nccl_tests_log.h"
#include "modeler/network/nccl_tuner.h"

namespace evsim {

namespace {

constexpr int64_t kFloatBytes = 4;  // nccl-tests' default type
constexpr int64_t kMaxBytes = int64_t{1} << 50;

struct CollectiveArgs {
  std::string cluster;
  std::string op;
  int gpus = 0;
  int gpus_per_node = 0;
  std::vector<std::string> bytes;
  std::string min_bytes, max_bytes;
  std::string measured;
  NcclOptions nccl;  // as simulate takes them (io/nccl_options.h)
  bool json = false;
};

const std::map<std::string, EventKind>& opNames() {
  static const std::map<std::string, EventKind> names = {
      {"all-reduce", EventKind::kAllReduce},         {"all-gather", EventKind::kAllGather},
      {"reduce-scatter", EventKind::kReduceScatter}, {"alltoall", EventKind::kAllToAll},
      {"broadcast", EventKind::kBroadcast},          {"sendrecv", EventKind::kP2P}};
  return names;
}

// "1048576", "1K", "32M", "8G" (binary multiples, as nccl-tests' -b/-e read them).
int64_t parseSize(const std::string& text, const std::string& flag) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    EVSIM_THROW(InputError, "{} '{}': not a size (bytes, or a number with K, M or G)", flag, text);
  }
  const std::string suffix = text.substr(used);
  double scale = 1;
  if (suffix == "K" || suffix == "k")
    scale = 1024.0;
  else if (suffix == "M" || suffix == "m")
    scale = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "g")
    scale = 1024.0 * 1024 * 1024;
  else if (!suffix.empty()) {
    EVSIM_THROW(InputError, "{} '{}': unknown unit '{}' (K, M or G)", flag, text, suffix);
  }
  const double bytes = value * scale;
  if (!(bytes >= 1) || bytes > double(kMaxBytes) || bytes != std::floor(bytes)) {
    EVSIM_THROW(InputError, "{} '{}': must be a whole number of bytes from 1 to 2^50", flag, text);
  }
  return static_cast<int64_t>(bytes);
}

std::vector<int64_t> sizesOf(const CollectiveArgs& args,
                             const std::map<int64_t, double>& measured) {
  std::vector<int64_t> sizes;
  const bool range = !args.min_bytes.empty() || !args.max_bytes.empty();
  if (!args.bytes.empty() && range) {
    EVSIM_THROW(InputError, "--bytes and --min-bytes/--max-bytes: give one or the other");
  }
  if (range) {
    if (args.min_bytes.empty() || args.max_bytes.empty()) {
      EVSIM_THROW(InputError, "--min-bytes and --max-bytes go together");
    }
    const int64_t lo = parseSize(args.min_bytes, "--min-bytes");
    const int64_t hi = parseSize(args.max_bytes, "--max-bytes");
    if (lo > hi) EVSIM_THROW(InputError, "--min-bytes {} is above --max-bytes {}", lo, hi);
    for (int64_t s = lo; s <= hi; s *= 2) sizes.push_back(s);  // nccl-tests' -f 2
  }
  // Split here, not by CLI11's delimiter: it dropped the empty entry of "1M,,2M" silently.
  for (const std::string& list : args.bytes) {
    for (const std::string& b : split(list, ',')) {
      if (trim(b).empty()) EVSIM_THROW(InputError, "--bytes '{}': empty entry", list);
      sizes.push_back(parseSize(trim(b), "--bytes"));
    }
  }
  if (sizes.empty()) {
    for (const auto& [bytes, time] : measured) sizes.push_back(bytes);
  }
  if (sizes.empty()) {
    EVSIM_THROW(InputError, "no sizes: give --bytes, --min-bytes/--max-bytes or --measured");
  }
  return sizes;
}

void runCollective(const CollectiveArgs& args, const JsonSink& sink) {
  ClusterConfig cluster = loadClusterConfig(resolveConfigPath(args.cluster, "clusters"));
  args.nccl.apply(cluster.topology);  // the flags win over the file's topology.nccl keys
  if (const std::string note = assumedNcclArchNote(cluster); !note.empty()) {
    fmt::print(stderr, "eventsim: note: {}\n", note);
  }
  const EventKind kind = opNames().at(args.op);
  const int per_node = args.gpus_per_node > 0 ? args.gpus_per_node : cluster.gpus_per_node;
  if (per_node > cluster.gpus_per_node) {
    EVSIM_THROW(InputError, "--gpus-per-node {}: cluster {} has {} GPUs per node", per_node,
                cluster.name, cluster.gpus_per_node);
  }
  if (args.gpus < 2) EVSIM_THROW(InputError, "--gpus {}: a collective needs 2 or more", args.gpus);
  if (args.gpus > per_node && args.gpus % per_node != 0) {
    EVSIM_THROW(InputError, "--gpus {}: not a whole number of nodes of {} GPUs", args.gpus,
                per_node);
  }
  const int nodes = (args.gpus + per_node - 1) / per_node;
  if (cluster.nodes && nodes > *cluster.nodes) {
    EVSIM_THROW(InputError, "--gpus {}: needs {} nodes, cluster {} has {}", args.gpus, nodes,
                cluster.name, *cluster.nodes);
  }
  // sendrecv: nccl-tests' ring of pairs; each pair crosses nodes when the ring does.
  const Placement placement = kind == EventKind::kP2P
                                  ? Placement{2, nodes > 1 ? 2 : 1, nodes > 1 ? 1 : 2}
                                  : Placement{args.gpus, nodes, std::min(args.gpus, per_node)};
  const NcclTuner tuner(cluster);

  std::map<int64_t, double> measured;  // bytes -> time_us
  if (!args.measured.empty()) {
    // "An nccl-tests output of the same test": a log of another collective, group or layout
    // was compared line by line without a word. A log without Rank lines is taken as this test.
    NcclTestsOptions options;
    options.collective = kind;
    options.collective_flag = "--op";
    options.group = args.gpus;
    options.nodes = nodes;
    options.group_must_agree = false;
    const NcclTestsImport log = loadNcclTests(args.measured, options);
    // Compared and printed: the records' placement (for sendrecv a pair, not the whole group).
    const Placement& ran = log.records.front().event.placement;
    if (!(ran == placement)) {
      const bool pair = kind == EventKind::kP2P;
      const std::string flags =
          pair ? fmt::format("sendrecv compares one pair of the ring: --gpus {} on nodes of {} "
                             "puts it {}",
                             args.gpus, per_node, nodes > 1 ? "across nodes" : "within a node")
               : fmt::format("--gpus {}, --gpus-per-node {}", args.gpus, per_node);
      EVSIM_THROW(InputError,
                  "--measured {}: the log's {} on {} ranks over {} node(s) of {}, this table's {} "
                  "{} over {} of {} ({})",
                  args.measured, pair ? "pairs ran" : "test ran", ran.group_size, ran.nodes,
                  ran.ranks_per_node, pair ? "pair on" : "on", placement.group_size,
                  placement.nodes, placement.ranks_per_node, flags);
    }
    for (const ProfileRecord& r : log.records) measured[r.event.message_bytes] = r.time.median_us;
  }

  const double bus_factor = busBandwidthFactor(kind, args.gpus);
  const bool sharded = kind == EventKind::kAllGather || kind == EventKind::kReduceScatter ||
                       kind == EventKind::kAllToAll;
  nlohmann::json results = nlohmann::json::array();
  std::string table = fmt::format("# {} on {}: {} GPUs, {} nodes of {}\n", args.op, cluster.name,
                                  args.gpus, nodes, per_node);
  table += fmt::format("# {:>12} {:>12} {:>10} {:>8} {:>8}  {:<10} {:<7}{}\n", "size(B)", "count",
                       "time(us)", "algbw", "busbw", "algorithm", "proto",
                       measured.empty() ? "" : "  measured(us)  error");
  for (const int64_t bytes : sizesOf(args, measured)) {
    const CollectiveChoice c = tuner.choose(kind, placement, bytes);
    const double algbw = double(bytes) / c.time_us / 1e3;  // B/us -> GB/s
    const double busbw = algbw * bus_factor;
    const int64_t count = bytes / kFloatBytes / (sharded ? args.gpus : 1);
    nlohmann::json row = {{"bytes", bytes},
                          {"count", count},
                          {"time_us", c.time_us},
                          {"algbw_gb_s", algbw},
                          {"busbw_gb_s", busbw},
                          {"algorithm", c.algorithm},
                          {"protocol", ncclProtocolName(c.protocol)}};
    std::string error;
    if (auto m = measured.find(bytes); m != measured.end()) {
      const double error_pct = 100.0 * (c.time_us - m->second) / m->second;
      row["measured_time_us"] = m->second;
      row["error_pct"] = error_pct;
      error = fmt::format("  {:>12.2f}  {:+.1f}%", m->second, error_pct);
    } else if (!measured.empty()) {
      error = "  (not measured)";
    }
    results.push_back(row);
    table +=
        fmt::format("  {:>12} {:>12} {:>10.2f} {:>8.2f} {:>8.2f}  {:<10} {:<7}{}\n", bytes, count,
                    c.time_us, algbw, busbw, c.algorithm, ncclProtocolName(c.protocol), error);
  }
  nlohmann::json report = {{"schema_version", 1}, {"cluster", cluster.name},   {"op", args.op},
                           {"gpus", args.gpus},   {"gpus_per_node", per_node}, {"nodes", nodes},
                           {"results", results}};
  if (sink) {
    sink(report);
  } else if (args.json) {
    fmt::print("{}\n", report.dump(2));
  } else {
    fmt::print("{}", table);
  }
}

}  // namespace

void registerCollectiveCommand(CLI::App& app, JsonSink sink) {
  auto args = std::make_shared<CollectiveArgs>();
  CLI::App* cmd = app.add_subcommand(
      "collective",
      "the nccl-tests table the network model predicts for one collective on a cluster "
      "(algorithm and protocol as NCCL would choose them)");
  cmd->add_option("--cluster", args->cluster, "cluster name (configs/clusters) or YAML file")
      ->required();
  std::vector<std::string> ops;
  for (const auto& [name, kind] : opNames()) ops.push_back(name);
  cmd->add_option("--op", args->op, "the collective")->required()->check(CLI::IsMember(ops));
  cmd->add_option("--gpus", args->gpus, "ranks in the collective")->required();
  cmd->add_option("--gpus-per-node", args->gpus_per_node,
                  "ranks per node (default: the cluster's GPUs per node)")
      ->check(kPositiveInteger);
  cmd->add_option("--bytes", args->bytes, "sizes (nccl-tests' size column), e.g. 1M,32M,1G");
  cmd->add_option("--min-bytes", args->min_bytes, "smallest size, doubling up to --max-bytes");
  cmd->add_option("--max-bytes", args->max_bytes, "largest size");
  cmd->add_option("--measured", args->measured,
                  "an nccl-tests output of the same test: print the error beside each line");
  args->nccl.addOptions(*cmd);
  cmd->add_flag("--json", args->json, "print a JSON report (schema_version 1) instead");
  cmd->callback([args, sink] { runCollective(*args, sink); });
}

}  // namespace evsim
