#include "modeler/cli/list_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/data_dir.h"
#include "common/error.h"
#include "config/cluster_config.h"
#include "config/device_config.h"
#include "config/model_config.h"
#include "ops/parameter_counts.h"

namespace evsim {

namespace {

// The bundled YAML files of configs/<kind>/ (not its subfolders), by name.
std::vector<std::filesystem::path> bundledFiles(const std::string& kind) {
  namespace fs = std::filesystem;
  const fs::path dir = bundledConfigDir() / kind;
  std::vector<fs::path> out;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_regular_file() && entry.path().extension() == ".yaml") {
      out.push_back(entry.path());
    }
  }
  if (ec) EVSIM_THROW(EnvironmentError, "{}: cannot list ({})", dir.string(), ec.message());
  // By name without the extension: "bert-large" before "bert-large-s128" (whole paths would put
  // '-' before '.', the variant first).
  std::sort(out.begin(), out.end(), [](const fs::path& a, const fs::path& b) {
    return a.stem().string() < b.stem().string();
  });
  return out;
}

std::string modelLine(const ModelConfig& m) {
  const BlockSpec& s = m.spec;
  std::string traits;
  if (m.queryGroups() != m.num_heads) traits += fmt::format(", GQA {}", m.queryGroups());
  if (s.mlp == MlpKind::kSwiGlu) traits += ", SwiGLU";
  if (s.norm == NormKind::kRmsNorm) traits += ", RMSNorm";
  if (s.position == PositionKind::kRope) traits += ", RoPE";
  if (s.flash_attention) traits += ", flash attention";
  if (s.fp8) traits += ", fp8 GEMMs";
  if (m.hasCrossAttention()) traits += ", encoder-decoder";
  auto billions = [](int64_t n) {
    const double v = static_cast<double>(n);
    return v >= 1e9 ? fmt::format("{:.2f} B", v / 1e9) : fmt::format("{:.2f} M", v / 1e6);
  };
  if (m.moe.num_experts > 0) {
    traits += fmt::format(", MoE {} experts top-{} in {} layers ({} active)", m.moe.num_experts,
                          m.moe.top_k, m.moeLayers(), billions(activeParameters(m)));
  }
  const std::string size = billions(totalParameters(m));
  return fmt::format("{} parameters, {} layers, hidden {}, seq {}, {}{}", size, m.numLayers(),
                     m.hidden_size, m.seq_length, dtypeName(m.dtype), traits);
}

std::string deviceLine(const DeviceSpec& d) {
  const auto peak = d.peak_tflops.find(DType::kBf16);
  return fmt::format("{}, {} TFLOP/s bf16, {:.2f} GiB, {:g} GB/s, {}", d.name,
                     peak == d.peak_tflops.end() ? 0.0 : peak->second, d.memory_gib,
                     d.memory_bandwidth_gb_s,
                     d.model ? "kernel model fitted" : "datasheet only (roofline)");
}

std::string clusterLine(const ClusterConfig& c) {
  return fmt::format("{}{} x {} per node, {} {:g} GB/s per GPU, {} {:g} GB/s per node",
                     c.nodes ? fmt::format("{} nodes, ", *c.nodes) : "", c.gpus_per_node,
                     c.device.id.empty() ? c.device.name : c.device.id, c.intra_link.name,
                     c.intra_link.bandwidth_gb_s, c.network.name, c.network.bandwidth_gb_s);
}

// [{name, path, description}] of the bundled configs of one kind (models, clusters, devices).
nlohmann::json entries(const std::string& kind) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& f : bundledFiles(kind)) {
    std::string line;
    try {
      if (kind == "models") line = modelLine(loadModelConfig(f.string()));
      if (kind == "clusters") line = clusterLine(loadClusterConfig(f.string()));
      if (kind == "devices") line = deviceLine(loadDeviceConfig(f.string()));
    } catch (const InputError& e) {
      line = fmt::format("(cannot load: {})", e.what());
    }
    out.push_back({{"name", f.stem().string()}, {"path", f.string()}, {"description", line}});
  }
  return out;
}

void list(const nlohmann::json& items) {
  size_t width = 0;
  for (const auto& item : items) width = std::max(width, item["name"].get<std::string>().size());
  for (const auto& item : items) {
    fmt::print("{:<{}}  {}\n", item["name"].get<std::string>(), width,
               item["description"].get<std::string>());
  }
}

}  // namespace

void registerListCommand(CLI::App& app, JsonSink sink) {
  auto kind = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "list",
      "the bundled models, clusters or devices (configs/), one line each: the names "
      "--model and --cluster take");
  cmd->add_option("what", *kind, "models | clusters | devices (default: all three)")
      ->check(CLI::IsMember({"models", "clusters", "devices"}));
  cmd->add_flag("--json", *json, "print {models: [{name, path, description}], clusters, devices}");
  cmd->callback([kind, json, sink] {
    std::vector<std::string> kinds = {"models", "clusters", "devices"};
    if (!kind->empty()) kinds = {*kind};
    if (*json || sink) {
      nlohmann::json out = nlohmann::json::object();
      for (const std::string& each : kinds) out[each] = entries(each);
      if (sink) return sink(out);
      return fmt::print("{}\n", out.dump(2));
    }
    if (!kind->empty()) return list(entries(*kind));
    // `eventsim list` alone: every kind under a heading, where it was an error.
    for (const std::string& each : kinds) {
      fmt::print("{}{}:\n", each == "models" ? "" : "\n", each);
      list(entries(each));
    }
  });
}

}  // namespace evsim
