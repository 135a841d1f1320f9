#include "common/atomic_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

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

// Follows a chain of symbolic links to the path the bytes should go to. A dangling link is
// followed to where it points (the file is created there, the link stays a link: it was replaced
// by a regular file before, issue 33); a loop is an input error.
fs::path followLinks(const std::string& path) {
  constexpr int kMaxLinks = 40;  // as the kernel's ELOOP limit
  fs::path target = path;
  std::error_code ec;
  for (int hops = 0; fs::is_symlink(fs::symlink_status(target, ec)); ++hops) {
    if (hops == kMaxLinks) {
      EVSIM_THROW(InputError, "{}: a loop of symbolic links (more than {} links)", path, kMaxLinks);
    }
    const fs::path next = fs::read_symlink(target, ec);
    if (ec) EVSIM_THROW(InputError, "{}: cannot follow the symbolic link ({})", path, ec.message());
    target = next.is_absolute() ? next : target.parent_path() / next;
  }
  return target;
}

OutputTarget resolveTarget(const std::string& path) {
  std::error_code ec;
  const fs::path target = followLinks(path);
  const fs::file_status status = fs::status(target, ec);
  if (status.type() == fs::file_type::directory) {
    EVSIM_THROW(InputError, "{}: is a directory, not an output file", path);
  }
  if (status.type() == fs::file_type::fifo) {
    // Opening a FIFO for writing blocks until a reader opens it: forever, when none will. A
    // non-blocking open fails at once (ENXIO) when there is no reader.
    const int fd = ::open(target.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd < 0) {
      EVSIM_THROW(InputError, "{}: a FIFO with no reader (start the reader first)", path);
    }
    ::close(fd);
  }
  const bool exists =
      status.type() != fs::file_type::not_found && status.type() != fs::file_type::none;
  return {target.string(), exists && status.type() != fs::file_type::regular};
}

// Locks (flock, exclusive) the directories `paths` are in, in one global order (device, inode) so
// two commands never wait for each other; released when destroyed.
class DirectoryLocks {
 public:
  explicit DirectoryLocks(const std::vector<std::string>& paths) {
    std::vector<std::pair<std::pair<dev_t, ino_t>, int>> dirs;
    for (const std::string& p : paths) {
      const fs::path parent = fs::path(p).parent_path();
      const std::string dir = parent.empty() ? "." : parent.string();
      const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      struct stat st {};
      if (fd < 0 || ::fstat(fd, &st) != 0) {
        const int saved = errno;
        if (fd >= 0) ::close(fd);
        release();
        EVSIM_THROW(EnvironmentError, "{}: cannot open its directory to replace it ({})", p,
                    std::strerror(saved));
      }
      dirs.push_back({{st.st_dev, st.st_ino}, fd});
    }
    std::sort(dirs.begin(), dirs.end());
    for (size_t i = 0; i < dirs.size(); ++i) {
      if (i > 0 && dirs[i].first == dirs[i - 1].first) {
        ::close(dirs[i].second);
        continue;
      }
      fds_.push_back(dirs[i].second);
      if (::flock(dirs[i].second, LOCK_EX) != 0) {
        const int saved = errno;
        release();
        EVSIM_THROW(EnvironmentError,
                    "{}: cannot lock the output directory to replace the outputs together ({}); "
                    "none was replaced",
                    fmt::join(paths, ", "), std::strerror(saved));
      }
    }
  }
  ~DirectoryLocks() { release(); }
  DirectoryLocks(const DirectoryLocks&) = delete;
  DirectoryLocks& operator=(const DirectoryLocks&) = delete;

 private:
  void release() {
    for (int fd : fds_) ::close(fd);  // closing releases the flock
    fds_.clear();
  }
  std::vector<int> fds_;
};

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

void publishTogether(const std::vector<AtomicFileWriter*>& writers) {
  std::vector<std::string> renamed;
  for (AtomicFileWriter* w : writers) {
    if (!w->direct_) renamed.push_back(w->final_path_);
  }
  // Every command that publishes several files takes the same locks: the renames of one command
  // are not interleaved with another's, so the files last published are one command's.
  DirectoryLocks locks(renamed);
  std::vector<std::string> done;
  for (AtomicFileWriter* w : writers) {
    try {
      w->publish();
    } catch (const EnvironmentError& e) {
      if (done.empty()) throw;
      EVSIM_THROW(EnvironmentError, "{}; {} already replaced: the outputs are from different runs",
                  e.what(), fmt::join(done, ", "));
    }
    done.push_back(w->path_);
  }
}

void writeFileAtomically(const std::string& path, const std::string& content) {
  AtomicFileWriter writer(path);
  writer.stream() << content;
  writer.commit();
}

}  // namespace evsim
