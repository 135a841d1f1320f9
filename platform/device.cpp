#include "platform/device.h"

#include "common/error.h"
#include "mpi/mpi_env.h"

namespace evsim {

Device::OverlapSamples Device::timeComputeBeside(const Event&, const Event&, const CommGroup&, int,
                                                 int) {
  EVSIM_THROW(CollectiveInputError,
              "eventprof --overlap: the {} platform cannot time a kernel "
              "beside a transfer",
              platform());
}

}  // namespace evsim
