#include "common/data_dir.h"

#include <cstdlib>
#include <mutex>

#ifndef EVSIM_SOURCE_CONFIG_DIR
#define EVSIM_SOURCE_CONFIG_DIR "configs"
#endif

namespace evsim {
namespace fs = std::filesystem;

namespace {

std::mutex& overrideMutex() {
  static std::mutex m;
  return m;
}

fs::path& overrideDir() {
  static fs::path dir;
  return dir;
}

bool isDir(const fs::path& p) {
  std::error_code ec;
  return !p.empty() && fs::is_directory(p, ec);
}

}  // namespace

void setBundledConfigDir(const fs::path& dir) {
  std::lock_guard<std::mutex> lock(overrideMutex());
  overrideDir() = dir;
}

fs::path executableDir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

fs::path bundledConfigDir() {
  if (const char* env = std::getenv("EVSIM_CONFIG_DIR"); env != nullptr && isDir(env)) {
    return fs::path(env);
  }
  {
    std::lock_guard<std::mutex> lock(overrideMutex());
    if (isDir(overrideDir())) return overrideDir();
  }
  // An installed binary: P/bin/eventsim next to P/share/eventsim/configs.
  if (const fs::path exe_dir = executableDir(); !exe_dir.empty()) {
    const fs::path installed = exe_dir / ".." / "share" / "eventsim" / "configs";
    if (isDir(installed)) return installed.lexically_normal();
  }
  return fs::path(EVSIM_SOURCE_CONFIG_DIR);
}

}  // namespace evsim
