#include "config/device_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>

#include "common/error.h"
#include "common/units.h"
#include "common/yaml_reader.h"
#include "events/event.h"

namespace evsim {

namespace {

// A GPU's memory and bandwidth: bounds far beyond any device (1 PiB, 10 PB/s) that keep the byte
// counts formed from them inside int64.
constexpr double kMaxMemoryGib = 1e6;
constexpr double kMaxBandwidthGBs = 1e7;
// Floors (1 kB/s, 1 kFLOP/s, 1 KiB): tiny positive values divided into times of 1e304 ms.
constexpr double kMinBandwidthGBs = 1e-6;
constexpr double kMinTflops = 1e-9;
constexpr double kMinMemoryGib = 1.0 / (1 << 20);
constexpr double kMaxTflops = 1e9;

// A datasheet figure in [min, max].
double datasheetValue(const YamlReader& reader, const std::string& key, double min, double max) {
  const double value = reader.positiveDouble(key, max);
  if (value < min) reader.fail(key, fmt::format("{:g}: must be >= {:g}", value, min));
  return value;
}

// Upper bounds that catch unit mistakes (an efficiency given in percent, a time in ns).
constexpr double kMaxFraction = 1.0;
constexpr double kMaxTileOverheadK = 65536;
constexpr int64_t kMaxSmCount = 1 << 20;
constexpr int64_t kMaxGroup = 1 << 20;
// A MAPE can exceed 100% (a prediction 3x too slow is 200% off): the bound only catches garbage.
constexpr double kMaxUncertaintyPct = 1e4;

SourcedValue readSourced(const YamlReader& parent, const std::string& key, double max_value) {
  YamlReader entry = parent.child(key);
  entry.allowOnly({"value", "source"});
  SourcedValue out{entry.nonNegativeDouble("value"), entry.str("source")};
  if (out.value > max_value) {
    entry.fail("value", fmt::format("{}: must be <= {}", out.value, max_value));
  }
  return out;
}

CollectiveCurve readCurve(const YamlReader& item) {
  item.allowOnly({"group", "floor_us", "ll_latency_us", "ll_busbw_gb_s", "simple_latency_us",
                  "simple_busbw_gb_s", "source"});
  CollectiveCurve c;
  const int64_t group = item.positiveInt("group");
  if (group > kMaxGroup) item.fail("group", fmt::format("{}: must be <= {}", group, kMaxGroup));
  c.group = static_cast<int>(group);
  if (c.group < 2) item.fail("group", fmt::format("{}: a collective needs >= 2 ranks", c.group));
  c.floor_us = item.nonNegativeDouble("floor_us");
  c.ll_latency_us = item.nonNegativeDouble("ll_latency_us");
  c.ll_busbw_gb_s = item.positiveDouble("ll_busbw_gb_s");
  c.simple_latency_us = item.nonNegativeDouble("simple_latency_us");
  c.simple_busbw_gb_s = item.positiveDouble("simple_busbw_gb_s");
  c.source = item.str("source");
  return c;
}

// A tile needs well under this many extra channels or overhead tiles: more is a unit mistake.
constexpr double kMaxAttentionExtra = 4096;

AttentionPassParams readAttentionPass(const YamlReader& pass) {
  pass.allowOnly({"efficiency", "softmax_dim", "cta_overhead_tiles"});
  AttentionPassParams a;
  a.efficiency = readSourced(pass, "efficiency", kMaxFraction);
  a.softmax_dim = readSourced(pass, "softmax_dim", kMaxAttentionExtra);
  a.cta_overhead_tiles = readSourced(pass, "cta_overhead_tiles", kMaxAttentionExtra);
  if (a.efficiency.value <= 0) pass.fail("efficiency.value", "must be > 0");
  return a;
}

// A clock in MHz: a few GHz at most; more is a unit mistake (kHz).
constexpr double kMaxClockMhz = 10000;

ClockParams readClocks(const YamlReader& clocks) {
  clocks.allowOnly({"fit_mhz", "sustained_mhz"});
  ClockParams c;
  c.fit_mhz = readSourced(clocks, "fit_mhz", kMaxClockMhz);
  c.sustained_mhz = readSourced(clocks, "sustained_mhz", kMaxClockMhz);
  if (c.fit_mhz.value <= 0) clocks.fail("fit_mhz.value", "must be > 0");
  if (c.sustained_mhz.value <= 0) clocks.fail("sustained_mhz.value", "must be > 0");
  return c;
}

FusedAttentionParams readFusedAttention(const YamlReader& fa) {
  fa.allowOnly({"kernel", "forward", "backward"});
  FusedAttentionParams f;
  f.kernel = fa.str("kernel");
  f.forward = readAttentionPass(fa.child("forward"));
  f.backward = readAttentionPass(fa.child("backward"));
  return f;
}

}  // namespace

std::string_view attentionKernelName(AttentionKernel kernel) {
  switch (kernel) {
    case AttentionKernel::kFa2:
      return "fa2";
    case AttentionKernel::kFa3:
      return "fa3";
    case AttentionKernel::kCudnn:
      return "cudnn";
  }
  return "?";
}

AttentionKernel parseAttentionKernel(std::string_view text, std::string_view where) {
  for (AttentionKernel k :
       {AttentionKernel::kFa2, AttentionKernel::kFa3, AttentionKernel::kCudnn}) {
    if (text == attentionKernelName(k)) return k;
  }
  EVSIM_THROW(InputError, "{}: '{}': unknown attention kernel (fa2, fa3 or cudnn)", where, text);
}

namespace {

DeviceModelParams readModel(const YamlReader& model) {
  model.allowOnly({"gemm_efficiency", "gemm_tile_overhead_k", "gemm_by_dtype", "gemm_kernel_us",
                   "memory_efficiency", "memory_efficiency_by_op", "memory_kernel_us", "host_op_us",
                   "host_call_us",
                   "uncertainty_pct", "allreduce_curves", "fused_attention", "clocks"});
  DeviceModelParams p;
  p.gemm_efficiency = readSourced(model, "gemm_efficiency", kMaxFraction);
  p.gemm_tile_overhead_k = readSourced(model, "gemm_tile_overhead_k", kMaxTileOverheadK);
  p.gemm_kernel_us = readSourced(model, "gemm_kernel_us", kUsPerSecond);
  p.memory_efficiency = readSourced(model, "memory_efficiency", kMaxFraction);
  p.memory_kernel_us = readSourced(model, "memory_kernel_us", kUsPerSecond);
  p.host_op_us = readSourced(model, "host_op_us", kUsPerSecond);
  p.host_call_us = readSourced(model, "host_call_us", kUsPerSecond);
  p.uncertainty_pct = readSourced(model, "uncertainty_pct", kMaxUncertaintyPct);
  if (p.gemm_efficiency.value <= 0) model.fail("gemm_efficiency.value", "must be > 0");
  if (p.memory_efficiency.value <= 0) model.fail("memory_efficiency.value", "must be > 0");
  if (model.has("gemm_by_dtype")) {
    const YamlReader by_dtype = model.child("gemm_by_dtype");
    for (const auto& [name, entry] : by_dtype.entries()) {
      const DType dtype = parseDType(name, entry.where(""));
      entry.allowOnly({"efficiency", "tile_overhead_k"});
      GemmTileParams t;
      t.efficiency = readSourced(entry, "efficiency", kMaxFraction);
      t.tile_overhead_k = readSourced(entry, "tile_overhead_k", kMaxTileOverheadK);
      if (t.efficiency.value <= 0) entry.fail("efficiency.value", "must be > 0");
      p.gemm_by_dtype[dtype] = t;
    }
  }
  if (model.has("memory_efficiency_by_op")) {
    const YamlReader by_op = model.child("memory_efficiency_by_op");
    const std::vector<std::string>& ops = computeOpNames();
    for (const auto& [op, entry] : by_op.entries()) {
      if (isGemmOp(op) || std::find(ops.begin(), ops.end(), op) == ops.end()) {
        by_op.fail(op, "not a memory-bound compute op (gemm and bgemm have their own model)");
      }
      SourcedValue v = readSourced(by_op, op, kMaxFraction);
      if (v.value <= 0) by_op.fail(op + ".value", "must be > 0");
      p.memory_efficiency_by_op[op] = v;
    }
  }
  if (model.has("fused_attention")) {
    const YamlReader fa = model.child("fused_attention");
    for (const auto& [name, entry] : fa.entries()) {
      p.fused_attention[parseAttentionKernel(name, entry.where(""))] = readFusedAttention(entry);
    }
  }
  if (model.has("clocks")) p.clocks = readClocks(model.child("clocks"));
  if (model.has("allreduce_curves")) {
    for (const YamlReader& item : model.items("allreduce_curves")) {
      p.allreduce_curves.push_back(readCurve(item));
    }
  }
  std::sort(p.allreduce_curves.begin(), p.allreduce_curves.end(),
            [](const CollectiveCurve& a, const CollectiveCurve& b) { return a.group < b.group; });
  for (size_t i = 1; i < p.allreduce_curves.size(); ++i) {
    if (p.allreduce_curves[i].group == p.allreduce_curves[i - 1].group) {
      model.fail("allreduce_curves",
                 fmt::format("group {} appears twice", p.allreduce_curves[i].group));
    }
  }
  return p;
}

OverlapSlowdown readOverlapSlowdown(const YamlReader& section) {
  section.allowOnly({"nvlink", "network"});
  OverlapSlowdown out;
  out.given = true;
  out.nvlink = readSourced(section, "nvlink", OverlapSlowdown::kMax);
  out.network = readSourced(section, "network", OverlapSlowdown::kMax);
  if (out.nvlink.value < 1) section.fail("nvlink.value", "a slowdown factor must be >= 1");
  if (out.network.value < 1) section.fail("network.value", "a slowdown factor must be >= 1");
  return out;
}

void readPeaks(const YamlReader& peaks, DeviceSpec& spec) {
  for (const auto& [dtype_name, value] : peaks.entries()) {
    DType dtype = parseDType(dtype_name, value.where(""));
    if (peakDType(dtype) != dtype) {
      value.fail("",
                 fmt::format("{} GEMMs run at the fp8 peak: list fp8 instead", dtypeName(dtype)));
    }
    const double tflops = value.asPositiveDouble();
    if (tflops < kMinTflops || tflops > kMaxTflops) {
      value.fail("", fmt::format("{:g}: must be in [{:g}, {:g}]", tflops, kMinTflops, kMaxTflops));
    }
    spec.peak_tflops[dtype] = tflops;
  }
  if (spec.peak_tflops.empty()) peaks.fail("", "needs at least one dtype");
}

MemoryOverheads readMemoryOverheads(const YamlReader& memory) {
  memory.allowOnly({"cuda_context_mib", "cublas_workspace_mib", "nccl_mib_per_communicator",
                    "allocator_fragmentation"});
  constexpr double kMaxMib = 1 << 20;  // 1 TiB: only catches garbage
  MemoryOverheads out;
  out.cuda_context_mib = readSourced(memory, "cuda_context_mib", kMaxMib);
  out.cublas_workspace_mib = readSourced(memory, "cublas_workspace_mib", kMaxMib);
  out.nccl_mib_per_communicator = readSourced(memory, "nccl_mib_per_communicator", kMaxMib);
  out.allocator_fragmentation = readSourced(memory, "allocator_fragmentation", kMaxFraction);
  return out;
}

DeviceSpec readDeviceFile(const YamlReader& root) {
  root.allowOnly(
      {"name", "gpu", "description", "datasheet", "model", "overlap_slowdown", "memory"});
  DeviceSpec spec;
  spec.file = root.file();
  spec.id = root.str("name");
  spec.name = root.str("gpu");
  YamlReader sheet = root.child("datasheet");
  sheet.allowOnly({"source", "peak_tflops", "memory_bandwidth_gb_s", "memory_gib", "sm_count"});
  spec.datasheet_source = sheet.str("source");
  readPeaks(sheet.child("peak_tflops"), spec);
  spec.memory_bandwidth_gb_s =
      datasheetValue(sheet, "memory_bandwidth_gb_s", kMinBandwidthGBs, kMaxBandwidthGBs);
  spec.memory_gib = datasheetValue(sheet, "memory_gib", kMinMemoryGib, kMaxMemoryGib);
  const int64_t sm_count = sheet.positiveInt("sm_count");
  if (sm_count > kMaxSmCount)
    sheet.fail("sm_count", fmt::format("{}: must be <= {}", sm_count, kMaxSmCount));
  spec.sm_count = static_cast<int>(sm_count);
  if (root.has("model")) spec.model = readModel(root.child("model"));
  if (root.has("overlap_slowdown")) {
    spec.overlap_slowdown = readOverlapSlowdown(root.child("overlap_slowdown"));
  }
  if (root.has("memory")) spec.memory = readMemoryOverheads(root.child("memory"));
  return spec;
}

void emitSourced(YAML::Emitter& out, const std::string& key, const SourcedValue& v) {
  out << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "value"
      << YAML::Value << v.value << YAML::Key << "source" << YAML::Value << v.source << YAML::EndMap;
}

void emitAttentionPass(YAML::Emitter& out, const char* key, const AttentionPassParams& a) {
  out << YAML::Key << key << YAML::Value << YAML::BeginMap;
  emitSourced(out, "efficiency", a.efficiency);
  emitSourced(out, "softmax_dim", a.softmax_dim);
  emitSourced(out, "cta_overhead_tiles", a.cta_overhead_tiles);
  out << YAML::EndMap;
}

// The calibrated model section (deviceConfigYaml).
void emitModel(YAML::Emitter& out, const DeviceModelParams& m) {
  out << YAML::Key << "model" << YAML::Value << YAML::BeginMap;
  emitSourced(out, "gemm_efficiency", m.gemm_efficiency);
  emitSourced(out, "gemm_tile_overhead_k", m.gemm_tile_overhead_k);
  if (!m.gemm_by_dtype.empty()) {
    out << YAML::Key << "gemm_by_dtype" << YAML::Value << YAML::BeginMap;
    for (const auto& [dtype, t] : m.gemm_by_dtype) {
      out << YAML::Key << std::string(dtypeName(dtype)) << YAML::Value << YAML::BeginMap;
      emitSourced(out, "efficiency", t.efficiency);
      emitSourced(out, "tile_overhead_k", t.tile_overhead_k);
      out << YAML::EndMap;
    }
    out << YAML::EndMap;
  }
  emitSourced(out, "gemm_kernel_us", m.gemm_kernel_us);
  emitSourced(out, "memory_efficiency", m.memory_efficiency);
  if (!m.memory_efficiency_by_op.empty()) {
    out << YAML::Key << "memory_efficiency_by_op" << YAML::Value << YAML::BeginMap;
    for (const auto& [op, v] : m.memory_efficiency_by_op) emitSourced(out, op, v);
    out << YAML::EndMap;
  }
  emitSourced(out, "memory_kernel_us", m.memory_kernel_us);
  emitSourced(out, "host_op_us", m.host_op_us);
  emitSourced(out, "host_call_us", m.host_call_us);
  emitSourced(out, "uncertainty_pct", m.uncertainty_pct);
  if (!m.fused_attention.empty()) {
    out << YAML::Key << "fused_attention" << YAML::Value << YAML::BeginMap;
    for (const auto& [kernel, f] : m.fused_attention) {
      out << YAML::Key << std::string(attentionKernelName(kernel)) << YAML::Value << YAML::BeginMap;
      out << YAML::Key << "kernel" << YAML::Value << f.kernel;
      emitAttentionPass(out, "forward", f.forward);
      emitAttentionPass(out, "backward", f.backward);
      out << YAML::EndMap;
    }
    out << YAML::EndMap;
  }
  if (m.clocks) {
    out << YAML::Key << "clocks" << YAML::Value << YAML::BeginMap;
    emitSourced(out, "fit_mhz", m.clocks->fit_mhz);
    emitSourced(out, "sustained_mhz", m.clocks->sustained_mhz);
    out << YAML::EndMap;
  }
  if (!m.allreduce_curves.empty()) {
    out << YAML::Key << "allreduce_curves" << YAML::Value << YAML::BeginSeq;
    for (const CollectiveCurve& c : m.allreduce_curves) {
      out << YAML::Flow << YAML::BeginMap;
      out << YAML::Key << "group" << YAML::Value << c.group;
      out << YAML::Key << "floor_us" << YAML::Value << c.floor_us;
      out << YAML::Key << "ll_latency_us" << YAML::Value << c.ll_latency_us;
      out << YAML::Key << "ll_busbw_gb_s" << YAML::Value << c.ll_busbw_gb_s;
      out << YAML::Key << "simple_latency_us" << YAML::Value << c.simple_latency_us;
      out << YAML::Key << "simple_busbw_gb_s" << YAML::Value << c.simple_busbw_gb_s;
      out << YAML::Key << "source" << YAML::Value << c.source;
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  out << YAML::EndMap;
}

}  // namespace

double DeviceSpec::peakTflops(DType dtype) const {
  dtype = peakDType(dtype);
  auto it = peak_tflops.find(dtype);
  if (it == peak_tflops.end()) {
    // Named by its file (the device file, or the cluster file of an inline spec; issue 33).
    constexpr std::string_view kInline = "inline in ";
    const std::string where =
        !file.empty() ? file + ": datasheet.peak_tflops"
        : datasheet_source.rfind(kInline, 0) == 0
            ? datasheet_source.substr(kInline.size()) + ": node.device.peak_tflops"
            : "device.peak_tflops";
    EVSIM_THROW(InputError, "{}: no entry for {} (device '{}'; the model computes in {}{})", where,
                dtypeName(dtype), name, dtypeName(dtype),
                dtype == DType::kMxfp8 ? ": MXFP8 needs tensor cores with MX block scaling, "
                                         "Blackwell and later"
                                       : "");
  }
  return it->second;
}

// memory_gib is the device memory a process can be given: what CUDA reports as the device's total
// (cudaMemGetInfo's total = torch.cuda.get_device_properties().total_memory = the "total capacity"
// of PyTorch's OOM message), i.e. nvidia-smi's total less what the driver reserves (nvidia-smi -q
// "Reserved"), not the datasheet's round figure (an H100 80GB: 79.11 GiB, not 80). The CUDA
// context and NCCL's buffers (MemoryOverheads) and the caching allocator's pool all come out of
// it: the memory model adds the first two to the allocated peak and compares the sum with this
// (docs/VALIDATION.md, Session 28, hbm28: each bundled device's figure and its sources).
int64_t DeviceSpec::memoryBytes() const { return static_cast<int64_t>(memory_gib * kBytesPerGiB); }

DeviceSpec readInlineDevice(const YamlReader& device) {
  device.allowOnly(
      {"name", "peak_tflops", "memory_bandwidth_gb_s", "memory_gib", "overlap_slowdown", "memory"});
  DeviceSpec spec;
  spec.name = device.str("name");
  spec.datasheet_source = "inline in " + device.file();
  spec.memory_bandwidth_gb_s =
      datasheetValue(device, "memory_bandwidth_gb_s", kMinBandwidthGBs, kMaxBandwidthGBs);
  spec.memory_gib = datasheetValue(device, "memory_gib", kMinMemoryGib, kMaxMemoryGib);
  readPeaks(device.child("peak_tflops"), spec);
  if (device.has("overlap_slowdown")) {
    spec.overlap_slowdown = readOverlapSlowdown(device.child("overlap_slowdown"));
  }
  if (device.has("memory")) spec.memory = readMemoryOverheads(device.child("memory"));
  return spec;
}

DeviceSpec loadDeviceConfig(const std::string& path) {
  return readDeviceFile(YamlReader::fromFile(path));
}

DeviceSpec parseDeviceConfig(const std::string& yaml_text, const std::string& origin) {
  return readDeviceFile(YamlReader::fromString(yaml_text, origin));
}

std::string deviceConfigYaml(const DeviceSpec& spec) {
  EVSIM_CHECK(!spec.id.empty() && spec.sm_count > 0, "device '{}' is not a device file's",
              spec.name);
  YAML::Emitter out;
  out.SetDoublePrecision(6);
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << spec.id;
  out << YAML::Key << "gpu" << YAML::Value << spec.name;
  out << YAML::Key << "datasheet" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "source" << YAML::Value << spec.datasheet_source;
  out << YAML::Key << "peak_tflops" << YAML::Value << YAML::Flow << YAML::BeginMap;
  for (const auto& [dtype, tflops] : spec.peak_tflops) {
    out << YAML::Key << std::string(dtypeName(dtype)) << YAML::Value << tflops;
  }
  out << YAML::EndMap;
  out << YAML::Key << "memory_bandwidth_gb_s" << YAML::Value << spec.memory_bandwidth_gb_s;
  out << YAML::Key << "memory_gib" << YAML::Value << spec.memory_gib;
  out << YAML::Key << "sm_count" << YAML::Value << spec.sm_count;
  out << YAML::EndMap;
  if (spec.model) emitModel(out, *spec.model);
  out << YAML::Key << "memory" << YAML::Value << YAML::BeginMap;
  emitSourced(out, "cuda_context_mib", spec.memory.cuda_context_mib);
  emitSourced(out, "cublas_workspace_mib", spec.memory.cublas_workspace_mib);
  emitSourced(out, "nccl_mib_per_communicator", spec.memory.nccl_mib_per_communicator);
  emitSourced(out, "allocator_fragmentation", spec.memory.allocator_fragmentation);
  out << YAML::EndMap;
  if (spec.overlap_slowdown.given) {
    out << YAML::Key << "overlap_slowdown" << YAML::Value << YAML::BeginMap;
    emitSourced(out, "nvlink", spec.overlap_slowdown.nvlink);
    emitSourced(out, "network", spec.overlap_slowdown.network);
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace evsim
