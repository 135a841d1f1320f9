#include "common/atomic_file.h"

#include <unistd.h>

#include <cstdio>

#include "common/error.h"

namespace evsim {

AtomicFileWriter::AtomicFileWriter(std::string path)
    : path_(std::move(path)), temp_path_(path_ + ".tmp." + std::to_string(::getpid())) {
  out_.open(temp_path_, std::ios::out | std::ios::trunc | std::ios::binary);
  if (!out_) EVSIM_THROW(InputError, "{}: cannot create output file", path_);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (!committed_) {
    out_.close();
    std::remove(temp_path_.c_str());
  }
}

void AtomicFileWriter::commit() {
  out_.flush();
  if (!out_) EVSIM_THROW(Error, "{}: write failed (disk full?)", path_);
  out_.close();
  if (std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    EVSIM_THROW(Error, "{}: cannot rename {} into place", path_, temp_path_);
  }
  committed_ = true;
}

void writeFileAtomically(const std::string& path, const std::string& content) {
  AtomicFileWriter writer(path);
  writer.stream() << content;
  writer.commit();
}

}  // namespace evsim
