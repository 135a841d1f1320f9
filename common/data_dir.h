#pragma once
// Where the bundled configs (configs/models, clusters, devices) are, for a binary run from the
// build tree, from an install prefix (`cmake --install`: P/bin/eventsim reads
// P/share/eventsim/configs) or inside the Python package (pip install: the module sets it).

#include <filesystem>
#include <string>

namespace evsim {

// The bundled configs folder, first that exists of: $EVSIM_CONFIG_DIR; the folder set by
// setBundledConfigDir; <this executable's folder>/../share/eventsim/configs (an install); the
// source tree's configs/ the build was configured from. Falls back to the last when none exists.
std::filesystem::path bundledConfigDir();

// For the Python module, which is not an executable: the folder it found beside itself.
void setBundledConfigDir(const std::filesystem::path& dir);

// The folder of the running executable (/proc/self/exe), empty when it cannot be read.
std::filesystem::path executableDir();

}  // namespace evsim
