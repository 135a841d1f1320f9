#include "events/event.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <iterator>
#include <map>
#include <span>

#include "common/checked.h"
#include "common/error.h"
#include "common/strings.h"
#include "events/collective.h"
#include "events/compute_op_rules.h"

namespace evsim {

std::string_view eventKindName(EventKind kind) {
  return kind == EventKind::kCompute ? "compute" : collectiveOf(kind).name;
}

bool isCommunication(EventKind kind) { return kind != EventKind::kCompute; }

std::string Event::signature() const {
  // Formatted into a stack buffer, then copied once (each piece appended to a string grew it).
  fmt::memory_buffer out;
  out.append(op);
  if (kind == EventKind::kCompute) {
    for (const Dim& d : dims) fmt::format_to(std::back_inserter(out), " {}={}", d.name, d.value);
    if (!layout.empty()) fmt::format_to(std::back_inserter(out), " layout={}", layout);
  } else {
    fmt::format_to(std::back_inserter(out), " bytes={} group={} nodes={} rpn={}", message_bytes,
                   placement.group_size, placement.nodes, placement.ranks_per_node);
  }
  fmt::format_to(std::back_inserter(out), " dtype={}", dtypeName(dtype));
  return fmt::to_string(out);
}

bool Event::hasDim(std::string_view name) const {
  return std::any_of(dims.begin(), dims.end(), [&](const Dim& d) { return d.name == name; });
}

int64_t Event::dim(std::string_view name) const {
  for (const Dim& d : dims) {
    if (d.name == name) return d.value;
  }
  EVSIM_THROW(Error, "event '{}' has no dimension '{}'", signature(), name);
}

Event makeCompute(std::string_view op, std::vector<Dim> dims, std::string_view layout, DType dtype,
                  std::string_view where) {
  auto rule_it = computeRules().find(op);
  if (rule_it == computeRules().end()) {
    EVSIM_THROW(InputError, "{}: unknown compute op '{}'", where, op);
  }
  const ComputeOpRule& rule = rule_it->second;
  const size_t required = rule.dims.size();
  if (dims.size() < required || dims.size() > required + rule.optional_dims.size()) {
    EVSIM_THROW(InputError, "{}: op '{}' takes dims {}{}{}", where, op, fmt::join(rule.dims, " "),
                rule.optional_dims.empty() ? "" : " and optionally ",
                fmt::join(rule.optional_dims, " "));
  }
  // The values on the stack: this runs for every op of every plan and layer-times key a search
  // builds, and a vector grown here was most of the events' heap allocations (bench/RESULTS.md,
  // session 26, alloc34).
  std::array<int64_t, kMaxComputeDims> value_storage{};
  EVSIM_CHECK(dims.size() <= value_storage.size(), "op '{}' with {} dims", op, dims.size());
  const std::span<int64_t> values(value_storage.data(), dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    const std::string& expected = i < required ? rule.dims[i] : rule.optional_dims[i - required];
    if (dims[i].name != expected) {
      EVSIM_THROW(InputError, "{}: op '{}' expects dim '{}' in place {}, got '{}'", where, op,
                  expected, i + 1, dims[i].name);
    }
    if (dims[i].name == "causal") {
      if (dims[i].value != 0 && dims[i].value != 1) {
        EVSIM_THROW(InputError, "{}: op '{}' dim causal={} must be 0 or 1", where, op,
                    dims[i].value);
      }
    } else if (dims[i].name == "read_bytes" ? dims[i].value < 0 : dims[i].value <= 0) {
      // A fill kernel (memory_pass) reads nothing; every other size is positive.
      EVSIM_THROW(InputError, "{}: op '{}' dim {}={} must be {}", where, op, dims[i].name,
                  dims[i].value, dims[i].name == "read_bytes" ? ">= 0" : "> 0");
    }
    values[i] = dims[i].value;
  }
  if (rule.kind.family == OpFamily::kAttention && rule.dims[1] == "groups" &&
      values[0] % values[1] != 0) {
    EVSIM_THROW(InputError, "{}: op '{}' groups={} must divide batch={}", where, op, values[1],
                values[0]);
  }
  if (rule.has_layout != !layout.empty() ||
      (rule.has_layout && layout != "nn" && layout != "nt" && layout != "tn" && layout != "tt")) {
    EVSIM_THROW(InputError, "{}: op '{}' layout '{}' invalid ({})", where, op, layout,
                rule.has_layout ? "nn, nt, tn or tt" : "takes none");
  }
  Event e;
  e.kind = EventKind::kCompute;
  e.op = std::string(op);
  e.dims = std::move(dims);
  e.layout = std::string(layout);
  // Adam's state is fp32 whatever the model's dtype; FP8 casts read a 16-bit source.
  e.dtype = op == "adam" || op == "cpu_adam"       ? DType::kFp32
            : op == "fp8_quantize" || op == "amax" ? DType::kBf16
                                                   : dtype;
  e.flops = rule.flops(values);
  // Dims read from a file can be anything up to int64: the traffic they imply must fit int64.
  // The name is formatted only on failure: this runs for every op of every plan of a search.
  const double per_unit = rule.counts_bytes ? 1.0 : double(dtypeBytes(e.dtype));
  e.memory_bytes = checkedToInt64(rule.elements_moved(values) * per_unit, [&] {
    return fmt::format("{}: op '{}' memory traffic in bytes", where, op);
  });
  return e;
}

Event makeGemm(int64_t m, int64_t n, int64_t k, std::string_view layout, DType dtype) {
  return makeCompute("gemm", {{"m", m}, {"n", n}, {"k", k}}, layout, dtype);
}

Event makeBatchedGemm(int64_t batch, int64_t m, int64_t n, int64_t k, std::string_view layout,
                      DType dtype) {
  return makeCompute("bgemm", {{"batch", batch}, {"m", m}, {"n", n}, {"k", k}}, layout, dtype);
}

Event makeCommunication(EventKind kind, int64_t message_bytes, Placement placement, DType dtype) {
  EVSIM_CHECK(kind != EventKind::kCompute, "not a communication kind");
  EVSIM_CHECK(message_bytes > 0 && placement.group_size >= 2 && placement.nodes >= 1 &&
                  placement.ranks_per_node >= 1 && placement.ranks_per_node <= placement.group_size,
              "bad communication event: bytes={} group={} nodes={} rpn={}", message_bytes,
              placement.group_size, placement.nodes, placement.ranks_per_node);
  Event e;
  e.kind = kind;
  e.op = std::string(eventKindName(kind));
  e.dtype = dtype;
  e.message_bytes = message_bytes;
  e.placement = placement;
  return e;
}

Event parseEventSignature(std::string_view signature, std::string_view where) {
  std::vector<std::string> tokens;
  for (const std::string& t : split(trim(signature), ' ')) {
    if (!t.empty()) tokens.push_back(t);
  }
  if (tokens.empty()) EVSIM_THROW(InputError, "{}: empty event signature", where);
  std::string op = tokens[0];
  std::vector<Dim> dims;
  std::string layout;
  std::string dtype_name;
  std::map<std::string, int64_t> comm;
  const Collective* collective = findCollective(op);
  const bool is_comm = collective != nullptr;
  for (size_t i = 1; i < tokens.size(); ++i) {
    size_t eq = tokens[i].find('=');
    if (eq == std::string::npos || eq == 0) {
      EVSIM_THROW(InputError, "{}: '{}': expected key=value, got '{}'", where, signature,
                  tokens[i]);
    }
    std::string key = tokens[i].substr(0, eq);
    std::string value = tokens[i].substr(eq + 1);
    if (key == "dtype") {
      dtype_name = value;
      continue;
    }
    if (key == "layout" && !is_comm) {
      layout = value;
      continue;
    }
    if (is_comm && key != "bytes" && key != "group" && key != "nodes" && key != "rpn") {
      EVSIM_THROW(InputError, "{}: '{}': unknown key '{}' (bytes, group, nodes, rpn, dtype)", where,
                  signature, key);
    }
    int64_t number = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
    if (ec != std::errc() || ptr != value.data() + value.size()) {
      EVSIM_THROW(InputError, "{}: '{}': {}='{}' is not an integer", where, signature, key, value);
    }
    if (is_comm) {
      comm[key] = number;
    } else {
      dims.push_back({key, number});
    }
  }
  if (dtype_name.empty()) EVSIM_THROW(InputError, "{}: '{}': missing dtype=", where, signature);
  DType dtype = parseDType(dtype_name, where);
  if (!is_comm) return makeCompute(op, std::move(dims), layout, dtype, where);

  for (const char* key : {"bytes", "group", "nodes", "rpn"}) {
    if (!comm.count(key) || comm[key] <= 0) {
      EVSIM_THROW(InputError, "{}: '{}': needs {}= > 0", where, signature, key);
    }
  }
  // Narrowed checked: a group of 4294967298 must not become one of 2 (issue 17).
  const std::string sig_where = fmt::format("{}: '{}'", where, signature);
  Placement placement{checkedNarrow<int>(comm["group"], sig_where + ": group"),
                      checkedNarrow<int>(comm["nodes"], sig_where + ": nodes"),
                      checkedNarrow<int>(comm["rpn"], sig_where + ": rpn")};
  // One node holds rpn ranks and every other node at least one: rpn + nodes - 1 <= group (in
  // int64: the sums and products of two ints may not fit one).
  const int64_t group = placement.group_size, nodes = placement.nodes,
                rpn = placement.ranks_per_node;
  if (group < 2 || rpn + nodes - 1 > group || nodes * rpn < group) {
    EVSIM_THROW(InputError, "{}: '{}': placement group={} nodes={} rpn={} is impossible", where,
                signature, placement.group_size, placement.nodes, placement.ranks_per_node);
  }
  return makeCommunication(collective->kind, comm["bytes"], placement, dtype);
}

}  // namespace evsim
