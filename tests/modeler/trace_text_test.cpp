// The trace writers' number formatting (modeler/trace_text.h): three-decimal times must be what
// fmt's "{:.3f}" prints, digit for digit, so that traces did not change when the writer stopped
// parsing format strings. Expected strings are worked out from each double's exact binary value.

#include "modeler/trace_text.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <sstream>
#include <string>

namespace evsim {
namespace {

std::string fixed3(double value) {
  fmt::memory_buffer buf;
  TraceText::appendFixed3(buf, value);
  return std::string(buf.data(), buf.size());
}

TEST(TraceText, Fixed3ByHand) {
  EXPECT_EQ(fixed3(0.0), "0.000");
  EXPECT_EQ(fixed3(1.0), "1.000");
  EXPECT_EQ(fixed3(123456.7894), "123456.789");
  EXPECT_EQ(fixed3(123456.7896), "123456.790");
  EXPECT_EQ(fixed3(9.9996), "10.000");  // the carry runs into the integer part
  EXPECT_EQ(fixed3(2.5e-4), "0.000");
  // 1.0005 is 1.00049999999999994... in binary: rounds down although it reads as a tie.
  EXPECT_EQ(fixed3(1.0005), "1.000");
  // 0.0015 is 0.00150000000000000003...: rounds up.
  EXPECT_EQ(fixed3(0.0015), "0.002");
  // 0.0625 and 0.1875 are exact binary ties at the fourth decimal: round half to even.
  EXPECT_EQ(fixed3(0.0625), "0.062");
  EXPECT_EQ(fixed3(0.1875), "0.188");
  // Beyond the fast path's range, and negative values: fmt's own formatting.
  EXPECT_EQ(fixed3(1e15), "1000000000000000.000");
  EXPECT_EQ(fixed3(-1.5), "-1.500");
  EXPECT_EQ(fixed3(-0.0001), "-0.000");
}

// A million values of every magnitude a timeline has (ns to days in microseconds), plus values a
// hair either side of the ties: each printed as fmt prints it.
TEST(TraceText, Fixed3MatchesFmtOnRandomValues) {
  std::mt19937_64 rng(14);
  std::uniform_real_distribution<double> exponent(-4, 11);
  std::uniform_int_distribution<int64_t> thousandths(0, int64_t{1} << 40);
  for (int i = 0; i < 1000000; ++i) {
    double value = std::pow(10.0, exponent(rng));
    if (i % 2 == 1) {  // k + 0.5 thousandths, and its neighbours
      value = (static_cast<double>(thousandths(rng)) + 0.5) / 1000.0;
      if (i % 3 == 0) value = std::nextafter(value, 0.0);
      if (i % 3 == 1) value = std::nextafter(value, 1e300);
    }
    ASSERT_EQ(fixed3(value), fmt::format("{:.3f}", value)) << "value bits " << value;
  }
}

TEST(TraceText, AppendsAndFlushesInOrder) {
  std::ostringstream out;
  {
    TraceText text(out);
    text << "{\"pid\":" << int64_t{-7} << ",\"tid\":" << 4 << ",\"ts\":";
    text.fixed3(12.3456) << '}';
    text.flush();  // under 1 MiB: nothing written yet
    EXPECT_EQ(out.str(), "");
    text.flush(/*force=*/true);
  }
  EXPECT_EQ(out.str(), "{\"pid\":-7,\"tid\":4,\"ts\":12.346}");
}

}  // namespace
}  // namespace evsim
