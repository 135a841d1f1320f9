#pragma once
// The copies PyTorch FSDP2 runs on the compute stream around each layer's collectives
// (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py), memory-bound events of their own
// (memory_pass, events/event.h):
//
//   copy-out: foreach_all_gather_copy_out, run when the layer's forward (or backward) first
//     waits for its all-gather (wait_for_unshard, on the current stream), splits the gathered
//     flat buffer into each parameter's unsharded tensor with split_with_sizes_copy (dim 1 of
//     the world_size x shard view): the whole gathered buffer read and written once, B -> B for
//     an all-gather of B bytes (bf16 weights, or fp8 ones under Float8 all-gather: the bytes
//     on the wire);
//   copy-in: foreach_reduce, before the reduce-scatter, chunk_cats the layer's unsharded
//     gradients (the model dtype, e per element) into the reduce-scatter input in the reduce
//     dtype (fp32 under torchtitan's mixed precision), on the current stream: e x P -> 4 x P for
//     P gradient elements.
//
// The all-gather's own copy-in (the fp32 shard cast to bf16 and copied into the send buffer) runs
// on FSDP's all-gather copy-in stream, beside the compute, over the 1/N shard: not an op here.

#include <cstdint>
#include <string_view>

#include "events/dtype.h"
#include "events/event.h"

namespace evsim {

struct FsdpCopy {
  std::string_view name;  // op name in traces (static storage)
  Event event;
};

// After an all-gather of `gathered_bytes` (the full buffer every rank ends with); `dtype` the
// model's (names the event only).
FsdpCopy fsdpAllGatherCopyOut(int64_t gathered_bytes, DType dtype);
// Before the reduce-scatter of `elements` gradient elements computed in `grad_dtype`, reduced in
// fp32.
FsdpCopy fsdpReduceScatterCopyIn(int64_t elements, DType grad_dtype);

}  // namespace evsim
