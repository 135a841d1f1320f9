#include "profiler/overlap_probe.h"

#include <algorithm>
#include <array>

#include "mpi/mpi_check.h"
#include "mpi/mpi_wait.h"
#include "profiler/stats.h"

namespace evsim {

namespace {

struct ProbeGroup {
  std::vector<int> ranks;  // ascending world ranks
  Placement placement;
};

// Inside the first node (when it has two ranks or more), then one rank per node (two nodes or
// more).
std::vector<ProbeGroup> probeGroups(const Topology& topo) {
  std::vector<ProbeGroup> out;
  const std::vector<int>& node0 = topo.ranks_of_node.front();
  if (node0.size() >= 2) {
    const int n = static_cast<int>(node0.size());
    out.push_back({node0, Placement{n, 1, n}});
  }
  if (topo.nodes() >= 2) {
    ProbeGroup across;
    for (const std::vector<int>& node : topo.ranks_of_node) across.ranks.push_back(node.front());
    across.placement = Placement{topo.nodes(), topo.nodes(), 1};
    out.push_back(across);
  }
  return out;
}

// A GEMM and a memory-bound kernel, and the all-reduce's buffer, per platform.
struct ProbeSizes {
  std::vector<Event> kernels;
  int64_t transfer_bytes = 0;
  DType dtype = DType::kFp32;
};

ProbeSizes probeSizes(const std::string& platform) {
  ProbeSizes s;
  if (platform == "cuda") {
    // ~1.1 TFLOP and ~1.6 GB of traffic: milliseconds on an A100/H100, beside a 256 MiB
    // all-reduce (milliseconds on NVLink too).
    s.dtype = DType::kBf16;
    s.kernels = {makeGemm(8192, 8192, 8192, "nn", s.dtype),
                 makeCompute("add", {{"elems", int64_t{1} << 28}}, "", s.dtype)};
    s.transfer_bytes = int64_t{256} << 20;
  } else {
    s.kernels = {makeGemm(256, 256, 256, "nn", s.dtype),
                 makeCompute("add", {{"elems", int64_t{1} << 21}}, "", s.dtype)};
    s.transfer_bytes = int64_t{8} << 20;
  }
  return s;
}

constexpr int kStatsDoubles = 10;  // alone and beside: median, min, max, stddev, count

std::array<double, kStatsDoubles> toWire(const TimingStats& alone, const TimingStats& beside) {
  return {alone.median_us,  alone.min_us,  alone.max_us,  alone.stddev_us,  double(alone.count),
          beside.median_us, beside.min_us, beside.max_us, beside.stddev_us, double(beside.count)};
}

TimingStats fromWire(const std::array<double, kStatsDoubles>& w, int offset) {
  return TimingStats{w[offset], w[offset + 1], w[offset + 2], w[offset + 3],
                     static_cast<int>(w[offset + 4])};
}

}  // namespace

int measureOverlap(const MpiWorld& world, const Topology& topo, Device& device,
                   const ProfileOptions& options, const ProfileMetadata& metadata) {
  const std::vector<ProbeGroup> groups = probeGroups(topo);
  if (groups.empty()) {
    EVSIM_THROW(CollectiveInputError,
                "--overlap needs at least two ranks (an all-reduce to run beside the kernels)");
  }
  const ProbeSizes sizes = probeSizes(device.platform());
  ProfileDb db;
  db.metadata = metadata;
  int written = 0;
  for (const ProbeGroup& g : groups) {
    const Event transfer =
        makeCommunication(EventKind::kAllReduce, sizes.transfer_bytes, g.placement, sizes.dtype);
    for (const Event& kernel : sizes.kernels) {
      const auto it = std::find(g.ranks.begin(), g.ranks.end(), world.rank);
      const bool member = it != g.ranks.end();
      MPI_Comm comm = MPI_COMM_NULL;
      {
        CommWatch watch("creating an overlap group's communicator");
        EVSIM_MPI_CHECK(
            MPI_Comm_split(MPI_COMM_WORLD, member ? 0 : MPI_UNDEFINED, world.rank, &comm));
      }
      std::array<double, kStatsDoubles> wire{};
      if (member) {
        CommGroup group{comm, static_cast<int>(it - g.ranks.begin()),
                        static_cast<int>(g.ranks.size()), g.ranks};
        Device::OverlapSamples samples =
            device.timeComputeBeside(kernel, transfer, group, options.warmup, options.repeats);
        // The group's first rank speaks for it (every member ran the same kernel and transfer).
        if (group.rank == 0) {
          wire = toWire(computeStats(samples.alone_us), computeStats(samples.beside_us));
        }
        EVSIM_MPI_CHECK(MPI_Comm_free(&comm));
      }
      MPI_Request request = MPI_REQUEST_NULL;
      EVSIM_MPI_CHECK(MPI_Ibcast(wire.data(), kStatsDoubles, MPI_DOUBLE, g.ranks.front(),
                                 MPI_COMM_WORLD, &request));
      waitRequest(request, "an overlap measurement's result", WaitStyle::kSleep);
      if (world.rank != 0) continue;
      OverlapRecord record{kernel, transfer, fromWire(wire, 0), fromWire(wire, 5)};
      if (options.log != nullptr) {
        fmt::print(options.log,
                   "[eventprof] overlap: {} alone {:.1f} us, beside {} {:.1f} us (x{:.3f})\n",
                   kernel.signature(), record.alone.median_us, transfer.signature(),
                   record.beside.median_us, record.beside.median_us / record.alone.median_us);
      }
      db.putOverlap(std::move(record));
      db.save(options.output_path);
      ++written;
    }
  }
  return written;
}

}  // namespace evsim
