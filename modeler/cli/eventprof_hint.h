#pragma once
// The eventprof command a hint prints ("measure them with: ..."), exact enough to paste: the
// eventprof binary beside this eventsim (installed: P/bin/eventprof; build tree:
// build/profiler/eventprof), and on a machine without an NVIDIA GPU the CPU backend's flags
// (`mpirun --oversubscribe`, `--backend cpu --ranks-per-node 2`: 4 ranks as 2 nodes x 2, as
// scripts/demo.sh runs it).

#include <filesystem>
#include <string>

namespace evsim {

// "mpirun [--oversubscribe] -np 4 <eventprof> <arguments> [--backend cpu --ranks-per-node 2]".
std::string eventprofCommand(const std::string& arguments);

// The same, for a stated machine (tests): `eventprof` the binary's path, `has_gpu` whether the
// CUDA backend can run here.
std::string eventprofCommand(const std::string& arguments, const std::string& eventprof,
                             bool has_gpu);

// The eventprof binary found beside `eventsim_dir` (installed or build tree), else "eventprof".
std::string eventprofPath(const std::filesystem::path& eventsim_dir);

}  // namespace evsim
