#include "plan/zero2_buckets.h"

#include <algorithm>

#include "common/checked.h"
#include "common/error.h"

namespace evsim {

int64_t zero2BucketElements(const Strategy& strategy, int64_t wire_bytes) {
  EVSIM_CHECK(wire_bytes > 0, "element of {} bytes", wire_bytes);
  if (strategy.dp_bucket_bytes <= 0) return kDeepSpeedReduceBucketElements;
  return std::max<int64_t>(1, strategy.dp_bucket_bytes / wire_bytes);
}

int64_t zero2BufferBytes(const Strategy& strategy, int64_t wire_bytes, int64_t elem_bytes) {
  // Under --grad-reduce-sync step no persistent buffer: each bucket is its own, held from its first
  // gradient to its reduction's end and counted by the timeline's walk (modeler/pending_reductions.h).
  if (strategy.reducesAtStep()) return 0;
  const int buffers = strategy.dp_overlap ? 2 : 1;
  return buffers * zero2BucketElements(strategy, wire_bytes) * elem_bytes;
}

std::vector<Zero2Arrival> zero2Arrivals(const OpList& backward, const EventTable& table,
                                        const LayerParams& layer_params,
                                        const LayerParams& layer_experts) {
  // Per layer: its weight-gradient GEMMs (batched: the routed experts'), where its last op is.
  // Flat arrays, not a map of layers with a vector each (this runs per ZeRO-2 chunk of every plan
  // core a search builds): a layer's GEMMs are a list threaded through one array by index.
  struct Gemm {
    int op = 0;
    int64_t elements = 0;
    bool batched = false;
    int next = -1;  // the layer's next GEMM (index into `gemms`)
  };
  struct Layer {
    int id = 0;
    int first_gemm = -1, last_gemm = -1;
    int last_op = -1;
    int64_t plain = 0, batched = 0;  // elements of each kind
  };
  std::vector<Layer> layers;
  std::vector<Gemm> gemms;
  // At most one GEMM per op, and a layer has several ops (a norm, a GEMM and its gradient...).
  gemms.reserve(backward.size());
  layers.reserve(backward.size() / 4 + 4);
  size_t current = 0;  // the layer the last op joined: a chunk's ops come layer by layer
  auto layerOf = [&](int id) -> Layer& {
    if (current < layers.size() && layers[current].id == id) return layers[current];
    for (current = 0; current < layers.size() && layers[current].id != id; ++current) {
    }
    if (current == layers.size()) layers.push_back(Layer{id});
    return layers[current];
  };
  for (size_t i = 0; i < backward.size(); ++i) {
    const OpInstance& op = backward[i];
    if (op.stream == Stream::kHost) continue;  // offload copies compute no gradient
    Layer& layer = layerOf(op.layer);
    layer.last_op = static_cast<int>(i);
    const Event& e = table[op.event].event;
    const bool batched = e.op == "bgemm";
    if (!op.weight_grad || op.stream != Stream::kCompute || e.layout != "tn" ||
        (e.op != "gemm" && !batched)) {
      continue;
    }
    int64_t weight = checkedMul(e.dim("m"), e.dim("n"), "weight-gradient elements");
    if (batched) weight = checkedMul(weight, e.dim("batch"), "weight-gradient elements");
    const int index = static_cast<int>(gemms.size());
    gemms.push_back({static_cast<int>(i), weight, batched});
    (layer.last_gemm < 0 ? layer.first_gemm : gemms[layer.last_gemm].next) = index;
    layer.last_gemm = index;
    int64_t& sum = batched ? layer.batched : layer.plain;
    sum = checkedAdd(sum, weight, "weight-gradient elements");
  }
  // Layers by their last op (a chunk's layers never interleave; each op is one layer's, so the
  // last ops differ and the order is the map's sorted by them, whatever order they came in).
  std::sort(layers.begin(), layers.end(),
            [](const Layer& a, const Layer& b) { return a.last_op < b.last_op; });
  std::vector<Zero2Arrival> out;
  for (const Layer& layer : layers) {
    const int id = layer.id;
    const int64_t* params = layer_params.find(id);
    if (params == nullptr) continue;  // no parameters (none of the chunk's layers)
    const int64_t experts = layer_experts.valueOr(id, 0);
    const int64_t dense = *params - experts;
    // With experts synchronised apart the batched GEMMs are theirs; otherwise all are dense.
    const int64_t gemm_dense = experts > 0 ? layer.plain : layer.plain + layer.batched;
    const int64_t gemm_experts = experts > 0 ? layer.batched : 0;
    const bool by_gemm = gemm_dense <= dense && gemm_experts <= experts;
    Zero2Arrival rest{layer.last_op, by_gemm ? dense - gemm_dense : dense,
                      by_gemm ? experts - gemm_experts : experts};
    rest.elements += rest.experts;
    if (by_gemm) {
      for (int at = layer.first_gemm; at >= 0; at = gemms[at].next) {
        const Gemm& g = gemms[at];
        const bool expert = experts > 0 && g.batched;
        if (g.op == layer.last_op) {  // the rest arrives with it
          rest.elements += g.elements;
          rest.experts += expert ? g.elements : 0;
        } else if (g.elements > 0) {
          out.push_back({g.op, g.elements, expert ? g.elements : 0});
        }
      }
    }
    if (rest.elements > 0) out.push_back(rest);
  }
  return out;
}

std::vector<Zero2Bucket> zero2Buckets(const std::vector<Zero2Arrival>& arrivals,
                                      int64_t bucket_elements, int last_op) {
  EVSIM_CHECK(bucket_elements > 0, "bucket of {} elements", bucket_elements);
  std::vector<Zero2Bucket> out;
  Zero2Bucket pending;
  for (const Zero2Arrival& a : arrivals) {
    // DeepSpeed reduces the bucket before a gradient that would overflow it goes in: when that
    // gradient's hook runs, after its op.
    if (pending.elements > 0 && pending.elements + a.elements > bucket_elements) {
      pending.after_op = a.after_op;
      out.push_back(pending);
      pending = Zero2Bucket{};
    }
    pending.elements += a.elements;
    pending.experts += a.experts;
  }
  if (pending.elements > 0) {  // the epilogue's
    pending.after_op = last_op;
    out.push_back(pending);
  }
  return out;
}

int64_t zero2FirstBucketAtLeast(const Zero2ChunkGradients& g, int64_t bucket_elements) {
  EVSIM_CHECK(bucket_elements > 0 && g.total >= 0, "bucket of {} elements, {} gradients",
              bucket_elements, g.total);
  if (g.total <= bucket_elements) return g.total;  // one bucket, the epilogue's
  int64_t closed = bucket_elements - std::min(g.later_at_most, bucket_elements) + 1;
  if (g.trailing > 0) closed = std::min(closed, g.total - g.trailing);
  return std::clamp<int64_t>(std::max(g.first_at_least, closed), 0, g.total);
}

std::vector<GradBucket> deferZero2Reductions(OpList& backward, const EventTable& table) {
  std::vector<GradBucket> out;
  OpList kept;
  kept.reserve(backward.size());
  for (const OpInstance& op : backward) {
    const bool dense = op.name == kZero2ReduceName;
    if (op.stream != Stream::kDpComm || (!dense && op.name != kZero2ExpertReduceName)) {
      kept.push_back(op);
      continue;
    }
    out.push_back(GradBucket{op.event, static_cast<int>(kept.size()) - 1,
                             table[op.event].event.message_bytes, !dense});
  }
  backward = std::move(kept);
  return out;
}

void overlapZero2Reductions(OpList& backward) {
  auto reduction = [&](size_t i) {
    return backward[i].stream == Stream::kDpComm &&
           (backward[i].name == kZero2ReduceName || backward[i].name == kZero2ExpertReduceName);
  };
  for (size_t i = 0; i < backward.size(); ++i) {
    if (!reduction(i)) continue;
    // The next bucket's first reduction: past this bucket's own (its dense and experts' parts
    // are adjacent) and the ops after them.
    size_t next = i + 1;
    while (next < backward.size() && reduction(next)) ++next;
    while (next < backward.size() && !reduction(next)) ++next;
    // The last bucket: the epilogue waits for it (no op runs beside it).
    backward[i].overlap_ops = next < backward.size() ? static_cast<int>(next - i - 1) : 0;
  }
}

}  // namespace evsim
