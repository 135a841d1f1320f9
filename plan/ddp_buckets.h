// Where the data-parallel gradient buckets close (--dp-overlap), by framework.
//
// Megatron-LM (NVIDIA/Megatron-LM d98e8a64dd, 2026-08-22):
// - megatron/training/training.py resolve_ddp_bucket_size: without --ddp-bucket-size the bucket
//   holds max(40,000,000, 1,000,000 x |dp_cp group|) parameters ("If using very large dp_sizes,
//   make buckets larger to ensure that chunks used in NCCL ring-reduce implementations are large
//   enough to remain bandwidth-bound rather than latency-bound",
//   megatron/core/distributed/distributed_data_parallel.py); param_and_grad_buffer.py closes a
//   bucket once it spans that many elements, so in bytes it is that many gradient elements.
// - training.py get_model: per_chunk_bucket_sizes = None for every model chunk after the first
//   (disable_bucketing = chunk_idx > 0) and for every chunk of a pipeline rank > 0
//   (distributed_data_parallel.py: "Turn off bucketing if we are on a pipeline stage that is not
//   the first (since data-parallel communication on these stages is not on the critical path)").
//   bucket_size None puts all of the chunk's parameters in one bucket: its reduction starts once
//   the chunk's last backward has produced every gradient. This holds whatever bucket size is
//   given.
// PyTorch DDP (the other frameworks' data parallelism): bucket_cap_mb = 25 MiB on every chunk.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "plan/strategy.h"

namespace evsim {

// PyTorch DDP's default bucket_cap_mb (torch/nn/parallel/distributed.py).
inline constexpr int64_t kTorchDdpBucketBytes = int64_t{25} * 1024 * 1024;
// A bucket that never closes before the chunk's last gradient: one bucket for the whole chunk.
inline constexpr int64_t kWholeChunkBucket = std::numeric_limits<int64_t>::max();

// Megatron's default bucket size in parameters for a DP x CP group of `dp_cp` ranks.
inline int64_t megatronDefaultBucketParams(int dp_cp) {
  return std::max<int64_t>(40'000'000, int64_t{1'000'000} * dp_cp);
}

// The bytes at which a DDP bucket of the chunk `chunk` on pipeline rank `device` closes, for
// gradients of `grad_bytes` bytes an element; kWholeChunkBucket where Megatron does not bucket.
// Strategy::dp_bucket_bytes > 0 is the size asked for (--dp-bucket-mb / --ddp-bucket-size); 0
// is the framework's default.
inline int64_t ddpBucketCloseBytes(const Strategy& s, int device, int chunk, int64_t grad_bytes) {
  if (s.framework == Framework::kMegatron) {
    if (device > 0 || chunk > 0) return kWholeChunkBucket;
    return s.dp_bucket_bytes > 0 ? s.dp_bucket_bytes
                                 : megatronDefaultBucketParams(s.gradGroupSize()) * grad_bytes;
  }
  return s.dp_bucket_bytes > 0 ? s.dp_bucket_bytes : kTorchDdpBucketBytes;
}

}  // namespace evsim
