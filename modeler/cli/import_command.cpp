#include "modeler/cli/import_command.h"

#include <fmt/format.h>

#include <filesystem>

#include "common/error.h"
#include "common/strings.h"
#include "io/cli_checks.h"
#include "plan/strategy.h"
#include "modeler/nccl_tests_log.h"

namespace evsim {

namespace {

struct ImportArgs {
  std::vector<std::string> logs;
  std::string collective;
  int group = 0;
  int nodes = 0;
  bool in_place = false;
  std::vector<std::string> as_dtypes;
  std::string output;
  bool append = false;
};

void runImport(const ImportArgs& args) {
  NcclTestsOptions options;
  if (!args.collective.empty()) {
    options.collective = ncclTestsCollective(args.collective);
    if (!options.collective) {
      EVSIM_THROW(InputError,
                  "--collective '{}': expected allreduce, allgather, reduce_scatter, alltoall, "
                  "broadcast or sendrecv",
                  args.collective);
    }
  }
  if (args.group > 0) options.group = args.group;
  if (args.nodes > 0) options.nodes = args.nodes;
  options.in_place = args.in_place;
  std::vector<DType> extra_dtypes;
  for (const std::string& d : args.as_dtypes) extra_dtypes.push_back(parseDType(d, "--as-dtype"));

  // Everything is read and checked before the output is touched: a bad log loses nothing.
  std::vector<NcclTestsImport> imports;
  for (const std::string& log : args.logs) imports.push_back(loadNcclTests(log, options));

  ProfileDb db;
  if (args.append) {
    if (!std::filesystem::exists(args.output)) {
      EVSIM_THROW(InputError, "--append: {} does not exist yet (drop --append to create it)",
                  args.output);
    }
    db = ProfileDb::load(args.output);
  } else {
    db.metadata.backend = "nccl-tests";
    db.metadata.date = utcNow();
  }
  for (size_t i = 0; i < imports.size(); ++i) {
    const NcclTestsImport& in = imports[i];
    if (!args.append && i == 0) {
      db.metadata.world_size = in.placement.group_size;
      db.metadata.ranks_per_node = in.placement.ranks_per_node;
      db.metadata.hosts = in.hosts;
      db.metadata.devices = in.devices;
    }
    for (const ProfileRecord& record : in.records) {
      db.put(record);
      for (DType dtype : extra_dtypes) {
        ProfileRecord copy = record;
        copy.event.dtype = dtype;
        copy.signature = copy.event.signature();
        db.put(copy);
      }
    }
    fmt::print("{}: {} sizes of {} over {} ranks on {} node(s), {} per node, {}{}\n", args.logs[i],
               in.records.size(), eventKindName(in.kind), in.placement.group_size,
               in.placement.nodes, in.placement.ranks_per_node, dtypeName(in.dtype),
               extra_dtypes.empty() ? "" : " (and the --as-dtype types)");
  }
  db.save(args.output);
  fmt::print("profile database: {} ({} records)\n", args.output, db.records().size());
}

}  // namespace

void registerImportCommand(CLI::App& app) {
  auto args = std::make_shared<ImportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "import-nccl-tests",
      "read nccl-tests output (all_reduce_perf, all_gather_perf, reduce_scatter_perf, "
      "alltoall_perf, broadcast_perf, sendrecv_perf) or its CSV form into a profile database as "
      "measured events");
  cmd->add_option("logs", args->logs, "nccl-tests output files (one test each)")->required();
  cmd->add_option(
      "--collective", args->collective,
      "allreduce|allgather|reduce_scatter|alltoall|broadcast|sendrecv, when neither the log (newer "
      "versions print 'Collective test starting') nor the file name says");
  cmd->add_option("--group", args->group,
                  "ranks in the test, when the log has no Rank lines (required for the CSV form)")
      ->check(CLI::Range(2, 1 << 20));
  cmd->add_option("--nodes", args->nodes,
                  "nodes those ranks span (with --group; default 1). With Rank lines: the hosts "
                  "they name, or more where nodes share one hostname (containers)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_flag("--in-place", args->in_place, "use the in-place times (default: out-of-place)");
  cmd->add_option("--as-dtype", args->as_dtypes,
                  "also file every record under these dtypes (fp16, bf16, fp32): a collective's "
                  "time depends on its bytes, not on the element type")
      ->delimiter(',');
  cmd->add_option("-o,--output", args->output, "profile database to write")
      ->required()
      ->check(kFileName);
  cmd->add_flag("--append", args->append, "add to (or replace in) an existing profile database");
  cmd->callback([args] { runImport(*args); });
}

}  // namespace evsim
