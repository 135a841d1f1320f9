#include "modeler/cli/plan_comparison.h"

#include <fmt/format.h>

#include <cmath>
#include <functional>

#include "common/units.h"
#include "modeler/json_schema.h"

namespace evsim {

namespace {

// One compared quantity, read from a plan's summary JSON.
struct Component {
  std::string name;
  std::string unit;
  std::function<double(const nlohmann::json&)> value;
};

double at(const nlohmann::json& j, const char* key) { return j.at(key).get<double>(); }

double gib(const nlohmann::json& j, const char* key) { return at(j, key) / kBytesPerGiB; }

std::vector<Component> components() {
  std::vector<Component> out = {
      {"iteration time", "ms", [](const nlohmann::json& s) { return at(s, "iteration_time_ms"); }},
      {"throughput", "tokens/s",
       [](const nlohmann::json& s) { return at(s, "throughput_tokens_per_s"); }},
      {"model FLOP/s per GPU", "TFLOP/s",
       [](const nlohmann::json& s) { return at(s, "model_tflops_per_gpu"); }},
      {"MFU", "%", [](const nlohmann::json& s) { return 100 * at(s, "mfu"); }},
      {"compute (mean device)", "ms",
       [](const nlohmann::json& s) { return at(s["devices"]["mean"], "compute_ms"); }},
  };
  // Exposed communication by kind: what the compute stream waits for, per mean device.
  for (const char* kind : {"tp", "cp", "ep", "pp", "dp", "zero"}) {
    out.push_back({fmt::format("exposed {} comm", kind), "ms",
                   [kind](const nlohmann::json& s) { return at(s["exposed_comm_ms"], kind); }});
  }
  out.push_back(
      {"bubble", "%", [](const nlohmann::json& s) { return 100 * at(s, "bubble_fraction"); }});
  out.push_back(
      {"peak memory", "GiB", [](const nlohmann::json& s) { return gib(s, "peak_memory_bytes"); }});
  out.push_back({"memory margin", "GiB",
                 [](const nlohmann::json& s) { return gib(s, "memory_margin_bytes"); }});
  return out;
}

char letter(size_t i) { return static_cast<char>('A' + i); }

}  // namespace

std::string comparisonText(const std::vector<ComparedPlan>& plans) {
  std::string out;
  for (size_t i = 0; i < plans.size(); ++i) {
    out += fmt::format("{}: {}\n", letter(i), plans[i].label);
  }
  out += fmt::format("\n{:<28}", "");
  for (size_t i = 0; i < plans.size(); ++i) out += fmt::format(" {:>14}", letter(i));
  for (size_t i = 1; i < plans.size(); ++i) {
    out += fmt::format(" {:>24}", fmt::format("{} - A", letter(i)));
  }
  out += '\n';
  for (const Component& c : components()) {
    std::vector<double> values;
    for (const ComparedPlan& p : plans) values.push_back(c.value(p.summary));
    out += fmt::format("{:<28}", fmt::format("{} ({})", c.name, c.unit));
    for (double v : values) out += fmt::format(" {:>14.3f}", v);
    for (size_t i = 1; i < values.size(); ++i) {
      const double d = values[i] - values[0];
      // A share of A where A is not ~0 (an exposed kind one plan does not have is "-").
      const std::string share = std::abs(values[0]) > 1e-9
                                    ? fmt::format(" ({:+.1f}%)", 100 * d / values[0])
                                    : std::string();
      out += fmt::format(" {:>24}", fmt::format("{:+.3f}{}", d, share));
    }
    out += '\n';
  }
  return out;
}

nlohmann::json comparisonJson(const std::vector<ComparedPlan>& plans) {
  nlohmann::json listed = nlohmann::json::array();
  for (const ComparedPlan& p : plans)
    listed.push_back({{"label", p.label}, {"summary", p.summary}});
  nlohmann::json rows = nlohmann::json::array();
  for (const Component& c : components()) {
    nlohmann::json values = nlohmann::json::array();
    nlohmann::json differences = nlohmann::json::array();
    const double first = c.value(plans.front().summary);
    for (size_t i = 0; i < plans.size(); ++i) {
      const double v = c.value(plans[i].summary);
      values.push_back(v);
      differences.push_back(i == 0 ? nlohmann::json() : nlohmann::json(v - first));
    }
    rows.push_back({{"name", c.name},
                    {"unit", c.unit},
                    {"values", values},
                    {"difference_from_first", differences}});
  }
  return {{"schema_version", kJsonSchemaVersion}, {"plans", listed}, {"components", rows}};
}

}  // namespace evsim
