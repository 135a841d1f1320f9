// Fused attention on the CPU: FlashAttention's algorithm at the granularity of query tiles. Each
// tile's scores [rows x keys] come from one BLAS call, the softmax runs over them in place, and a
// second BLAS call applies them to V; memory stays O(block_rows x seq) per call whatever seq is.
// (FlashAttention also tiles the keys with an online softmax; here a tile's scores stay in the
// last-level cache between the two GEMMs, so that would only add a rescaling pass.)
#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"
#include "kernels/cpu/cpu_ops.h"

namespace evsim::cpu {

namespace {

using kernel_params::AttentionShape;

void checkShape(const AttentionShape& s, int64_t block_rows) {
  EVSIM_CHECK(s.batch > 0 && s.groups > 0 && s.batch % s.groups == 0 && s.seq > 0 && s.dim > 0 &&
                  block_rows > 0,
              "attention batch={} groups={} seq={} dim={} block_rows={}", s.batch, s.groups, s.seq,
              s.dim, block_rows);
}

// One tile of query rows [first, first + rows) of a head, and the keys it sees: all of them, or
// with the causal mask those up to its last row. Row i (0-based in the tile) sees valid(i) keys.
struct Tile {
  int64_t first = 0;
  int64_t rows = 0;
  int64_t keys = 0;
  bool causal = false;
  int64_t valid(int64_t i) const { return causal ? first + i + 1 : keys; }
};

Tile tileAt(const AttentionShape& s, int64_t first, int64_t block_rows) {
  Tile t;
  t.first = first;
  t.rows = std::min(block_rows, s.seq - first);
  t.keys = s.causal ? first + t.rows : s.seq;
  t.causal = s.causal;
  return t;
}

float softmaxScale(const AttentionShape& s) {
  return static_cast<float>(1.0 / std::sqrt(double(s.dim)));
}

}  // namespace

int64_t attentionWorkspaceFloats(const AttentionShape& shape, int64_t block_rows) {
  return 2 * std::min(block_rows, shape.seq) * shape.seq;
}

void attentionForward(const AttentionShape& s, int64_t block_rows, const float* q, const float* k,
                      const float* v, float* o, float* lse, float* workspace) {
  checkShape(s, block_rows);
  const int64_t head_size = s.seq * s.dim;
  float* p = workspace;  // [rows x keys] scores, then probabilities
  for (int64_t h = 0; h < s.batch; ++h) {
    const int64_t g = h / s.headsPerGroup();
    for (int64_t first = 0; first < s.seq; first += block_rows) {
      const Tile t = tileAt(s, first, block_rows);
      const float* q_tile = q + h * head_size + t.first * s.dim;
      gemmScaled("nt", t.rows, t.keys, s.dim, softmaxScale(s), q_tile, k + g * head_size, 0.0f, p);
      for (int64_t i = 0; i < t.rows; ++i) {
        float* row = p + i * t.keys;
        const int64_t valid = t.valid(i);
        float max_value = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < valid; ++j) max_value = std::max(max_value, row[j]);
        double sum = 0;
        for (int64_t j = 0; j < valid; ++j) {
          row[j] = std::exp(row[j] - max_value);
          sum += row[j];
        }
        const float inv = static_cast<float>(1.0 / sum);
        for (int64_t j = 0; j < valid; ++j) row[j] *= inv;
        std::fill(row + valid, row + t.keys, 0.0f);
        lse[h * s.seq + t.first + i] = max_value + static_cast<float>(std::log(sum));
      }
      gemmScaled("nn", t.rows, s.dim, t.keys, 1.0f, p, v + g * head_size, 0.0f,
                 o + h * head_size + t.first * s.dim);
    }
  }
}

void attentionBackward(const AttentionShape& s, int64_t block_rows, const float* q, const float* k,
                       const float* v, const float* o, const float* dout, const float* lse,
                       float* dq, float* dk, float* dv, float* workspace) {
  checkShape(s, block_rows);
  const int64_t head_size = s.seq * s.dim;
  const float scale = softmaxScale(s);
  std::fill(dk, dk + s.groups * head_size, 0.0f);
  std::fill(dv, dv + s.groups * head_size, 0.0f);
  float* p = workspace;                                         // probabilities P
  float* ds = workspace + std::min(block_rows, s.seq) * s.seq;  // dP, then dS
  for (int64_t h = 0; h < s.batch; ++h) {
    const int64_t g = h / s.headsPerGroup();
    const float* kg = k + g * head_size;
    const float* vg = v + g * head_size;
    for (int64_t first = 0; first < s.seq; first += block_rows) {
      const Tile t = tileAt(s, first, block_rows);
      const int64_t offset = h * head_size + t.first * s.dim;
      // P = exp(scaled scores - lse): the forward's probabilities, recomputed.
      gemmScaled("nt", t.rows, t.keys, s.dim, scale, q + offset, kg, 0.0f, p);
      for (int64_t i = 0; i < t.rows; ++i) {
        float* row = p + i * t.keys;
        const int64_t valid = t.valid(i);
        const float row_lse = lse[h * s.seq + t.first + i];
        for (int64_t j = 0; j < valid; ++j) row[j] = std::exp(row[j] - row_lse);
        std::fill(row + valid, row + t.keys, 0.0f);
      }
      gemmScaled("nt", t.rows, t.keys, s.dim, 1.0f, dout + offset, vg, 0.0f, ds);  // dP = dO V^T
      gemmScaled("tn", t.keys, s.dim, t.rows, 1.0f, p, dout + offset, 1.0f,
                 dv + g * head_size);  // dV += P^T dO
      // dS = P * (dP - delta), delta_i = sum_j P_ij dP_ij = dO_i . O_i; masked P are 0.
      for (int64_t i = 0; i < t.rows; ++i) {
        double delta = 0;
        for (int64_t d = 0; d < s.dim; ++d) {
          delta += double(dout[offset + i * s.dim + d]) * o[offset + i * s.dim + d];
        }
        const float deltaf = static_cast<float>(delta);
        float* row = ds + i * t.keys;
        const float* prow = p + i * t.keys;
        for (int64_t j = 0; j < t.keys; ++j) row[j] = prow[j] * (row[j] - deltaf);
      }
      gemmScaled("nn", t.rows, s.dim, t.keys, scale, ds, kg, 0.0f, dq + offset);  // dQ = c dS K
      gemmScaled("tn", t.keys, s.dim, t.rows, scale, ds, q + offset, 1.0f,
                 dk + g * head_size);  // dK += c dS^T Q
    }
  }
}

}  // namespace evsim::cpu
