#include "io/sustained_gemm_file.h"

#include <yaml-cpp/yaml.h>

#include "common/atomic_file.h"
#include "common/yaml_reader.h"
#include "events/event.h"

namespace evsim {

namespace {

constexpr double kMaxClockMhz = 10000;  // a few GHz at most: more is a unit mistake
constexpr double kMaxUs = 1e12;

SustainedGemmRecord readRecord(const YamlReader& root) {
  root.allowOnly({"sustained_gemm"});
  const YamlReader r = root.child("sustained_gemm");
  r.allowOnly({"backend", "device", "date", "gemm", "seconds", "elapsed_s", "short_us",
               "sustained_us", "chunks", "max_clock_mhz"});
  SustainedGemmRecord out;
  out.backend = r.str("backend");
  out.device = r.str("device");
  out.date = r.str("date");
  out.gemm = r.str("gemm");
  parseEventSignature(out.gemm, r.where("gemm"));  // a malformed signature is named here
  out.seconds = r.positiveDouble("seconds");
  out.elapsed_s = r.positiveDouble("elapsed_s");
  out.short_us = r.positiveDouble("short_us", kMaxUs);
  out.sustained_us = r.positiveDouble("sustained_us", kMaxUs);
  out.chunks = static_cast<int>(r.positiveInt("chunks"));
  out.max_clock_mhz = r.nonNegativeDouble("max_clock_mhz", kMaxClockMhz);
  return out;
}

}  // namespace

std::string sustainedGemmYaml(const SustainedGemmRecord& s) {
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "sustained_gemm" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "backend" << YAML::Value << s.backend;
  out << YAML::Key << "device" << YAML::Value << YAML::DoubleQuoted << s.device;
  out << YAML::Key << "date" << YAML::Value << YAML::DoubleQuoted << s.date;
  out << YAML::Key << "gemm" << YAML::Value << YAML::DoubleQuoted << s.gemm;
  out << YAML::Key << "seconds" << YAML::Value << s.seconds;
  out << YAML::Key << "elapsed_s" << YAML::Value << s.elapsed_s;
  out << YAML::Key << "short_us" << YAML::Value << s.short_us;
  out << YAML::Key << "sustained_us" << YAML::Value << s.sustained_us;
  out << YAML::Key << "chunks" << YAML::Value << s.chunks;
  out << YAML::Key << "max_clock_mhz" << YAML::Value << s.max_clock_mhz;
  out << YAML::EndMap << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

void saveSustainedGemm(const SustainedGemmRecord& record, const std::string& path) {
  AtomicFileWriter writer(path);
  writer.stream() << sustainedGemmYaml(record);
  writer.commit();
}

SustainedGemmRecord loadSustainedGemm(const std::string& path) {
  return readRecord(YamlReader::fromFile(path));
}

SustainedGemmRecord parseSustainedGemm(const std::string& yaml_text, const std::string& origin) {
  return readRecord(YamlReader::fromString(yaml_text, origin));
}

}  // namespace evsim
