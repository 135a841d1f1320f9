#include "modeler/calibration/sustained_clock.h"

#include "common/error.h"

namespace evsim {

void applySustainedClock(const SustainedGemmRecord& r, const std::string& origin,
                         DeviceSpec& device) {
  if (!device.model) {
    EVSIM_THROW(InputError,
                "--sustained-gemm {}: device '{}' has no fitted model for the clock to slow (fit "
                "--kernels or --runs with it, or start from a calibrated device file)",
                origin, device.id);
  }
  ClockParams clocks;
  if (device.model->clocks) {
    clocks.fit_mhz = device.model->clocks->fit_mhz;
  } else if (r.max_clock_mhz > 0) {
    clocks.fit_mhz = {r.max_clock_mhz,
                      fmt::format("measured: the maximum SM clock of {} (eventprof, {}): the "
                                  "short kernels of the fit run at it",
                                  r.device, origin)};
  } else {
    EVSIM_THROW(InputError,
                "--sustained-gemm {}: it reports no device clock (max_clock_mhz 0, backend {}) and "
                "device '{}' has no clocks.fit_mhz to scale",
                origin, r.backend, device.id);
  }
  clocks.sustained_mhz = {
      clocks.fit_mhz.value * r.sustainedRatio(),
      fmt::format("measured: eventprof --sustained-gemm-s {:g} on {}, {}: {} took {:.1f} us in a "
                  "short burst and {:.1f} us over the last quarter of {:.0f} s back to back "
                  "(x{:.3f}) ({})",
                  r.seconds, r.device, r.date.substr(0, 10), r.gemm, r.short_us, r.sustained_us,
                  r.elapsed_s, r.sustainedRatio(), origin)};
  device.model->clocks = clocks;
}

}  // namespace evsim
