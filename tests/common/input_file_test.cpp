// readInputFile (issue 17, item 2): regular files only, bounded in size, valid UTF-8; each refusal
// one InputError naming the file and the rule.
#include "common/input_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/error.h"

namespace evsim {
namespace {

namespace fs = std::filesystem;

std::string errorOf(const std::string& path) {
  try {
    readInputFile(path, "model");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

class InputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("evsim_input_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    ::unsetenv("EVSIM_MAX_INPUT_MIB");
    fs::remove_all(dir_);
  }
  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  fs::path dir_;
};

TEST_F(InputFileTest, ReadsARegularUtf8File) {
  EXPECT_EQ(readInputFile(write("m.yaml", "name: caf\xC3\xA9\n"), "model"), "name: caf\xC3\xA9\n");
}

TEST_F(InputFileTest, RefusesWhatIsNotARegularFile) {
  EXPECT_EQ(errorOf(dir_.string()), dir_.string() + ": is a directory, not a model file");
  EXPECT_EQ(errorOf("/dev/zero"), "/dev/zero: not a regular file (a model must be a file)");
  const std::string fifo = (dir_ / "pipe").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(errorOf(fifo), fifo + ": not a regular file (a model must be a file)");
  EXPECT_EQ(errorOf((dir_ / "absent.yaml").string()),
            (dir_ / "absent.yaml").string() + ": cannot open file (no such model)");
}

TEST_F(InputFileTest, RefusesAFileOverTheLimit) {
  const std::string big = write("big.yaml", std::string((1 << 20) + 1, 'a'));  // 1 MiB + 1 byte
  EXPECT_EQ(readInputFile(big, "model").size(), size_t{(1 << 20) + 1});        // under 64 MiB
  ::setenv("EVSIM_MAX_INPUT_MIB", "1", 1);
  EXPECT_EQ(errorOf(big), big +
                              ": 2 MiB is larger than the 1 MiB limit for a model (set "
                              "EVSIM_MAX_INPUT_MIB to raise it)");
  ::setenv("EVSIM_MAX_INPUT_MIB", "lots", 1);
  EXPECT_NE(errorOf(big).find("EVSIM_MAX_INPUT_MIB=lots: must be a whole number"),
            std::string::npos);
}

TEST_F(InputFileTest, RefusesTextThatIsNotUtf8) {
  const std::string latin1 = write("latin1.yaml", "name: caf\xE9\n");  // ISO-8859-1 e-acute
  EXPECT_EQ(errorOf(latin1), latin1 + ": not UTF-8 text (invalid byte at offset 9)");
}

TEST(Utf8, FindsTheFirstInvalidByte) {
  EXPECT_EQ(firstInvalidUtf8("plain ascii"), -1);
  EXPECT_EQ(firstInvalidUtf8("\xE2\x82\xAC euro, \xF0\x9F\x98\x80 emoji"), -1);
  EXPECT_EQ(firstInvalidUtf8("ab\x80"), 2);            // a continuation byte alone
  EXPECT_EQ(firstInvalidUtf8("a\xC3"), 1);             // truncated sequence
  EXPECT_EQ(firstInvalidUtf8("\xC0\xAF"), 0);          // overlong '/'
  EXPECT_EQ(firstInvalidUtf8("x\xED\xA0\x80"), 1);     // UTF-16 surrogate U+D800
  EXPECT_EQ(firstInvalidUtf8("\xF4\x90\x80\x80"), 0);  // past U+10FFFF
  // Past the eight-byte ASCII steps: the offset is still the byte's own, and a sequence may
  // straddle a step.
  EXPECT_EQ(firstInvalidUtf8(std::string(19, 'a') + "\x80"), 19);
  EXPECT_EQ(firstInvalidUtf8(std::string(16, 'a') + "\xFF" + std::string(16, 'a')), 16);
  EXPECT_EQ(firstInvalidUtf8(std::string(7, 'a') + "\xE2\x82\xAC" + std::string(9, 'b')), -1);
  EXPECT_EQ(firstInvalidUtf8(std::string(7, 'a') + "\xE2\x82" + std::string(9, 'b')), 7);
}

}  // namespace
}  // namespace evsim
