#include "plan/schedules/schedule_file.h"

#include <algorithm>
#include <fstream>
#include <memory>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>

#include "common/error.h"
#include "common/strings.h"

// EVSIM_CHECK for the user's file: an InputError (exit 2), not an internal Error.
#define SCHEDULE_FILE_CHECK(cond, ...)                 \
  do {                                                 \
    if (!(cond)) EVSIM_THROW(InputError, __VA_ARGS__); \
  } while (0)

namespace evsim {

namespace {

struct Action {
  int stage = 0;
  char type = 'F';
  int micro_batch = 0;
  std::string text;
  bool overlapped = false;  // a fused cell's action after its first (StageTask::overlapped)
};

constexpr std::string_view kOverlapSuffix = "OVERLAP_F_B";

std::string actionText(int stage, char type, int micro_batch) {
  return std::to_string(stage) + type + std::to_string(micro_batch);
}

// Which chunk of rank r virtual stage k is under a looped or a V layout, or -1.
PipelineLayout inferLayout(const std::vector<std::set<int>>& stages, const std::string& path) {
  const int P = static_cast<int>(stages.size());
  const int v = static_cast<int>(stages[0].size());
  auto matches = [&](LayoutKind kind) {
    if (kind == LayoutKind::kV && v != 2) return false;
    const PipelineLayout layout(kind, P, v);
    for (int r = 0; r < P; ++r) {
      std::set<int> expected;
      for (int c = 0; c < v; ++c) expected.insert(layout.virtualStage(r, c));
      if (expected != stages[r]) return false;
    }
    return true;
  };
  if (matches(LayoutKind::kLooped)) return PipelineLayout(LayoutKind::kLooped, P, v);
  if (matches(LayoutKind::kV)) return PipelineLayout(LayoutKind::kV, P, v);
  std::string ranks;
  for (int r = 0; r < P; ++r) {
    ranks += fmt::format("{}rank {}: {{", r ? "; " : "", r);
    bool first = true;
    for (int k : stages[r]) ranks += fmt::format("{}{}", first ? "" : ",", k), first = false;
    ranks += "}";
  }
  EVSIM_THROW(InputError,
              "{}: the ranks' stages ({}) are neither looped (rank r runs r, r+P, ...) nor V (r "
              "and 2P-1-r)",
              path, ranks);
}

// The last `count` actions of `row` are one fused cell: one forward and one backward (I or B)
// of another micro-batch, and at most the W of that backward (what the task graph can fuse).
void checkFusedCell(const std::vector<Action>& row, size_t count, const std::string& path,
                    size_t rank) {
  const Action* forward = nullptr;
  const Action* backward = nullptr;
  const Action* weight = nullptr;
  for (size_t i = row.size() - count; i < row.size(); ++i) {
    const Action& a = row[i];
    const Action*& slot = a.type == 'F' ? forward : a.type == 'W' ? weight : backward;
    SCHEDULE_FILE_CHECK(slot == nullptr, "{}: rank {} action '{}': a fused task with two {}", path,
                        rank, a.text, a.type);
    slot = &a;
  }
  SCHEDULE_FILE_CHECK(
      forward && backward && forward->micro_batch != backward->micro_batch &&
          (!weight ||
           (weight->stage == backward->stage && weight->micro_batch == backward->micro_batch)),
      "{}: rank {} action '{}': a fused task is one F and the backward (I or B, and its W) of "
      "another micro-batch",
      path, rank, row.back().text);
}

}  // namespace

ScheduleFile parseScheduleCsv(const std::string& text, const std::string& path) {
  static const std::regex kAction(R"(^(\d{1,6})([FBIW])(\d{1,9})$)");
  std::vector<std::vector<Action>> rows;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::vector<Action>& row = rows.emplace_back();
    if (trim(line).empty()) continue;
    for (const std::string& raw : split(line, ',')) {
      const std::string cell = std::string(trim(raw));
      if (cell.empty()) continue;  // an idle slot
      // A fused task (PyTorch's OVERLAP_F_B action): "(F;B[;W])OVERLAP_F_B", its actions run
      // overlapped as one task (task_graph.h).
      std::vector<std::string> parts = {cell};
      const bool fused = cell.size() > kOverlapSuffix.size() + 2 && cell.front() == '(' &&
                         cell.ends_with(std::string(")") + std::string(kOverlapSuffix));
      if (fused) parts = split(cell.substr(1, cell.size() - kOverlapSuffix.size() - 2), ';');
      for (size_t i = 0; i < parts.size(); ++i) {
        const std::string part = std::string(trim(parts[i]));
        std::smatch m;
        SCHEDULE_FILE_CHECK(std::regex_match(part, m, kAction),
                            "{}: rank {} action '{}': not {{stage}}{{F|B|I|W}}{{micro-batch}} or "
                            "({{action}};{{action}}...)OVERLAP_F_B",
                            path, rows.size() - 1, cell);
        row.push_back({std::stoi(m[1]), m[2].str()[0], std::stoi(m[3]), cell, i > 0});
      }
      if (fused) checkFusedCell(row, parts.size(), path, rows.size() - 1);
    }
  }
  while (!rows.empty() && rows.back().empty()) rows.pop_back();
  SCHEDULE_FILE_CHECK(!rows.empty(), "{}: no actions", path);
  const int P = static_cast<int>(rows.size());
  size_t actions = 0;
  for (const auto& row : rows) actions += row.size();
  // Stages per rank, the backward's kind and the micro-batch count.
  std::vector<std::set<int>> stages(P);
  bool full = false, split = false;
  int m = 0;
  for (int r = 0; r < P; ++r) {
    SCHEDULE_FILE_CHECK(!rows[r].empty(), "{}: rank {} has no actions", path, r);
    for (const Action& a : rows[r]) {
      stages[r].insert(a.stage);
      full |= a.type == 'B';
      split |= a.type == 'I' || a.type == 'W';
      m = std::max(m, a.micro_batch + 1);
      SCHEDULE_FILE_CHECK(!(full && split),
                          "{}: rank {} action '{}': B (whole backward) mixed with "
                          "I/W (split backward) in one schedule",
                          path, r, a.text);
    }
  }
  for (int r = 1; r < P; ++r) {
    SCHEDULE_FILE_CHECK(stages[r].size() == stages[0].size(),
                        "{}: rank {} runs {} stages, rank 0 runs {}", path, r, stages[r].size(),
                        stages[0].size());
  }
  ScheduleFile out;
  out.path = path;
  out.layout = inferLayout(stages, path);
  SCHEDULE_FILE_CHECK(out.layout.chunks() <= kMaxChunksPerDevice,
                      "{}: each rank runs {} stages, at most {} model chunks per device", path,
                      out.layout.chunks(), kMaxChunksPerDevice);
  out.micro_batches = m;
  out.split_backward = split;
  const PipelineLayout& layout = out.layout;
  // Each micro-batch has at least one action per stage: bounds the tables below.
  SCHEDULE_FILE_CHECK(static_cast<size_t>(m) * layout.stages() <= actions,
                      "{}: micro-batch {} named, but {} actions cannot cover {} stages for {} "
                      "micro-batches",
                      path, m - 1, actions, layout.stages(), m);
  const int K = layout.stages();
  // Every task once, then a joint walk of the ranks: an action runs once its inputs have run.
  enum : int { kF, kB, kW };
  auto index = [&](int phase, int k, int i) {
    return (static_cast<size_t>(phase) * K + k) * m + i;
  };
  std::vector<char> seen(3 * static_cast<size_t>(K) * m, 0), done(seen.size(), 0);
  auto phaseOf = [](char type) { return type == 'F' ? kF : type == 'W' ? kW : kB; };
  out.orders.resize(P);
  for (int r = 0; r < P; ++r) {
    for (const Action& a : rows[r]) {
      char& s = seen[index(phaseOf(a.type), a.stage, a.micro_batch)];
      SCHEDULE_FILE_CHECK(!s, "{}: rank {} action '{}': runs twice", path, r, a.text);
      s = 1;
      const Phase phase = a.type == 'F'   ? Phase::kForward
                          : a.type == 'W' ? Phase::kWeightGrad
                                          : Phase::kBackward;
      out.orders[r].push_back({phase, a.micro_batch, layout.chunk(a.stage), a.overlapped});
      out.fused = out.fused || a.overlapped;
    }
  }
  const int phases = split ? 3 : 2;
  for (int p = 0; p < phases; ++p) {
    for (int k = 0; k < K; ++k) {
      for (int i = 0; i < m; ++i) {
        const char type = p == kF ? 'F' : p == kW ? 'W' : split ? 'I' : 'B';
        SCHEDULE_FILE_CHECK(seen[index(p, k, i)], "{}: rank {} never runs '{}'", path,
                            layout.device(k), actionText(k, type, i));
      }
    }
  }
  auto inputs = [&](const Action& a) {
    std::vector<size_t> in;
    const int k = a.stage, i = a.micro_batch;
    switch (phaseOf(a.type)) {
      case kF:
        if (k > 0) in.push_back(index(kF, k - 1, i));
        break;
      case kB:
        if (k + 1 < K) in.push_back(index(kB, k + 1, i));
        in.push_back(index(kF, k, i));
        break;
      default:
        in.push_back(index(kB, k, i));
        break;
    }
    return in;
  };
  std::vector<size_t> next(P, 0);
  size_t left = actions;
  while (left > 0) {
    bool progressed = false;
    for (int r = 0; r < P; ++r) {
      while (next[r] < rows[r].size()) {
        const Action& a = rows[r][next[r]];
        bool ready = true;
        for (size_t in : inputs(a)) ready = ready && done[in];
        if (!ready) break;
        done[index(phaseOf(a.type), a.stage, a.micro_batch)] = 1;
        ++next[r], --left, progressed = true;
      }
    }
    if (progressed) continue;
    // Stuck: name the first rank's waiting action, and whether its input comes later on its own
    // rank (out of dependency order) or never (a deadlock between ranks).
    for (int r = 0; r < P; ++r) {
      if (next[r] >= rows[r].size()) continue;
      const Action& a = rows[r][next[r]];
      std::vector<size_t> waiting = inputs(a);
      // An input of this rank's own comes first: the order is wrong on this rank.
      std::stable_partition(waiting.begin(), waiting.end(), [&](size_t in) {
        return layout.device(static_cast<int>(in / m % K)) == r;
      });
      for (size_t in : waiting) {
        if (done[in]) continue;
        const int phase = static_cast<int>(in / (static_cast<size_t>(K) * m));
        const int k = static_cast<int>(in / m % K), i = static_cast<int>(in % m);
        const std::string what = actionText(k,
                                            phase == kF   ? 'F'
                                            : phase == kW ? 'W'
                                                          : (split ? 'I' : 'B'),
                                            i);
        EVSIM_THROW(InputError, "{}: rank {} action '{}' (#{}) waits for '{}', which {}", path, r,
                    a.text, next[r], what,
                    layout.device(k) == r ? "this rank runs later (out of dependency order)"
                                          : "never runs first (deadlock between ranks)");
      }
    }
  }
  return out;
}

ScheduleFile loadScheduleCsv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SCHEDULE_FILE_CHECK(in.good(), "--schedule {}: cannot open the file", path);
  std::ostringstream text;
  text << in.rdbuf();
  return parseScheduleCsv(text.str(), path);
}

std::string scheduleCsv(const DeviceOrders& orders, const PipelineLayout& layout,
                        bool split_backward) {
  std::string out;
  for (size_t r = 0; r < orders.size(); ++r) {
    const std::vector<StageTask>& order = orders[r];
    for (size_t i = 0; i < order.size();) {
      size_t end = i + 1;  // a fused task: its head and the overlapped tasks after it
      while (end < order.size() && order[end].overlapped) ++end;
      if (i > 0) out += ',';
      if (end - i > 1) out += '(';
      for (size_t j = i; j < end; ++j) {
        const StageTask& t = order[j];
        const char type = t.phase == Phase::kForward      ? 'F'
                          : t.phase == Phase::kWeightGrad ? 'W'
                          : split_backward                ? 'I'
                                                          : 'B';
        if (j > i) out += ';';
        out += actionText(layout.virtualStage(static_cast<int>(r), t.chunk), type, t.micro_batch);
      }
      if (end - i > 1) out += ')' + std::string(kOverlapSuffix);
      i = end;
    }
    out += '\n';
  }
  return out;
}

namespace {

class FileSchedule final : public PipelineSchedule {
 public:
  bool splitsBackward() const override { return file().split_backward; }
  bool fusesTasks() const override { return file().fused; }
  bool allowsChunks() const override { return true; }
  LayoutKind layout() const override { return file().layout.kind(); }
  int fixedChunks() const override { return file().layout.chunks(); }

  std::vector<StageTask> deviceOrder(int device, const PipelineShape& shape) const override {
    return orders(shape).at(static_cast<size_t>(device));
  }
  std::vector<std::vector<StageTask>> orders(const PipelineShape& shape) const override {
    const ScheduleFile& f = file();
    SCHEDULE_FILE_CHECK(
        shape.stages == f.layout.devices() && shape.chunks == f.layout.chunks() &&
            shape.micro_batches == f.micro_batches,
        "--schedule {}: written for P={} v={} m={}, the strategy has P={} v={} m={}", f.path,
        f.layout.devices(), f.layout.chunks(), f.micro_batches, shape.stages, shape.chunks,
        shape.micro_batches);
    return f.orders;
  }

  std::shared_ptr<const ScheduleFile> current() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return file_;
  }
  void install(ScheduleFile file) {
    std::lock_guard<std::mutex> lock(mutex_);
    file_ = std::make_shared<const ScheduleFile>(std::move(file));
  }

 private:
  const ScheduleFile& file() const {
    std::lock_guard<std::mutex> lock(mutex_);
    SCHEDULE_FILE_CHECK(file_ != nullptr, "--schedule file: no schedule file loaded");
    return *file_;
  }
  mutable std::mutex mutex_;
  std::shared_ptr<const ScheduleFile> file_;
};

FileSchedule& theFileSchedule() {
  static FileSchedule schedule;
  return schedule;
}

}  // namespace

void installScheduleFile(ScheduleFile file) { theFileSchedule().install(std::move(file)); }

std::shared_ptr<const ScheduleFile> installedScheduleFile() { return theFileSchedule().current(); }

const PipelineSchedule& fileSchedule() { return theFileSchedule(); }

}  // namespace evsim
