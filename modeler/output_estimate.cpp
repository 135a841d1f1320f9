#include "modeler/output_estimate.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>
#include <utility>

#include "common/error.h"
#include "common/strings.h"

namespace evsim {

namespace {

constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

// Device events of each (pipeline class, stage): every rank of one has the same timeline.
using ClassKey = std::pair<int, int>;

int64_t countEvents(const TimelineSource& source, int64_t rank) {
  int64_t n = 0;
  source.for_each_event(rank, [&](const DeviceEvent&) { ++n; });
  return n;
}

double sampleBytesPerRow(const TimelineSource& source, int64_t rank, bool trace) {
  std::ostringstream out;
  if (trace) {
    writeChromeTrace(source, {rank}, out);
  } else {
    writeTimelineCsv(source, {rank}, out);
  }
  const int64_t rows = countEvents(source, rank);
  return rows > 0 ? static_cast<double>(out.str().size()) / static_cast<double>(rows) : 0;
}

// The directory `path` will be written in ("." for a bare name).
std::filesystem::path directoryOf(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? std::filesystem::path(".") : parent;
}

void checkOne(const std::string& flag, const std::string& path, double bytes, int64_t rows,
              int64_t rank_count, double max_gib) {
  if (path.empty()) return;
  const std::string what = fmt::format("{} {}: about {} ({} rows of {} ranks)", flag, path,
                                       formatBytes(bytes), rows, rank_count);
  if (bytes > max_gib * kBytesPerGiB) {
    // How many ranks (of the average size) fit: the --ranks to suggest.
    const double per_rank = bytes / static_cast<double>(std::max<int64_t>(rank_count, 1));
    const auto fit = static_cast<int64_t>(max_gib * kBytesPerGiB / per_rank);
    const std::string fix =
        fit >= 1 ? fmt::format("write fewer ranks with --ranks (e.g. --ranks 0-{})", fit - 1)
                 : fmt::format("one rank alone is about {}: raise --max-output-gib",
                               formatBytes(per_rank));
    EVSIM_THROW(InputError, "{}, over the {:g} GiB limit of one output (--max-output-gib): {}",
                what, max_gib, fix);
  }
  std::error_code ec;
  const std::filesystem::space_info space = std::filesystem::space(directoryOf(path), ec);
  if (!ec && bytes > static_cast<double>(space.available)) {
    EVSIM_THROW(EnvironmentError, "{}, more than the {} free there: write fewer ranks (--ranks)",
                what, formatBytes(static_cast<double>(space.available)));
  }
}

}  // namespace

OutputEstimate estimateTimelineOutput(const Simulation& sim, const TimelineSource& source,
                                      const std::vector<int64_t>& ranks) {
  OutputEstimate e;
  if (ranks.empty()) return e;
  const RankLayout layout = sim.plan.layout();
  std::map<ClassKey, int64_t> rows_of;
  for (int64_t rank : ranks) {
    const RankCoord c = layout.coord(rank);
    const ClassKey key{sim.plan.pipelineOf(c.dp), c.pp};
    auto it = rows_of.find(key);
    if (it == rows_of.end()) it = rows_of.emplace(key, countEvents(source, rank)).first;
    e.rows += it->second;
  }
  const double rows = static_cast<double>(e.rows);
  e.csv_bytes = rows * sampleBytesPerRow(source, ranks.front(), /*trace=*/false);
  e.trace_bytes = rows * sampleBytesPerRow(source, ranks.front(), /*trace=*/true);
  return e;
}

void checkTimelineOutput(const OutputEstimate& estimate, const std::string& trace_path,
                         const std::string& csv_path, int64_t rank_count, double max_gib) {
  checkOne("--csv", csv_path, estimate.csv_bytes, estimate.rows, rank_count, max_gib);
  // A .gz trace is smaller on disk, but formatting it takes as long: bounded uncompressed.
  checkOne("--trace", trace_path, estimate.trace_bytes, estimate.rows, rank_count, max_gib);
}

int64_t opsPerIteration(const Simulation& sim) {
  const TimelineSource source = simulationTimeline(sim);
  const RankLayout layout = sim.plan.layout();
  std::map<int, int> replica_of;  // pipeline class -> a DP index of it
  for (int dp = 0; dp < sim.plan.strategy.dp; ++dp) replica_of.emplace(sim.plan.pipelineOf(dp), dp);
  int64_t ops = 0;
  for (const auto& [pipeline, dp] : replica_of) {
    for (int pp = 0; pp < sim.plan.strategy.pp; ++pp) {
      ops += countEvents(source, layout.rank(0, dp, pp));
    }
  }
  return ops;
}

std::string checkSamplingWork(const Simulation& sim, int iterations) {
  const double samples = static_cast<double>(opsPerIteration(sim)) * iterations;
  const double minutes = samples / kNominalOpSamplesPerS / 60;
  const std::string what =
      fmt::format("--iterations {}: about {:.3g} op samples ({:.3g} per iteration), ~{:.0f} min",
                  iterations, samples, samples / iterations, minutes);
  if (samples > kMaxOpSamples) {
    EVSIM_THROW(InputError,
                "{}, over the limit of {:.3g} (~{:.0f} min): use fewer --iterations (at "
                "most {})",
                what, kMaxOpSamples, kMaxOpSamples / kNominalOpSamplesPerS / 60,
                static_cast<int64_t>(kMaxOpSamples / (samples / iterations)));
  }
  return minutes >= 1 ? what + " (--iterations bounds it)" : "";
}

}  // namespace evsim
