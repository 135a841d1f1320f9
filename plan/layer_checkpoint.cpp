#include "plan/layer_checkpoint.h"

#include "common/error.h"
#include "plan/pipeline_schedule.h"

namespace evsim {

std::vector<char> checkpointedBlocks(const Strategy& strategy, const std::vector<int>& first_layer,
                                     int blocks) {
  const bool full = strategy.recompute == Recompute::kFull;
  std::vector<char> out(static_cast<size_t>(blocks), full ? 1 : 0);
  if (!full || strategy.recompute_every <= 1) return out;
  const PipelineLayout layout = pipelineLayout(strategy);
  const int K = layout.stages();
  EVSIM_CHECK(static_cast<int>(first_layer.size()) == K, "{} chunk starts for {} chunks",
              first_layer.size(), K);
  for (int device = 0; device < strategy.pp; ++device) {
    int count = 0;  // the rank's counter (_layer_sac_count)
    for (int chunk = 0; chunk < layout.chunks(); ++chunk) {
      const int k = layout.virtualStage(device, chunk);
      const int end = k + 1 < K ? first_layer[k + 1] : blocks;
      for (int layer = first_layer[k]; layer < end; ++layer) {
        ++count;
        out[static_cast<size_t>(layer)] = count % strategy.recompute_every == 0 ? 1 : 0;
      }
    }
  }
  return out;
}

}  // namespace evsim
