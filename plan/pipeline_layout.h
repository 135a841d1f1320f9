#pragma once
// Where each model chunk runs: the one place that maps a virtual stage (a model chunk in model
// order, k = 0 .. P*v-1) to its device stage s and the device's chunk c, and back. A schedule owns
// its layout (PipelineSchedule::layout):
//
//   looped  k = c*P + s: chunk c of every device follows chunk c of the device before; the last
//           device's chunk c hands over to the first device's chunk c+1 (GPipe, 1F1B, Megatron's
//           interleaving, ZB-H1/H2).
//   V       v = 2, k = s for chunk 0 and k = 2P-1-s for chunk 1: the model goes down the devices
//           and comes back up, so device P-1 holds stages P-1 and P and device 0 holds the first
//           and the last stage (ZB-V, DualPipeV; torchtitan's "v" style).
//
// Two consecutive virtual stages on the same device hand over in memory (no P2P transfer):
// `sameDevice(k, k+1)`.

#include "common/error.h"

namespace evsim {

enum class LayoutKind { kLooped, kV };

class PipelineLayout {
 public:
  PipelineLayout() = default;
  // P devices with v chunks each; the V layout needs v == 2.
  PipelineLayout(LayoutKind kind, int devices, int chunks)
      : kind_(kind), devices_(devices), chunks_(chunks) {
    EVSIM_CHECK(devices >= 1 && chunks >= 1 && (kind == LayoutKind::kLooped || chunks == 2),
                "pipeline layout P={} v={}", devices, chunks);
  }

  LayoutKind kind() const { return kind_; }
  int devices() const { return devices_; }        // P
  int chunks() const { return chunks_; }          // v
  int stages() const { return devices_ * chunks_; }  // P*v virtual stages

  // Virtual stage of the device's chunk `chunk`.
  int virtualStage(int device, int chunk) const {
    if (kind_ == LayoutKind::kV && chunk == 1) return 2 * devices_ - 1 - device;
    return chunk * devices_ + device;
  }
  // Device stage that runs virtual stage `k`.
  int device(int k) const {
    if (kind_ == LayoutKind::kV && k >= devices_) return 2 * devices_ - 1 - k;
    return k % devices_;
  }
  // Which of its device's chunks virtual stage `k` is.
  int chunk(int k) const { return k / devices_; }
  // Whether virtual stages a and b run on one device (a hand-over between them is local).
  bool sameDevice(int a, int b) const { return device(a) == device(b); }
  // The device pair that link k (virtual stage k to k+1, either direction) crosses, as the index p
  // of the pair (p, (p+1) % P); -1 when both stages are on one device.
  int linkPair(int k) const {
    const int from = device(k), to = device(k + 1);
    if (from == to) return -1;
    // V: neighbours without a wrap (at P = 2 the looped rule would take 1 -> 0 for the wrap pair).
    if (kind_ == LayoutKind::kV) return from < to ? from : to;
    return to == (from + 1) % devices_ ? from : to;
  }
  // Whether some link wraps from the last device to the first (looped with v > 1).
  bool wraps() const { return kind_ == LayoutKind::kLooped && chunks_ > 1; }

  bool operator==(const PipelineLayout&) const = default;

 private:
  LayoutKind kind_ = LayoutKind::kLooped;
  int devices_ = 1;
  int chunks_ = 1;
};

}  // namespace evsim
