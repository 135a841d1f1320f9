#include "modeler/kineto/kineto_match.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include "events/comm_factors.h"
#include "modeler/kineto/kineto_comm.h"

namespace evsim {
namespace {

constexpr int64_t kAny = -1;  // a dim the trace does not give (matched to the plan's only one)

struct Wanted {
  std::string op;
  std::vector<Dim> dims;  // kAny: any value
  std::string layout;     // GEMMs: from the strides ("" when they are not recorded)
  DType dtype = DType::kFp32;
};

std::optional<DType> dtypeOf(const KinetoOp& op) {
  for (const std::string& t : op.input_types) {
    if (t == "float") return DType::kFp32;
    if (t == "c10::BFloat16") return DType::kBf16;
    if (t == "c10::Half") return DType::kFp16;
    if (!t.empty() && t != "Scalar" && t != "ScalarList") return std::nullopt;  // long, double
  }
  return std::nullopt;
}

int64_t product(const std::vector<int64_t>& dims, size_t from = 0, size_t to = SIZE_MAX) {
  const size_t end = std::min(to, dims.size());
  if (from >= end) return 1;
  return std::accumulate(dims.begin() + static_cast<std::ptrdiff_t>(from),
                         dims.begin() + static_cast<std::ptrdiff_t>(end), int64_t{1},
                         std::multiplies<>());
}

bool hasDims(const KinetoOp& op, size_t index, size_t rank_at_least) {
  return op.input_dims.size() > index && op.input_dims[index].size() >= rank_at_least;
}

// 'n' or 't' for one matrix operand: a transposed view has unit stride along its rows (the
// second-to-last dimension) and not along its columns.
char operandLayout(const KinetoOp& op, size_t index) {
  if (op.input_strides.size() <= index || op.input_strides[index].size() < 2) return '?';
  const std::vector<int64_t>& s = op.input_strides[index];
  const int64_t rows = s[s.size() - 2], cols = s[s.size() - 1];
  return cols != 1 && rows == 1 ? 't' : 'n';
}

std::optional<Wanted> gemm(const KinetoOp& op, size_t a, size_t b, bool batched) {
  const size_t rank = batched ? 3 : 2;
  if (!hasDims(op, a, rank) || !hasDims(op, b, rank)) return std::nullopt;
  const auto& x = op.input_dims[a];
  const auto& y = op.input_dims[b];
  Wanted w;
  w.op = batched ? "bgemm" : "gemm";
  if (batched) w.dims.push_back({"batch", x[0]});
  w.dims.push_back({"m", x[rank - 2]});
  w.dims.push_back({"n", y[rank - 1]});
  w.dims.push_back({"k", x[rank - 1]});
  const char la = operandLayout(op, a), lb = operandLayout(op, b);
  if (la != '?' && lb != '?') w.layout = std::string{la, lb};
  return w;
}

// rows = all but the last dimension of input `index`, cols = the last.
std::optional<Wanted> rowsCols(const KinetoOp& op, const char* name, size_t index = 0) {
  if (!hasDims(op, index, 1)) return std::nullopt;
  const auto& d = op.input_dims[index];
  return Wanted{name, {{"rows", product(d, 0, d.size() - 1)}, {"cols", d.back()}}, "", {}};
}

std::optional<Wanted> elems(const KinetoOp& op, const char* name, size_t index = 0) {
  if (!hasDims(op, index, 1)) return std::nullopt;
  return Wanted{name, {{"elems", product(op.input_dims[index])}}, "", {}};
}

std::optional<Wanted> wantedFor(const KinetoOp& op) {
  const std::string& n = op.name;
  std::optional<Wanted> w;
  if (n.rfind("Optimizer.step#", 0) == 0 && n.find("Adam") != std::string::npos) {
    // The whole step, every parameter: the plan's one adam event of this rank.
    return Wanted{"adam", {{"params", kAny}}, "", DType::kFp32};
  }
  if (n == "aten::mm")
    w = gemm(op, 0, 1, false);
  else if (n == "aten::addmm")
    w = gemm(op, 1, 2, false);
  else if (n == "aten::bmm")
    w = gemm(op, 0, 1, true);
  else if (n == "aten::baddbmm")
    w = gemm(op, 1, 2, true);
  else if (n == "aten::layer_norm" || n == "aten::native_layer_norm")
    w = rowsCols(op, "layernorm_fwd");
  else if (n == "aten::native_layer_norm_backward")
    w = rowsCols(op, "layernorm_bwd");
  else if (n == "aten::rms_norm" || n == "aten::_fused_rms_norm")
    w = rowsCols(op, "rmsnorm_fwd");
  else if (n == "aten::softmax" || n == "aten::_softmax")
    w = rowsCols(op, "softmax_fwd");
  else if (n == "aten::_softmax_backward_data")
    w = rowsCols(op, "softmax_bwd");
  else if (n == "aten::cross_entropy_loss")
    w = rowsCols(op, "cross_entropy_fwd");
  else if (n == "aten::_log_softmax_backward_data")
    w = rowsCols(op, "cross_entropy_bwd");
  else if (n == "aten::gelu")
    w = elems(op, "gelu_fwd");
  else if (n == "aten::gelu_backward")
    w = elems(op, "gelu_bwd");
  else if (n == "aten::dropout" || n == "aten::native_dropout")
    w = elems(op, "dropout_fwd");
  else if (n == "aten::native_dropout_backward")
    w = elems(op, "dropout_bwd");
  else if (n == "aten::add" && hasDims(op, 0, 1) && hasDims(op, 1, 1)) {
    // The output's elements: the larger operand (a broadcast add of positions to tokens).
    const int64_t e = std::max(product(op.input_dims[0]), product(op.input_dims[1]));
    w = Wanted{"add", {{"elems", e}}, "", {}};
  } else if (n == "aten::embedding" && hasDims(op, 0, 2) && hasDims(op, 1, 1)) {
    w = Wanted{"embedding_fwd",
               {{"tokens", product(op.input_dims[1])},
                {"hidden", op.input_dims[0][1]},
                {"vocab", op.input_dims[0][0]}},
               "",
               {}};
  } else if ((n == "aten::embedding_backward" || n == "aten::embedding_dense_backward") &&
             hasDims(op, 0, 1) && hasDims(op, 1, 1)) {
    w = Wanted{"embedding_bwd",
               {{"tokens", product(op.input_dims[1])},
                {"hidden", op.input_dims[0].back()},
                {"vocab", kAny}},
               "",
               {}};
  }
  if (!w) return std::nullopt;
  const std::optional<DType> dtype = dtypeOf(op);
  if (!dtype) return std::nullopt;
  w->dtype = *dtype;
  return w;
}

bool dimsMatch(const Event& e, const std::vector<Dim>& dims) {
  if (e.dims.size() != dims.size()) return false;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (e.dims[i].name != dims[i].name) return false;
    if (dims[i].value != kAny && e.dims[i].value != dims[i].value) return false;
  }
  return true;
}

// The plan's event for `w`: exact layout first, then the other layouts, then the transposed
// product (m and n swapped); -1 when none, or when a wildcard leaves more than one.
int findEvent(const EventTable& table, const Wanted& w) {
  auto candidates = [&](const std::vector<Dim>& dims) {
    std::vector<int> out;
    for (int i = 0; i < table.size(); ++i) {
      const Event& e = table[i].event;
      if (e.kind == EventKind::kCompute && e.op == w.op && e.dtype == w.dtype &&
          dimsMatch(e, dims)) {
        out.push_back(i);
      }
    }
    return out;
  };
  const bool is_gemm = w.op == "gemm" || w.op == "bgemm";
  const std::vector<int> found = candidates(w.dims);
  if (!is_gemm) return found.size() == 1 ? found[0] : -1;
  std::vector<Dim> transposed = w.dims;
  const size_t m = transposed.size() - 3;
  std::swap(transposed[m].value, transposed[m + 1].value);
  const std::vector<int> swapped = candidates(transposed);
  std::vector<std::string> order;
  if (!w.layout.empty()) order.push_back(w.layout);
  for (const char* l : {"nt", "nn", "tn"}) {
    if (w.layout != l) order.push_back(l);
  }
  for (const std::vector<int>* set : {&found, &swapped}) {
    for (const std::string& layout : order) {
      for (int i : *set) {
        if (table[i].event.layout == layout) return i;
      }
    }
  }
  return -1;
}

std::string shapeText(const KinetoOp& op) {
  std::vector<std::string> parts;
  for (const auto& d : op.input_dims) parts.push_back(fmt::format("[{}]", fmt::join(d, ", ")));
  return fmt::format("{} [{}]", op.name, fmt::join(parts, ", "));
}

TimingStats statsOf(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  TimingStats s;
  s.count = static_cast<int>(us.size());
  s.min_us = us.front();
  s.max_us = us.back();
  const size_t h = us.size() / 2;
  s.median_us = us.size() % 2 ? us[h] : (us[h - 1] + us[h]) / 2;
  double mean = 0;
  for (double v : us) mean += v;
  mean /= static_cast<double>(us.size());
  double var = 0;
  for (double v : us) var += (v - mean) * (v - mean);
  s.stddev_us = std::sqrt(var / static_cast<double>(us.size()));
  return s;
}

struct Walk {
  const KinetoTrace& trace;
  const EventTable& table;
  int gpus_per_node = 0;
  std::map<int, std::vector<double>> times;  // table index -> op times
  std::map<std::pair<std::string, std::string>, KinetoUnmatched> unmatched;
  KinetoImport* out;

  void miss(const std::string& what, const std::string& reason, double us) {
    KinetoUnmatched& u = unmatched[{what, reason}];
    u.what = what;
    u.reason = reason;
    u.count += 1;
    u.total_us += us;
  }

  // A collective's time (its NCCL kernels' device time) to every plan event it matches.
  void collective(const KinetoCollective& c, double us) {
    const KinetoCollectiveMatch m = matchKinetoCollective(c, table, gpus_per_node);
    if (m.events.empty()) {
      miss(m.what, m.reason, us);
      return;
    }
    for (int event : m.events) times[event].push_back(us);
    out->matched_ops += 1;
    out->shape_matched_ops += 1;  // by kind, bytes and group
    out->matched_us += us;
    out->matched_collectives += 1;
    out->collective_us += us;
  }

  void visit(int id) {
    const KinetoOp& op = trace.ops[id];
    const double us = trace.opTimeUs(id);
    if (op.collective) {
      // The launch returns at once: only the kernels' device time is the collective's.
      if (!trace.has_device_kernels || trace.subtreeKernels(id) == 0) {
        const KinetoCollectiveMatch m = matchKinetoCollective(*op.collective, table, gpus_per_node);
        // ProcessGroupNCCL also records "init", "wait", "barrier": said as such first.
        const std::string reason = m.reason == "no eventsim collective" ? m.reason
                                   : trace.has_device_kernels
                                       ? "no NCCL kernel launched under it"
                                       : "host time only (the trace has no GPU kernels)";
        miss(m.what, reason, op.duration_us);
        return;
      }
      collective(*op.collective, us);
      return;
    }
    if (std::optional<Wanted> w = wantedFor(op)) {
      if (const int event = findEvent(table, *w); event >= 0) {
        times[event].push_back(us);
        out->matched_ops += 1;
        const bool by_shape = std::none_of(w->dims.begin(), w->dims.end(),
                                           [](const Dim& d) { return d.value == kAny; });
        out->shape_matched_ops += by_shape ? 1 : 0;
        out->matched_us += us;
        return;
      }
      if (op.children.empty()) {
        miss(fmt::format("{} ({} {})", shapeText(op), w->op, dtypeName(w->dtype)),
             "not an event of the plan", us);
        return;
      }
    }
    if (op.children.empty()) {
      if (us > 0) miss(shapeText(op), "no eventsim op", us);
      return;
    }
    for (int child : op.children) visit(child);
  }
};

}  // namespace

KinetoImport matchKinetoTrace(const KinetoTrace& trace, const EventTable& plan_events,
                              int gpus_per_node) {
  KinetoImport out;
  Walk walk{trace, plan_events, gpus_per_node, {}, {}, &out};
  for (int root : trace.roots) {
    out.total_us += trace.opTimeUs(root);
    walk.visit(root);
  }
  for (const KinetoKernel& k : trace.kernels) {
    if (k.op >= 0) continue;
    // An NCCL kernel whose launch the trace lacks still names its collective (recent Kineto).
    if (k.collective) {
      out.total_us += k.duration_us;
      walk.collective(*k.collective, k.duration_us);
    } else {
      walk.miss("kernel " + k.name, "no launching op in the trace", k.duration_us);
    }
  }
  for (const auto& [index, times] : walk.times) {
    ProfileRecord record;
    record.event = plan_events[index].event;
    record.signature = plan_events[index].signature;
    record.time = statsOf(times);
    if (isCommunication(record.event.kind)) {
      // Measured at its own group size, as eventprof records a collective it did not scale.
      record.setMeasured(record.event.placement);
      if (record.time.median_us > 0) {
        record.algbw_gb_s = static_cast<double>(record.event.message_bytes) /
                            record.time.median_us / 1e3;  // bytes/us -> GB/s
        record.busbw_gb_s =
            record.algbw_gb_s * busBandwidthFactor(record.event.kind, record.measured_group_size);
      }
    }
    out.db.put(std::move(record));
  }
  for (int i = 0; i < plan_events.size(); ++i) {
    if (!walk.times.count(i)) out.not_measured.push_back(plan_events[i].signature);
  }
  for (auto& [key, u] : walk.unmatched) out.unmatched.push_back(std::move(u));
  std::sort(out.unmatched.begin(), out.unmatched.end(),
            [](const KinetoUnmatched& a, const KinetoUnmatched& b) {
              return a.total_us != b.total_us ? a.total_us > b.total_us : a.what < b.what;
            });
  return out;
}

}  // namespace evsim
