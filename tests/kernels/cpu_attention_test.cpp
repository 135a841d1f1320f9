// CPU fused attention against the plain full-matrix attention, written here in double precision
// (softmax(Q K^T / sqrt(d) + mask) V per head, materialising every [seq x seq] matrix), and its
// backward pass against the textbook backward of that reference and finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/hash_rng.h"

namespace evsim {
namespace {

using kernel_params::AttentionShape;
using Doubles = std::vector<double>;

std::vector<float> randomVector(int64_t n, uint64_t seed) {
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = rng::uniformAt(seed, i, -1.0f, 1.0f);
  return out;
}

AttentionShape shape(bool causal) {
  AttentionShape s;
  s.batch = 4;
  s.groups = 2;
  s.seq = 37;  // not a multiple of the tiles below: the last tile is partial
  s.dim = 16;
  s.causal = causal;
  return s;
}

struct Inputs {
  std::vector<float> q, k, v, dout;
};

Inputs inputs(const AttentionShape& s) {
  const int64_t q_size = s.batch * s.seq * s.dim, kv_size = s.groups * s.seq * s.dim;
  // Q spread over [-2, 2) so the softmax is far from uniform.
  std::vector<float> q = randomVector(q_size, 1);
  for (float& x : q) x *= 2.0f;
  return {q, randomVector(kv_size, 2), randomVector(kv_size, 3), randomVector(q_size, 4)};
}

// The full probability matrix of head h, [seq x seq], masked entries 0.
Doubles naiveProbabilities(const AttentionShape& s, const Inputs& in, int64_t h) {
  const int64_t g = h / (s.batch / s.groups);
  Doubles p(s.seq * s.seq);
  for (int64_t i = 0; i < s.seq; ++i) {
    double max_value = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < s.seq; ++j) {
      double score = 0;
      for (int64_t d = 0; d < s.dim; ++d) {
        score += double(in.q[(h * s.seq + i) * s.dim + d]) * in.k[(g * s.seq + j) * s.dim + d];
      }
      score /= std::sqrt(double(s.dim));
      if (s.causal && j > i) score = -std::numeric_limits<double>::infinity();
      p[i * s.seq + j] = score;
      max_value = std::max(max_value, score);
    }
    double sum = 0;
    for (int64_t j = 0; j < s.seq; ++j) sum += std::exp(p[i * s.seq + j] - max_value);
    for (int64_t j = 0; j < s.seq; ++j) {
      p[i * s.seq + j] = std::exp(p[i * s.seq + j] - max_value) / sum;
    }
  }
  return p;
}

struct Forward {
  Doubles o, lse;
};

Forward naiveForward(const AttentionShape& s, const Inputs& in) {
  Forward f{Doubles(s.batch * s.seq * s.dim), Doubles(s.batch * s.seq)};
  for (int64_t h = 0; h < s.batch; ++h) {
    const int64_t g = h / (s.batch / s.groups);
    Doubles p = naiveProbabilities(s, in, h);
    for (int64_t i = 0; i < s.seq; ++i) {
      for (int64_t d = 0; d < s.dim; ++d) {
        double sum = 0;
        for (int64_t j = 0; j < s.seq; ++j) {
          sum += p[i * s.seq + j] * in.v[(g * s.seq + j) * s.dim + d];
        }
        f.o[(h * s.seq + i) * s.dim + d] = sum;
      }
      // log sum_j exp(score_j) over the unmasked keys, from the scores directly.
      double sum = 0;
      for (int64_t j = 0; j <= (s.causal ? i : s.seq - 1); ++j) {
        double score = 0;
        for (int64_t d = 0; d < s.dim; ++d) {
          score += double(in.q[(h * s.seq + i) * s.dim + d]) * in.k[(g * s.seq + j) * s.dim + d];
        }
        sum += std::exp(score / std::sqrt(double(s.dim)));
      }
      f.lse[h * s.seq + i] = std::log(sum);
    }
  }
  return f;
}

struct Grads {
  Doubles dq, dk, dv;
};

// dV = P^T dO, dP = dO V^T, dS = P o (dP - rowsum(P o dP)), dQ = dS K / sqrt(d),
// dK = dS^T Q / sqrt(d); dK and dV of a key/value head sum over its query heads.
Grads naiveBackward(const AttentionShape& s, const Inputs& in) {
  Grads gr{Doubles(s.batch * s.seq * s.dim), Doubles(s.groups * s.seq * s.dim),
           Doubles(s.groups * s.seq * s.dim)};
  const double c = 1.0 / std::sqrt(double(s.dim));
  for (int64_t h = 0; h < s.batch; ++h) {
    const int64_t g = h / (s.batch / s.groups);
    Doubles p = naiveProbabilities(s, in, h);
    Doubles ds(s.seq * s.seq);
    for (int64_t i = 0; i < s.seq; ++i) {
      Doubles dp(s.seq);
      double rowsum = 0;
      for (int64_t j = 0; j < s.seq; ++j) {
        for (int64_t d = 0; d < s.dim; ++d) {
          dp[j] += double(in.dout[(h * s.seq + i) * s.dim + d]) * in.v[(g * s.seq + j) * s.dim + d];
        }
        rowsum += p[i * s.seq + j] * dp[j];
      }
      for (int64_t j = 0; j < s.seq; ++j) ds[i * s.seq + j] = p[i * s.seq + j] * (dp[j] - rowsum);
    }
    for (int64_t i = 0; i < s.seq; ++i) {
      for (int64_t j = 0; j < s.seq; ++j) {
        for (int64_t d = 0; d < s.dim; ++d) {
          gr.dq[(h * s.seq + i) * s.dim + d] +=
              c * ds[i * s.seq + j] * in.k[(g * s.seq + j) * s.dim + d];
          gr.dk[(g * s.seq + j) * s.dim + d] +=
              c * ds[i * s.seq + j] * in.q[(h * s.seq + i) * s.dim + d];
          gr.dv[(g * s.seq + j) * s.dim + d] +=
              p[i * s.seq + j] * in.dout[(h * s.seq + i) * s.dim + d];
        }
      }
    }
  }
  return gr;
}

void expectNear(const std::vector<float>& got, const Doubles& want, double tol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * std::max(1.0, std::fabs(want[i])))
        << what << " [" << i << "]";
  }
}

struct Outputs {
  std::vector<float> o, lse;
};

Outputs runForward(const AttentionShape& s, const Inputs& in, int64_t block_rows) {
  Outputs out{std::vector<float>(s.batch * s.seq * s.dim), std::vector<float>(s.batch * s.seq)};
  std::vector<float> work(cpu::attentionWorkspaceFloats(s, block_rows));
  cpu::attentionForward(s, block_rows, in.q.data(), in.k.data(), in.v.data(), out.o.data(),
                        out.lse.data(), work.data());
  return out;
}

TEST(CpuAttention, ForwardMatchesFullMatrixAttention) {
  for (bool causal : {false, true}) {
    for (int64_t block_rows : {int64_t{16}, int64_t{128}}) {  // 16: tiles of 16, 16 and 5 rows
      SCOPED_TRACE(testing::Message() << "causal " << causal << " block " << block_rows);
      const AttentionShape s = shape(causal);
      const Inputs in = inputs(s);
      const Outputs got = runForward(s, in, block_rows);
      const Forward want = naiveForward(s, in);
      expectNear(got.o, want.o, 1e-5, "O");
      expectNear(got.lse, want.lse, 1e-5, "lse");
    }
  }
}

TEST(CpuAttention, CausalFirstRowCopiesItsValue) {
  // Query 0 sees key 0 only: its output is V[0] of its group, its lse the lone scaled score.
  const AttentionShape s = shape(true);
  const Inputs in = inputs(s);
  const Outputs got = runForward(s, in, 16);
  for (int64_t h = 0; h < s.batch; ++h) {
    const int64_t g = h / 2;
    for (int64_t d = 0; d < s.dim; ++d) {
      EXPECT_NEAR(got.o[h * s.seq * s.dim + d], in.v[g * s.seq * s.dim + d], 1e-6);
    }
  }
}

TEST(CpuAttention, BackwardMatchesFullMatrixBackward) {
  for (bool causal : {false, true}) {
    for (int64_t block_rows : {int64_t{16}, int64_t{128}}) {
      SCOPED_TRACE(testing::Message() << "causal " << causal << " block " << block_rows);
      const AttentionShape s = shape(causal);
      const Inputs in = inputs(s);
      const Outputs fwd = runForward(s, in, block_rows);
      std::vector<float> dq(in.q.size()), dk(in.k.size()), dv(in.v.size());
      std::vector<float> work(cpu::attentionWorkspaceFloats(s, block_rows));
      cpu::attentionBackward(s, block_rows, in.q.data(), in.k.data(), in.v.data(), fwd.o.data(),
                             in.dout.data(), fwd.lse.data(), dq.data(), dk.data(), dv.data(),
                             work.data());
      const Grads want = naiveBackward(s, in);
      expectNear(dq, want.dq, 2e-5, "dQ");
      expectNear(dk, want.dk, 2e-5, "dK");
      expectNear(dv, want.dv, 2e-5, "dV");
    }
  }
}

TEST(CpuAttention, BackwardMatchesFiniteDifferences) {
  // Spot checks of d<O, dO>/dx for a few elements of Q, K and V, independent of any backward
  // formula.
  AttentionShape s = shape(true);
  s.seq = 9;
  Inputs in = inputs(s);
  const int64_t block_rows = 4;
  const Outputs fwd = runForward(s, in, block_rows);
  std::vector<float> dq(in.q.size()), dk(in.k.size()), dv(in.v.size());
  std::vector<float> work(cpu::attentionWorkspaceFloats(s, block_rows));
  cpu::attentionBackward(s, block_rows, in.q.data(), in.k.data(), in.v.data(), fwd.o.data(),
                         in.dout.data(), fwd.lse.data(), dq.data(), dk.data(), dv.data(),
                         work.data());
  auto loss = [&] {
    const Outputs out = runForward(s, in, block_rows);
    double sum = 0;
    for (size_t i = 0; i < out.o.size(); ++i) sum += double(out.o[i]) * in.dout[i];
    return sum;
  };
  auto numeric = [&](std::vector<float>& x, size_t i) {
    const float h = 1e-2f, saved = x[i];
    x[i] = saved + h;
    const double up = loss();
    x[i] = saved - h;
    const double down = loss();
    x[i] = saved;
    return (up - down) / (2.0 * h);
  };
  for (size_t i : {size_t{0}, size_t{37}, size_t{100}, in.q.size() - 1}) {
    EXPECT_NEAR(dq[i], numeric(in.q, i), 2e-3) << "dQ " << i;
  }
  for (size_t i : {size_t{3}, size_t{50}, in.k.size() - 1}) {
    EXPECT_NEAR(dk[i], numeric(in.k, i), 2e-3) << "dK " << i;
    EXPECT_NEAR(dv[i], numeric(in.v, i), 2e-3) << "dV " << i;
  }
}

}  // namespace
}  // namespace evsim
