#include "profiler/comm_math.h"

#include "common/error.h"
#include "common/units.h"

namespace evsim {

double algorithmBandwidthGBs(int64_t bytes, double time_us) {
  EVSIM_CHECK(time_us > 0, "non-positive time {} us", time_us);
  return double(bytes) / (time_us / kUsPerSecond) / kBytesPerGB;
}

}  // namespace evsim
