#include "modeler/cli/convert_command.h"

#include <fmt/format.h>

#include "common/error.h"
#include "io/cli_checks.h"
#include "io/profile_db.h"

namespace evsim {

namespace {

struct ConvertArgs {
  std::string input;
  std::string output;
  std::string format;  // empty: by the output's name
};

void runConvert(const ConvertArgs& args) {
  ProfileFormat format = profileFormatForPath(args.output);
  if (args.format == "yaml") format = ProfileFormat::kYaml;
  if (args.format == "cbor") format = ProfileFormat::kCbor;
  // Everything is read and checked (as every command reads a profile) before the output is
  // touched; the same path in and out is fine (the output is replaced atomically).
  const ProfileDb db = ProfileDb::load(args.input);
  db.save(args.output, format);
  fmt::print("{}: {} events, {} overlap records, written as {}\n", args.output, db.records().size(),
             db.overlapRecords().size(), profileFormatName(format));
}

}  // namespace

void registerConvertCommand(CLI::App& app) {
  auto args = std::make_shared<ConvertArgs>();
  CLI::App* cmd = app.add_subcommand(
      "convert-profile",
      "convert a profile database between YAML (readable, the default) and binary CBOR (loads "
      "many times faster); the input's form is read from its content");
  cmd->add_option("input", args->input, "profile database to read (YAML or CBOR)")->required();
  cmd->add_option("output", args->output, "profile database to write")
      ->required()
      ->check(kFileName);
  cmd->add_option("--format", args->format,
                  "yaml or cbor (default: cbor when the output's name ends in .cbor, else yaml)")
      ->check(CLI::IsMember({"yaml", "cbor"}));
  cmd->callback([args] { runConvert(*args); });
}

}  // namespace evsim
