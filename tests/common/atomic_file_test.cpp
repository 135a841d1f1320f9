// The atomic writer (issue 17, item 4): a regular file is replaced whole; a symlink is followed
// and stays a link; a FIFO or a device is written in place, never renamed over; a directory is an
// input error; a write abandoned before commit leaves the old file and no temp file.
#include "common/atomic_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/error.h"

namespace evsim {
namespace {

namespace fs = std::filesystem;

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("evsim_atomic_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  static std::string read(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  // Files in the directory other than `keep` (a stray temp file would show here).
  int entries() const {
    return static_cast<int>(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()));
  }
  fs::path dir_;
};

TEST_F(AtomicFileTest, ReplacesARegularFileWhole) {
  const fs::path f = dir_ / "out.csv";
  writeFileAtomically(f, "old\n");
  writeFileAtomically(f, "new\n");
  EXPECT_EQ(read(f), "new\n");
  EXPECT_EQ(entries(), 1);
}

TEST_F(AtomicFileTest, AnAbandonedWriteKeepsTheOldFileAndNoTemp) {
  const fs::path f = dir_ / "out.csv";
  writeFileAtomically(f, "old\n");
  {
    AtomicFileWriter w(f);
    w.stream() << "half";
  }  // no commit: an exception on the way
  EXPECT_EQ(read(f), "old\n");
  EXPECT_EQ(entries(), 1);
}

TEST_F(AtomicFileTest, FollowsASymlinkAndKeepsIt) {
  const fs::path target = dir_ / "target.csv";
  const fs::path link = dir_ / "link.csv";
  writeFileAtomically(target, "old\n");
  fs::create_symlink(target, link);
  writeFileAtomically(link, "new\n");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link)));
  EXPECT_EQ(read(target), "new\n");
  EXPECT_EQ(entries(), 2);
}

TEST_F(AtomicFileTest, WritesAFifoInPlace) {
  const fs::path fifo = dir_ / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // The read end is open before the write (a FIFO nobody reads is refused, below); the content
  // fits the pipe's buffer, so the write does not wait for the read.
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  writeFileAtomically(fifo, "through the pipe\n");
  char buffer[64] = {};
  const ssize_t n = ::read(reader, buffer, sizeof(buffer));
  ::close(reader);
  EXPECT_EQ(std::string(buffer, n > 0 ? static_cast<size_t>(n) : 0), "through the pipe\n");
  EXPECT_EQ(fs::status(fifo).type(), fs::file_type::fifo);  // not replaced by a regular file
  EXPECT_EQ(entries(), 1);
}

// Issue 33: "--csv FIFO" without a reader blocked forever; now one InputError at once.
TEST_F(AtomicFileTest, AFifoWithoutAReaderIsAnInputError) {
  const fs::path fifo = dir_ / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  try {
    writeFileAtomically(fifo, "x");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              fifo.string() + ": a FIFO with no reader (start the reader first)");
  }
}

// Issue 33: a dangling link was replaced by a regular file; it is followed, and stays a link.
TEST_F(AtomicFileTest, FollowsADanglingSymlinkAndKeepsIt) {
  const fs::path target = dir_ / "target.csv";
  const fs::path link = dir_ / "link.csv";
  fs::create_symlink("target.csv", link);  // relative, to a file that does not exist yet
  writeFileAtomically(link, "new\n");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link)));
  EXPECT_EQ(read(target), "new\n");
  EXPECT_EQ(entries(), 2);
}

TEST_F(AtomicFileTest, ASymlinkLoopIsAnInputError) {
  const fs::path link = dir_ / "loop.csv";
  fs::create_symlink("loop.csv", link);
  try {
    writeFileAtomically(link, "x");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              link.string() + ": a loop of symbolic links (more than 40 links)");
  }
}

// Issue 33, item 7: publishTogether renames under the directory's lock, so another command holding
// it (here the test) keeps both targets as they were until it lets go; then both are replaced.
TEST_F(AtomicFileTest, PublishTogetherWaitsForTheDirectoryLock) {
  const fs::path csv = dir_ / "t.csv", trace = dir_ / "t.json";
  writeFileAtomically(csv, "old csv\n");
  writeFileAtomically(trace, "old trace\n");
  const int lock = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(lock, 0);
  ASSERT_EQ(::flock(lock, LOCK_EX), 0);
  std::atomic<bool> published{false};
  std::thread writer([&] {
    AtomicFileWriter a(csv), b(trace);
    a.stream() << "new csv\n";
    b.stream() << "new trace\n";
    a.finish();
    b.finish();
    publishTogether({&a, &b});
    published = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(published.load());
  EXPECT_EQ(read(csv), "old csv\n");
  EXPECT_EQ(read(trace), "old trace\n");
  ::close(lock);  // releases the lock
  writer.join();
  EXPECT_TRUE(published.load());
  EXPECT_EQ(read(csv), "new csv\n");
  EXPECT_EQ(read(trace), "new trace\n");
  EXPECT_EQ(entries(), 2);
}

TEST_F(AtomicFileTest, WritesACharacterDeviceInPlace) {
  // /dev/null stays a device; renaming a file over it (as root) would replace the system's node.
  writeFileAtomically("/dev/null", "discarded\n");
  EXPECT_EQ(fs::status("/dev/null").type(), fs::file_type::character);
}

TEST_F(AtomicFileTest, ADirectoryIsAnInputError) {
  try {
    writeFileAtomically(dir_, "x");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace evsim
