#include "modeler/stragglers.h"

#include <algorithm>

#include "common/error.h"
#include "common/strings.h"

namespace evsim {

RankSlowdowns parseSlowRanks(std::string_view text, int64_t gpus, int gpus_per_node,
                             std::string_view flag) {
  RankSlowdowns out;
  const int64_t nodes = (gpus + gpus_per_node - 1) / gpus_per_node;
  for (const std::string& raw : split(text, ',')) {
    const std::string entry = trim(raw);
    const size_t colon = entry.find(':');
    if (colon == std::string::npos) {
      EVSIM_THROW(InputError, "{} '{}': expected RANK:FACTOR or nodeN:FACTOR", flag,
                  clipped(entry));
    }
    const std::string who = toLower(trim(entry.substr(0, colon)));
    const std::optional<double> factor = parseNumber(trim(entry.substr(colon + 1)));
    if (!factor || !(*factor > 0) || *factor > 1e6) {
      EVSIM_THROW(InputError, "{} '{}': the factor must be a number > 0", flag, clipped(entry));
    }
    int64_t first = 0, count = 1;
    if (who.rfind("node", 0) == 0) {
      const std::optional<int64_t> node = parseInteger(who.substr(4));
      if (!node || *node < 0 || *node >= nodes) {
        EVSIM_THROW(InputError, "{} '{}': unknown node (the {} ranks sit on nodes 0-{})", flag,
                    clipped(entry), gpus, nodes - 1);
      }
      first = *node * gpus_per_node;
      count = std::min<int64_t>(gpus_per_node, gpus - first);
    } else {
      const std::optional<int64_t> rank = parseInteger(who);
      if (!rank || *rank < 0 || *rank >= gpus) {
        EVSIM_THROW(InputError, "{} '{}': unknown rank (the strategy has ranks 0-{})", flag,
                    clipped(entry), gpus - 1);
      }
      first = *rank;
    }
    for (int64_t r = first; r < first + count; ++r) out[r] = std::max(out[r], *factor);
  }
  return out;
}

std::vector<std::vector<double>> splitSlowReplicas(IterationPlan& plan, const RankSlowdowns& slow) {
  const RankLayout layout = plan.layout();
  const int P = plan.deviceStages();
  // Per DP replica, each stage's factor: the slowest of its TP (x CP) ranks, which run in lockstep.
  auto replicaFactors = [&](int dp) {
    std::vector<double> f(P, 1.0);
    for (int pp = 0; pp < P; ++pp) {
      for (int cp = 0; cp < plan.strategy.cp; ++cp) {
        for (int tp = 0; tp < plan.strategy.tp; ++tp) {
          auto it = slow.find(layout.rank(tp, dp, pp, cp));
          if (it != slow.end()) f[pp] = std::max(f[pp], it->second);
        }
      }
    }
    return f;
  };
  std::vector<PipelineClass> classes;
  std::vector<std::vector<double>> factors;
  for (const PipelineClass& c : plan.pipelines) {
    std::vector<std::vector<double>> seen;
    std::vector<PipelineClass> parts;
    for (int dp : c.replicas) {
      const std::vector<double> f = replicaFactors(dp);
      auto it = std::find(seen.begin(), seen.end(), f);
      if (it == seen.end()) {
        seen.push_back(f);
        PipelineClass part = c;
        part.replicas.clear();
        parts.push_back(std::move(part));
        it = seen.end() - 1;
      }
      parts[it - seen.begin()].replicas.push_back(dp);
    }
    for (size_t i = 0; i < parts.size(); ++i) {
      classes.push_back(std::move(parts[i]));
      factors.push_back(std::move(seen[i]));
    }
  }
  plan.pipelines = std::move(classes);
  return factors;
}

}  // namespace evsim
