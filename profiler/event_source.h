#pragma once
// Where eventprof's list of events comes from: an events file (`--events FILE`, written by
// `eventsim events -o FILE`), one strategy's iteration plan, or the union over every strategy for
// N GPUs. The files and configs are read on rank 0 only; the harness broadcasts the signatures.

#include <string>
#include <vector>

#include "config/cluster_config.h"
#include "events/event.h"
#include "config/model_config.h"
#include "plan/strategy.h"
#include "plan/strategy_space.h"

namespace evsim {

// Events of an events file (events/event_file.h's format); InputError naming file and entry.
std::vector<Event> eventsFromFile(const std::string& path);

// The unique events of one iteration of `strategy` (validated: InputError naming the rule broken).
std::vector<Event> eventsForStrategy(const ModelConfig& model, const ClusterConfig& cluster,
                                     const Strategy& strategy);

// The union of the events of every valid strategy in `space` (InputError when none is valid).
std::vector<Event> eventsForGpus(const ModelConfig& model, const ClusterConfig& cluster,
                                 const Strategy& base, const StrategySpace& space);

// Drops repeated signatures, keeping the first occurrence's position.
std::vector<Event> uniqueEvents(const std::vector<Event>& events);

}  // namespace evsim
