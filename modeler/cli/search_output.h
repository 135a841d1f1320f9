#pragma once
// What `eventsim search` writes about its candidates besides the text table: each candidate and
// the counts as JSON (docs/JSON.md), the fit advice, and the CSV (one row per candidate).

#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>

#include "modeler/fit_advice.h"
#include "modeler/search.h"

namespace evsim {

// Percent of op time measured / derived / estimated: "12/3/85".
std::string provenanceText(const CandidateResult& r);

nlohmann::json candidateJson(const CandidateResult& r, const SearchReport& report);
nlohmann::json countsJson(const SearchReport& report);
nlohmann::json adviceJson(const std::optional<FitAdvice>& advice);  // null without advice

// Header, then one row per candidate in the report's order.
void writeCsv(const SearchReport& report, std::ostream& out);

}  // namespace evsim
