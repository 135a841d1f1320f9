#include "modeler/nccl_tests_log.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "common/checked.h"
#include "common/error.h"
#include "common/input_file.h"
#include "common/strings.h"
#include "common/units.h"
#include "events/collective.h"
#include "events/comm_factors.h"

namespace evsim {

namespace {

constexpr double kNsPerUs = 1e3;
// Older nccl-tests report the largest numerical error of a result; round-off of fp16 sums stays
// far below this, a wrong result far above.
constexpr double kMaxNumericalError = 1e-2;

std::vector<std::string> tokens(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

DType elementType(const std::string& type, const std::string& where) {
  if (type == "float") return DType::kFp32;
  if (type == "half") return DType::kFp16;
  if (type == "bfloat16") return DType::kBf16;
  EVSIM_THROW(InputError,
              "{}: element type '{}' is not one eventsim models (float, half, bfloat16)", where,
              type.substr(0, 40));
}

int64_t positiveInt(const std::string& text, const std::string& where, const std::string& what) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value <= 0) {
    EVSIM_THROW(InputError, "{}: {} '{}' is not a positive integer", where, what,
                text.substr(0, 40));
  }
  return value;
}

double number(const std::string& text, const std::string& where, const std::string& what) {
  const std::optional<double> parsed = parseNumber(text);
  if (!parsed)
    EVSIM_THROW(InputError, "{}: {} '{}' is not a number", where, what, text.substr(0, 40));
  const double value = *parsed;
  if (!std::isfinite(value) || value < 0) {
    EVSIM_THROW(InputError, "{}: {} {} must be a finite number >= 0", where, what,
                text.substr(0, 40));
  }
  return value;
}

double positiveNumber(const std::string& text, const std::string& where, const std::string& what) {
  double value = number(text, where, what);
  if (!(value > 0)) {
    EVSIM_THROW(InputError, "{}: {} {} must be > 0", where, what, text.substr(0, 40));
  }
  return value;
}

// One measured size, before the event is known.
struct Row {
  int64_t bytes = 0;
  DType dtype = DType::kFp32;
  double time_us = 0;
  double algbw_gb_s = 0;  // bytes / time, recomputed (the logs round to 0.01 GB/s)
};

Placement placementFor(EventKind kind, const NcclTestsOptions& options,
                       const std::vector<std::string>& hosts, const std::string& origin) {
  Placement p;
  if (!hosts.empty()) {
    std::map<std::string, int> per_host;
    for (const std::string& h : hosts) ++per_host[h];
    p.group_size = static_cast<int>(hosts.size());
    p.nodes = static_cast<int>(per_host.size());
    for (const auto& [host, n] : per_host) p.ranks_per_node = std::max(p.ranks_per_node, n);
    // The Rank lines are the run itself: a --group or --nodes that says otherwise would file
    // these times under another placement (it was taken silently).
    if (options.group_must_agree && options.group && *options.group != p.group_size) {
      EVSIM_THROW(InputError,
                  "{}: --group {}: the log's Rank lines list {} ranks (leave --group out)", origin,
                  *options.group, p.group_size);
    }
    // Nodes started with one hostname (containers, pods) are one host to the Rank lines: the
    // hosts named are the fewest nodes the run had, and a larger --nodes K that divides the ranks
    // says how many (K nodes of group / K), as nccl-tests' user knows and the log cannot say.
    if (options.group_must_agree && options.nodes && *options.nodes != p.nodes) {
      if (*options.nodes < p.nodes) {
        EVSIM_THROW(InputError,
                    "{}: --nodes {}: the log's Rank lines name {} host(s), so at least {} nodes "
                    "(leave --nodes out, or raise it where nodes share one hostname)",
                    origin, *options.nodes, p.nodes, p.nodes);
      }
      if (p.group_size % *options.nodes != 0) {
        EVSIM_THROW(InputError,
                    "{}: --nodes {}: does not divide the log's {} ranks into equal nodes", origin,
                    *options.nodes, p.group_size);
      }
      p.nodes = *options.nodes;
      p.ranks_per_node = p.group_size / p.nodes;
    }
  } else {
    if (!options.group) {
      EVSIM_THROW(InputError,
                  "{}: no '#  Rank ... on HOST' lines to tell the group: give --group N (and "
                  "--nodes K)",
                  origin);
    }
    p.group_size = *options.group;
    p.nodes = options.nodes.value_or(1);
    if (p.nodes < 1 || p.nodes > p.group_size) {
      EVSIM_THROW(InputError, "{}: --nodes {} must be between 1 and the group's {} ranks", origin,
                  p.nodes, p.group_size);
    }
    p.ranks_per_node = (p.group_size + p.nodes - 1) / p.nodes;
  }
  if (p.group_size < 2) {
    EVSIM_THROW(InputError, "{}: {} rank(s): a collective needs at least 2", origin, p.group_size);
  }
  if (kind == EventKind::kP2P) {
    // sendrecv over n ranks is a ring of pairs; each pair is one p2p event.
    const bool across = p.nodes > 1;
    return Placement{2, across ? 2 : 1, across ? 1 : 2};
  }
  return p;
}

NcclTestsImport finish(EventKind kind, const std::vector<Row>& rows, int count,
                       const NcclTestsOptions& options, std::vector<std::string> hosts,
                       std::vector<std::string> devices, const std::string& origin) {
  if (rows.empty()) EVSIM_THROW(InputError, "{}: no measurement rows", origin);
  NcclTestsImport out;
  out.kind = kind;
  out.placement = placementFor(kind, options, hosts, origin);
  out.dtype = rows.front().dtype;
  out.hosts = std::move(hosts);
  out.devices = std::move(devices);
  std::set<int64_t> seen;
  for (const Row& row : rows) {
    if (!seen.insert(row.bytes).second) continue;  // a repeated size: the first run stands
    ProfileRecord r;
    r.event = makeCommunication(kind, row.bytes, out.placement, row.dtype);
    r.signature = r.event.signature();
    r.time = {row.time_us, row.time_us, row.time_us, 0, count};
    r.setMeasured(out.placement);  // the log's own group
    r.scaled = false;
    r.algbw_gb_s = row.algbw_gb_s;
    r.busbw_gb_s = row.algbw_gb_s * busBandwidthFactor(kind, out.placement.group_size);
    out.records.push_back(std::move(r));
  }
  return out;
}

NcclTestsImport parseCsv(const std::string& text, const std::string& origin,
                         const NcclTestsOptions& options) {
  if (!options.group) {
    EVSIM_THROW(InputError, "{}: the CSV form names no group: give --group N (ranks)", origin);
  }
  std::istringstream in(text);
  std::string line;
  int line_number = 0;
  std::vector<Row> rows;
  const EventKind kind = options.collective.value_or(EventKind::kAllReduce);
  while (std::getline(in, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line_number == 1 || trim(line).empty()) continue;  // the header
    const std::string where = fmt::format("{}:{}", origin, line_number);
    std::vector<std::string> cells = split(line, ',');
    if (cells.size() != 7) {
      EVSIM_THROW(InputError,
                  "{}: {} cells, expected 7 (size, count, type, then time (ns) and "
                  "busbw for out-of-place and in-place)",
                  where, cells.size());
    }
    for (std::string& c : cells) c = trim(c);
    Row row;
    row.bytes = positiveInt(cells[0], where, "size");
    row.dtype = elementType(cells[2], where);
    const int column = options.in_place ? 5 : 3;
    row.time_us = positiveNumber(cells[column], where, "time (ns)") / kNsPerUs;
    positiveNumber(cells[column + 1], where, "busbw");  // recomputed from size and time
    row.algbw_gb_s = double(row.bytes) / row.time_us / kNsPerUs;
    rows.push_back(row);
  }
  return finish(kind, rows, 1, options, {}, {}, origin);
}

}  // namespace

std::optional<EventKind> ncclTestsCollective(const std::string& name) {
  // Names compared without underscores and case: "all_reduce_perf", "allreduce", "AllReduce".
  auto plain = [](std::string_view text) {
    std::string out = toLower(text);
    out.erase(std::remove(out.begin(), out.end(), '_'), out.end());
    return out;
  };
  const std::string wanted = plain(name);
  for (const Collective* c : allCollectives()) {
    std::string test = plain(c->nccl_tests);  // "allreduceperf"
    std::string bare = test.substr(0, test.size() - 4);
    if (wanted == plain(c->name) || wanted.find(bare) != std::string::npos) return c->kind;
  }
  return std::nullopt;
}

NcclTestsImport parseNcclTests(const std::string& text, const std::string& origin,
                               const NcclTestsOptions& options) {
  if (text.rfind("size(B)", 0) == 0) return parseCsv(text, origin, options);

  std::optional<EventKind> kind = options.collective;
  std::istringstream in(text);
  std::string line;
  int line_number = 0, count = 1;
  std::vector<std::string> hosts, devices;
  std::vector<std::string> header;  // column names of the data rows
  std::vector<Row> rows;
  while (std::getline(in, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    // Open MPI's --tag-output prefix "[1,0]<stdout>:" (mpirun's rank tag) is not nccl-tests'.
    if (!line.empty() && line[0] == '[') {
      const size_t tag = line.find("]<stdout>:");
      if (tag != std::string::npos) line.erase(0, tag + std::string_view("]<stdout>:").size());
    }
    const std::string where = fmt::format("{}:{}", origin, line_number);
    std::vector<std::string> t = tokens(line);
    if (t.empty()) continue;
    if (t[0] == "#") {
      if (line.find("Collective test starting:") != std::string::npos) {
        // The log names its test: a --collective that names another would file these times
        // under the wrong collective (it overrode the log silently).
        const std::optional<EventKind> logged = ncclTestsCollective(t.back());
        if (kind && logged && *kind != *logged) {
          EVSIM_THROW(InputError, "{}: {} {}: the log is {} ({}), another collective", where,
                      options.collective_flag, eventKindName(*kind), t.back(),
                      eventKindName(*logged));
        }
        if (!kind) kind = logged;
      } else if (t.size() >= 2 && t[1] == "nThread") {
        auto it = std::find(t.begin(), t.end(), "iters:");
        // "warmup iters: 5 iters: 20": the timed iterations follow the second "iters:".
        if (it != t.end()) it = std::find(it + 1, t.end(), "iters:");
        if (it != t.end() && it + 1 != t.end()) {
          // Checked: a static_cast turned 4294967298 iterations into 2.
          count = checkedNarrow<int>(positiveInt(*(it + 1), where, "iters"), where + ": iters");
        }
      } else if (t.size() >= 4 && t[1] == "Rank" &&
                 std::find(t.begin(), t.end(), "on") != t.end() &&
                 std::find(t.begin(), t.end(), "on") + 1 != t.end()) {
        // "#  Rank  0 Group  0 Pid 123 on HOST device ..." (older versions have no Group field).
        hosts.push_back(*(std::find(t.begin(), t.end(), "on") + 1));
        // "device 0 [0x07] NVIDIA A100-SXM4-80GB": the name is what follows the bus id.
        size_t bus = line.find(']');
        devices.push_back(bus == std::string::npos ? "" : trim(line.substr(bus + 1)));
      } else if (std::find(t.begin(), t.end(), "size") != t.end() &&
                 std::find(t.begin(), t.end(), "time") != t.end()) {
        header.assign(t.begin() + 1, t.end());
      }
      continue;
    }
    // Data rows start with the size; anything else on stdout (mpirun's or NCCL_DEBUG's lines)
    // is not nccl-tests' table.
    if (t[0].find_first_not_of("0123456789") != std::string::npos) continue;
    if (header.empty()) {
      EVSIM_THROW(InputError, "{}: a data row before the column header ('#  size  count ...')",
                  where);
    }
    if (t.size() != header.size()) {
      EVSIM_THROW(InputError, "{}: {} columns, the header has {}", where, t.size(), header.size());
    }
    auto column = [&](const std::string& name, int nth) {
      int seen = 0;
      for (size_t i = 0; i < header.size(); ++i) {
        if (header[i] == name && seen++ == nth) return i;
      }
      EVSIM_THROW(InputError, "{}: the column header has no {} '{}' column", where,
                  nth == 0 ? "first" : "second", name);
    };
    const int side = options.in_place ? 1 : 0;
    const size_t time = column("time", side);
    // nccl-tests prints algbw and busbw after each time; a header that ends at "time" had
    // t[time + 1] read past the row (issue 33, found by fuzzing).
    if (time + 2 >= header.size()) {
      EVSIM_THROW(InputError,
                  "{}: the column header has no 'algbw' and 'busbw' columns after its {} 'time'",
                  where, side == 0 ? "first" : "second");
    }
    // The error follows busbw: "#wrong" (a count, must be 0) in newer versions, "error" (the
    // largest numerical error, e.g. 1e-07: float round-off is not a failure) in older ones.
    const size_t wrong = time + 3;
    const bool counted = wrong < header.size() && header[wrong] == "#wrong";
    auto failed = [&](const std::string& cell) {
      if (cell == "N/A") return false;
      if (counted) return cell != "0";
      double error = number(cell, where, "error");
      return error > kMaxNumericalError;
    };
    if (wrong < t.size() && failed(t[wrong])) {
      EVSIM_THROW(InputError, "{}: {} wrong values at {} bytes: a failed run is not a measurement",
                  where, t[wrong], t[column("size", 0)]);
    }
    Row row;
    row.bytes = positiveInt(t[column("size", 0)], where, "size");
    row.dtype = elementType(t[column("type", 0)], where);
    row.time_us = positiveNumber(t[time], where, "time");
    number(t[time + 1], where, "algbw");  // checked, but recomputed below: nccl-tests prints
    number(t[time + 2], where, "busbw");  // them to 0.01 GB/s, so small sizes read 0.00
    row.algbw_gb_s = double(row.bytes) / row.time_us / 1e3;
    rows.push_back(row);
  }
  if (rows.empty()) EVSIM_THROW(InputError, "{}: no measurement rows", origin);
  if (!kind) kind = ncclTestsCollective(std::filesystem::path(origin).filename().string());
  if (!kind) {
    EVSIM_THROW(InputError,
                "{}: which collective? The log does not say (no 'Collective test starting:' line) "
                "and neither does the file name: give --collective allreduce|allgather|"
                "reduce_scatter|alltoall|broadcast|sendrecv",
                origin);
  }
  return finish(*kind, rows, count, options, std::move(hosts), std::move(devices), origin);
}

NcclTestsImport loadNcclTests(const std::string& path, const NcclTestsOptions& options) {
  return parseNcclTests(readInputFile(path, "nccl-tests log"), path, options);
}

}  // namespace evsim
