#include "kernels/cpu/cpu_host.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <thread>

// Declared weak: present when the BLAS linked is OpenBLAS, null otherwise (reference BLAS, BLIS).
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace evsim {

namespace {

// "32768K" / "1M" / "512" (sysfs cache sizes) in bytes; 0 when it does not parse.
int64_t parseCacheSize(const std::string& text) {
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    return 0;
  }
  const char unit = used < text.size() ? text[used] : ' ';
  if (unit == 'K') return value << 10;
  if (unit == 'M') return value << 20;
  if (unit == 'G') return value << 30;
  return value;
}

// See lastLevelCacheBytes().
int64_t readLastLevelCacheBytes() {
  // sysfs lists cpu0's caches as index0, index1, ...; the highest level is the last-level cache.
  // (sysconf's _SC_LEVEL3_CACHE_SIZE is not used: virtual machines report nonsense there.)
  constexpr int64_t kDefaultBytes = int64_t{32} << 20;
  int best_level = 0;
  int64_t best_bytes = 0;
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    std::ifstream level_file(dir + "/level"), size_file(dir + "/size");
    int level = 0;
    std::string size;
    if (!(level_file >> level) || !(size_file >> size)) continue;
    const int64_t bytes = parseCacheSize(size);
    if (bytes > 0 && level > best_level) {
      best_level = level;
      best_bytes = bytes;
    }
  }
  return best_bytes > 0 ? best_bytes : kDefaultBytes;
}

}  // namespace

int hostCores() {
  // The CPUs this process may run on (a container or `taskset` may allow fewer than the machine
  // has); hardware_concurrency when the affinity mask cannot be read.
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) return std::max(1, CPU_COUNT(&allowed));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

int cpuThreadsPerRank(int ranks_on_host, int host_cores) {
  return std::max(1, std::min(hostCores(), host_cores / std::max(1, ranks_on_host)));
}

void setCpuKernelThreads(int threads) {
  if (openblas_set_num_threads != nullptr) openblas_set_num_threads(std::max(1, threads));
}

int64_t lastLevelCacheBytes() {
  // Read once: eventprof asks for every compute event it times.
  static const int64_t bytes = readLastLevelCacheBytes();
  return bytes;
}

}  // namespace evsim
