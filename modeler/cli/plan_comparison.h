#pragma once
// `eventsim simulate --strategy A --strategy B ...` (issue 31, item 3): the plans side by side,
// component by component (iteration time and throughput, compute, each kind of exposed
// communication, bubble, memory), with each plan's difference from the first.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace evsim {

struct ComparedPlan {
  std::string label;       // "8M16P8D b=1 dapple sp zero1"
  nlohmann::json summary;  // summaryJson() of its simulation
};

// The table: one row per component, one column per plan, then "X - A" per later plan (absolute
// and in % of A). Plans are lettered A, B, C... and named above the table.
std::string comparisonText(const std::vector<ComparedPlan>& plans);

// {"schema_version", "plans": [{"label", "summary"}...], "components": [{"name", "unit",
// "values": [...], "difference_from_first": [null, ...]}...]}.
nlohmann::json comparisonJson(const std::vector<ComparedPlan>& plans);

}  // namespace evsim
