// common/checked.h: products and sums of input-sized integers throw instead of wrapping; the
// saturating forms clamp; narrowing refuses what does not fit (issue 17, item 3).
#include "common/checked.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

namespace evsim {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

std::string messageOf(auto&& call) {
  try {
    call();
  } catch (const InputError& e) {
    return e.what();
  }
  return "no InputError";
}

TEST(Checked, MulInRangeIsExact) {
  EXPECT_EQ(checkedMul<int64_t>(3037000499, 3037000499, "x"), 9223372030926249001);  // 2^63 - ~6e9
  EXPECT_EQ(checkedMul<int64_t>(-4, 5, "x"), -20);
}

TEST(Checked, MulOverflowNamesTheInput) {
  // 3037000500^2 = 9223372037000250000 > 2^63 - 1 = 9223372036854775807.
  EXPECT_EQ(messageOf([] { checkedMul<int64_t>(3037000500, 3037000500, "--global-batch"); }),
            "--global-batch: 3037000500 x 3037000500 is too large (overflows a 64-bit integer)");
  EXPECT_EQ(messageOf([] { checkedMul<int>(65536, 32768, "gpus"); }),
            "gpus: 65536 x 32768 is too large (overflows a 32-bit integer)");
}

TEST(Checked, AddOverflowThrows) {
  EXPECT_EQ(checkedAdd<int64_t>(kMax - 1, 1, "x"), kMax);
  EXPECT_EQ(messageOf([] { checkedAdd<int64_t>(kMax, 1, "op executions"); }),
            "op executions: 9223372036854775807 + 1 is too large (overflows a 64-bit integer)");
}

TEST(Checked, NarrowRefusesWhatDoesNotFit) {
  EXPECT_EQ(checkedNarrow<int>(int64_t{2147483647}, "group"), 2147483647);
  // 4294967298 = 2^32 + 2: a static_cast gives 2.
  EXPECT_EQ(messageOf([] { checkedNarrow<int>(int64_t{4294967298}, "group"); }),
            "group: 4294967298 is out of range (at most 2147483647)");
}

TEST(Checked, SaturatingClampsAtTheMaximum) {
  EXPECT_EQ(saturatingAdd<int64_t>(kMax, 1), kMax);
  EXPECT_EQ(saturatingMul<int64_t>(int64_t{1} << 32, int64_t{1} << 32), kMax);
  EXPECT_EQ(saturatingMul<int64_t>(1000, 1000), 1000000);
}

TEST(Checked, DoubleToInt64) {
  EXPECT_EQ(checkedToInt64(1e18, "bytes"), 1000000000000000000);
  EXPECT_EQ(messageOf([] { checkedToInt64(1e300, "bytes"); }),
            "bytes: 1e+300 is out of range (0 to 2^62)");
  EXPECT_NE(messageOf([] { checkedToInt64(std::numeric_limits<double>::infinity(), "bytes"); }),
            "no InputError");
  EXPECT_NE(messageOf([] { checkedToInt64(std::nan(""), "bytes"); }), "no InputError");
  // A callable name is called only when the check fails (hot paths build no message).
  int named = 0;
  auto name = [&] {
    ++named;
    return std::string("traffic");
  };
  EXPECT_EQ(checkedToInt64(1024.0, name), 1024);
  EXPECT_EQ(named, 0);
  EXPECT_EQ(messageOf([&] { checkedToInt64(1e300, name); }),
            messageOf([] { checkedToInt64(1e300, "traffic"); }));
  EXPECT_EQ(named, 1);
}

}  // namespace
}  // namespace evsim
