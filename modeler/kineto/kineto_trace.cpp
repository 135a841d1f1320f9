#include "modeler/kineto/kineto_trace.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "common/error.h"
#include "common/input_file.h"

namespace evsim {
namespace {

using nlohmann::json;

bool isHostOp(const std::string& category) {
  return category == "cpu_op" || category == "user_annotation";
}

bool isDeviceWork(const std::string& category) {
  return category == "kernel" || category == "gpu_memcpy" || category == "gpu_memset";
}

bool isRuntimeCall(const std::string& category) {
  return category == "cuda_runtime" || category == "cuda_driver";
}

double number(const json& e, const char* key, const std::string& origin, size_t index) {
  auto it = e.find(key);
  if (it == e.end() || !it->is_number()) {
    EVSIM_THROW(InputError, "{}: traceEvents[{}] ({}): no numeric '{}'", origin, index,
                e.value("name", std::string("?")), key);
  }
  return it->get<double>();
}

std::vector<std::vector<int64_t>> shapes(const json& args, const char* key) {
  std::vector<std::vector<int64_t>> out;
  auto it = args.find(key);
  if (it == args.end() || !it->is_array()) return out;
  for (const json& dims : *it) {
    std::vector<int64_t> one;
    if (dims.is_array()) {
      for (const json& d : dims) {
        if (d.is_number_integer()) one.push_back(d.get<int64_t>());
      }
    }
    out.push_back(std::move(one));
  }
  return out;
}

// A count that Kineto writes as a number (or, from older writers, as a quoted number).
int64_t countArg(const json& args, const char* key) {
  auto it = args.find(key);
  if (it == args.end()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_string()) {
    const std::string text = it->get<std::string>();
    char* end = nullptr;
    const long long value = std::strtoll(text.c_str(), &end, 10);
    if (end != text.c_str()) return value;
  }
  return 0;
}

// "[0, 1, 2, 3]" (or a JSON array); a list PyTorch truncated ("[64, 65, ..., 93, ...]") is
// extended by the stride of its first two ranks to `group_size`.
std::vector<int64_t> groupRanks(const json& args, int group_size) {
  std::vector<int64_t> ranks;
  auto it = args.find("Process Group Ranks");
  if (it == args.end()) return ranks;
  bool truncated = false;
  if (it->is_array()) {
    for (const json& r : *it) {
      if (r.is_number_integer()) ranks.push_back(r.get<int64_t>());
    }
  } else if (it->is_string()) {
    const std::string text = it->get<std::string>();
    truncated = text.find("...") != std::string::npos;
    const char* p = text.c_str();
    while (*p != '\0') {
      if (*p >= '0' && *p <= '9') {
        char* end = nullptr;
        ranks.push_back(std::strtoll(p, &end, 10));
        p = end;
      } else {
        ++p;
      }
    }
  }
  if (truncated && ranks.size() >= 2 && group_size > static_cast<int>(ranks.size())) {
    const int64_t stride = ranks[1] - ranks[0];
    ranks.resize(2);
    for (int i = 2; i < group_size; ++i) ranks.push_back(ranks[0] + i * stride);
  }
  return ranks;
}

std::optional<KinetoCollective> collectiveOf(const json& args) {
  auto it = args.find("Collective name");
  if (it == args.end() || !it->is_string()) return std::nullopt;
  KinetoCollective c;
  c.name = it->get<std::string>();
  c.in_elems = countArg(args, "In msg nelems");
  c.out_elems = countArg(args, "Out msg nelems");
  c.dtype = args.value("dtype", std::string());
  c.group_size = static_cast<int>(countArg(args, "Group size"));
  c.ranks = groupRanks(args, c.group_size);
  if (c.group_size == 0) c.group_size = static_cast<int>(c.ranks.size());
  return c;
}

// Thread key: a trace's pid and tid may be numbers or strings.
std::string threadKey(const json& e) {
  return e.value("pid", json()).dump() + "/" + e.value("tid", json()).dump();
}

// The innermost op of `thread_ops` (sorted by start, outer before inner) containing `t_us`.
int innermostAt(const std::vector<KinetoOp>& ops, const std::vector<int>& thread_ops, double t_us) {
  int found = -1;
  // Ops nest, so the last op starting at or before t that still runs at t is the innermost.
  auto end = std::upper_bound(thread_ops.begin(), thread_ops.end(), t_us,
                              [&](double t, int i) { return t < ops[i].start_us; });
  for (auto it = thread_ops.begin(); it != end; ++it) {
    const KinetoOp& op = ops[*it];
    if (t_us <= op.start_us + op.duration_us) found = *it;
  }
  return found;
}

}  // namespace

double KinetoTrace::subtreeKernelUs(int op) const {
  double total = ops[op].kernel_us;
  for (int child : ops[op].children) total += subtreeKernelUs(child);
  return total;
}

int KinetoTrace::subtreeKernels(int op) const {
  int total = ops[op].kernels;
  for (int child : ops[op].children) total += subtreeKernels(child);
  return total;
}

double KinetoTrace::opTimeUs(int op) const {
  return has_device_kernels ? subtreeKernelUs(op) : ops[op].duration_us;
}

KinetoTrace parseKinetoTrace(const std::string& text, const std::string& origin) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) EVSIM_THROW(InputError, "{}: not JSON (a Chrome/Kineto trace)", origin);
  const json* events = nullptr;
  if (doc.is_object() && doc.contains("traceEvents")) events = &doc["traceEvents"];
  if (events == nullptr || !events->is_array()) {
    EVSIM_THROW(InputError, "{}: no traceEvents array (not a PyTorch profiler trace)", origin);
  }
  KinetoTrace trace;
  std::map<std::string, std::vector<int>> by_thread;
  struct Launch {
    std::string thread;
    double ts_us;
  };
  std::unordered_map<int64_t, Launch> launches;         // correlation id -> runtime call
  std::vector<std::pair<int64_t, size_t>> device_work;  // correlation, kernel index
  for (size_t i = 0; i < events->size(); ++i) {
    const json& e = (*events)[i];
    if (!e.is_object() || e.value("ph", std::string()) != "X") continue;
    const std::string category = e.value("cat", std::string());
    const json args = e.value("args", json::object());
    if (isHostOp(category)) {
      KinetoOp op;
      op.name = e.value("name", std::string());
      op.category = category;
      op.start_us = number(e, "ts", origin, i);
      op.duration_us = number(e, "dur", origin, i);
      op.input_dims = shapes(args, "Input Dims");
      op.input_strides = shapes(args, "Input Strides");
      if (auto it = args.find("Input type"); it != args.end() && it->is_array()) {
        for (const json& t : *it)
          op.input_types.push_back(t.is_string() ? t.get<std::string>() : "");
      }
      op.collective = collectiveOf(args);
      by_thread[threadKey(e)].push_back(static_cast<int>(trace.ops.size()));
      trace.ops.push_back(std::move(op));
    } else if (isRuntimeCall(category) && args.contains("correlation")) {
      launches[args["correlation"].get<int64_t>()] = {threadKey(e), number(e, "ts", origin, i)};
    } else if (isDeviceWork(category)) {
      KinetoKernel kernel{e.value("name", std::string()), number(e, "dur", origin, i), -1,
                          collectiveOf(args)};
      device_work.emplace_back(args.value("correlation", int64_t{-1}), trace.kernels.size());
      trace.kernels.push_back(std::move(kernel));
    }
  }
  // Nesting per thread: sorted by start, longer first on ties, each op's parent is the innermost
  // open op that contains it.
  for (auto& [thread, ids] : by_thread) {
    std::sort(ids.begin(), ids.end(), [&](int a, int b) {
      const KinetoOp& x = trace.ops[a];
      const KinetoOp& y = trace.ops[b];
      return x.start_us != y.start_us ? x.start_us < y.start_us : x.duration_us > y.duration_us;
    });
    std::vector<int> open;
    for (int id : ids) {
      KinetoOp& op = trace.ops[id];
      while (!open.empty()) {
        const KinetoOp& top = trace.ops[open.back()];
        if (op.start_us + op.duration_us <= top.start_us + top.duration_us + 1e-3) break;
        open.pop_back();
      }
      if (open.empty()) {
        trace.roots.push_back(id);
      } else {
        op.parent = open.back();
        trace.ops[open.back()].children.push_back(id);
      }
      open.push_back(id);
    }
  }
  for (const auto& [correlation, k] : device_work) {
    auto launch = launches.find(correlation);
    if (launch == launches.end()) continue;
    auto thread = by_thread.find(launch->second.thread);
    if (thread == by_thread.end()) continue;
    const int op = innermostAt(trace.ops, thread->second, launch->second.ts_us);
    trace.kernels[k].op = op;
    if (op >= 0) {
      trace.ops[op].kernel_us += trace.kernels[k].duration_us;
      trace.ops[op].kernels += 1;
    }
  }
  trace.has_device_kernels = !trace.kernels.empty();
  if (trace.ops.empty()) {
    EVSIM_THROW(InputError,
                "{}: no CPU ops (cat cpu_op) in the trace: record it with "
                "torch.profiler.profile(activities=[CPU, ...], record_shapes=True)",
                origin);
  }
  return trace;
}

KinetoTrace loadKinetoTrace(const std::string& path) {
  return parseKinetoTrace(readInputFile(path, "trace"), path);
}

}  // namespace evsim
