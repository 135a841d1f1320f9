// The atomic writer (issue 17, item 4): a regular file is replaced whole; a symlink is followed
// and stays a link; a FIFO or a device is written in place, never renamed over; a directory is an
// input error; a write abandoned before commit leaves the old file and no temp file.
#include "common/atomic_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

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
  std::string got;
  std::thread reader([&] { got = read(fifo); });  // opening a FIFO waits for the other end
  writeFileAtomically(fifo, "through the pipe\n");
  reader.join();
  EXPECT_EQ(got, "through the pipe\n");
  EXPECT_EQ(fs::status(fifo).type(), fs::file_type::fifo);  // not replaced by a regular file
  EXPECT_EQ(entries(), 1);
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
