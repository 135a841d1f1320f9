#pragma once
// Writes a file all-or-nothing: output goes to "<path>.tmp.<pid>" in the same directory and is
// renamed over `path` by commit(). Destroyed without commit() (an exception, a crash), the temp
// file is removed and any previous `path` stays intact: a reader never sees a partial output.
// A symbolic link is followed (its target is replaced or, for a dangling link, created; the link
// stays; a loop is an InputError); a path that exists and is not a regular file (a FIFO, /dev/null,
// a terminal) is written in place, never renamed over (a FIFO nobody reads is an InputError, not a
// wait forever); a directory is an InputError.

#include <fstream>
#include <string>
#include <vector>

namespace evsim {

class AtomicFileWriter {
 public:
  // kDurable also fsyncs the file before it is renamed into place, so a machine that loses power
  // right after keeps either the old or the new content (the profile database: hours of
  // measurement). kBuffered leaves that to the kernel (traces, CSVs: cheap to write again).
  enum class Durability { kBuffered, kDurable };

  // Throws InputError naming the path when it is a directory, EnvironmentError when the file
  // cannot be created.
  explicit AtomicFileWriter(std::string path, Durability durability = Durability::kBuffered);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  std::ofstream& stream() { return out_; }
  // Flushes, checks for write errors and renames into place. Throws EnvironmentError on failure.
  void commit() {
    finish();
    publish();
  }
  // The two halves of commit(), for a command that writes several files all or none: finish()
  // every writer (any failure throws, and the destructors remove every temp file), then publish()
  // every writer.
  void finish();
  void publish();

 private:
  friend void publishTogether(const std::vector<AtomicFileWriter*>& writers);

  std::string path_;        // as given, for messages
  std::string final_path_;  // where the bytes end up (a symlink's target)
  std::string temp_path_;   // written first; final_path_ itself when direct_
  bool direct_ = false;     // not a regular file: written in place
  Durability durability_;
  std::ofstream out_;
  bool finished_ = false;
  bool committed_ = false;
};

// Publishes finished writers of one command together (issue 33): under an exclusive lock (flock) of
// their directories, which every call takes, so that commands writing the same targets at once
// leave all of one command's files, never a mix. Throws EnvironmentError when the lock cannot be
// taken (nothing replaced) or a rename fails after another succeeded (the message names them).
void publishTogether(const std::vector<AtomicFileWriter*>& writers);

// Convenience: the whole content at once.
void writeFileAtomically(const std::string& path, const std::string& content);

}  // namespace evsim
