#include "modeler/cli/eventprof_hint.h"

#include <fmt/format.h>

#include "common/data_dir.h"

namespace evsim {
namespace fs = std::filesystem;

std::string eventprofPath(const fs::path& eventsim_dir) {
  if (eventsim_dir.empty()) return "eventprof";
  std::error_code ec;
  for (const fs::path& candidate :
       {eventsim_dir / "eventprof", eventsim_dir / "profiler" / "eventprof"}) {
    if (fs::is_regular_file(candidate, ec)) return candidate.lexically_normal().string();
  }
  return "eventprof";
}

std::string eventprofCommand(const std::string& arguments, const std::string& eventprof,
                             bool has_gpu) {
  if (has_gpu) return fmt::format("mpirun -np 4 {} {}", eventprof, arguments);
  return fmt::format("mpirun --oversubscribe -np 4 {} {} --backend cpu --ranks-per-node 2",
                     eventprof, arguments);
}

std::string eventprofCommand(const std::string& arguments) {
  // The driver's device node: present where the CUDA backend can time kernels.
  std::error_code ec;
  const bool has_gpu = fs::exists("/dev/nvidiactl", ec);
  return eventprofCommand(arguments, eventprofPath(executableDir()), has_gpu);
}

}  // namespace evsim
