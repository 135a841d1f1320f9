#include "common/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "common/error.h"

namespace evsim {

namespace fs = std::filesystem;

namespace {

// Where the bytes go: a symlink is followed to its target (the link stays a link), and anything
// that is not a regular file is written in place (a FIFO, /dev/null, a terminal), never renamed
// over. A directory is an input error.
struct OutputTarget {
  std::string path;
  bool direct = false;
};

OutputTarget resolveTarget(const std::string& path) {
  std::error_code ec;
  fs::path target = path;
  if (fs::is_symlink(fs::symlink_status(target, ec))) {
    target = fs::weakly_canonical(target, ec);
    if (ec) EVSIM_THROW(InputError, "{}: cannot follow the symbolic link ({})", path, ec.message());
  }
  const fs::file_status status = fs::status(target, ec);
  if (status.type() == fs::file_type::directory) {
    EVSIM_THROW(InputError, "{}: is a directory, not an output file", path);
  }
  const bool exists =
      status.type() != fs::file_type::not_found && status.type() != fs::file_type::none;
  return {target.string(), exists && status.type() != fs::file_type::regular};
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::string path, Durability durability)
    : path_(std::move(path)), durability_(durability) {
  OutputTarget target = resolveTarget(path_);
  direct_ = target.direct;
  temp_path_ = direct_ ? target.path : target.path + ".tmp." + std::to_string(::getpid());
  final_path_ = target.path;
  out_.open(temp_path_, std::ios::out | std::ios::trunc | std::ios::binary);
  if (!out_) EVSIM_THROW(EnvironmentError, "{}: cannot create output file", path_);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (!committed_) {
    out_.close();
    if (!direct_) std::remove(temp_path_.c_str());
  }
}

void AtomicFileWriter::finish() {
  if (finished_) return;
  out_.flush();
  if (!out_) EVSIM_THROW(EnvironmentError, "{}: write failed (disk full?)", path_);
  out_.close();
  if (!out_) EVSIM_THROW(EnvironmentError, "{}: write failed on close (disk full?)", path_);
  if (durability_ == Durability::kDurable && !direct_) {
    // The data reaches the disk before the rename makes it the file.
    const int fd = ::open(temp_path_.c_str(), O_RDONLY);
    const bool synced = fd >= 0 && ::fsync(fd) == 0;
    const int saved_errno = errno;
    if (fd >= 0) ::close(fd);
    if (!synced) {
      EVSIM_THROW(EnvironmentError, "{}: writing failed ({})", path_, std::strerror(saved_errno));
    }
  }
  finished_ = true;
}

void AtomicFileWriter::publish() {
  EVSIM_CHECK(finished_, "{}: publish() before finish()", path_);
  if (!direct_ && std::rename(temp_path_.c_str(), final_path_.c_str()) != 0) {
    EVSIM_THROW(EnvironmentError, "{}: cannot rename {} into place", path_, temp_path_);
  }
  committed_ = true;
}

void writeFileAtomically(const std::string& path, const std::string& content) {
  AtomicFileWriter writer(path);
  writer.stream() << content;
  writer.commit();
}

}  // namespace evsim
