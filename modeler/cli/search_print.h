#pragma once
// What `eventsim search` prints of its report: the text table (with the rejected candidates, the
// best plan and the fit advice) and the JSON report, whole or streamed to standard output
// (search_print.cpp). search_command.cpp parses the options, runs the search and picks one.

#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>

#include "modeler/cli/search_args.h"
#include "modeler/fit_advice.h"
#include "modeler/search.h"

namespace evsim {

nlohmann::json reportJson(const SearchArgs& args, const ModelConfig& model,
                          const ClusterConfig& cluster, const SearchReport& report,
                          const std::optional<FitAdvice>& advice, bool with_candidates);
void printJson(const SearchArgs& args, const ModelConfig& model, const ClusterConfig& cluster,
               const SearchReport& report, const std::optional<FitAdvice>& advice,
               std::ostream& out);
void printText(const SearchArgs& args, const ModelConfig& model, const ClusterConfig& cluster,
               const SearchReport& report, const std::optional<FitAdvice>& advice);

}  // namespace evsim
