#include "mpi/mpi_env.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>

#include "mpi/mpi_check.h"
#include "mpi/mpi_wait.h"
#include "mpi/peers.h"

namespace evsim {

MpiWorld queryMpiWorld() {
  EVSIM_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  MpiWorld w;
  EVSIM_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &w.rank));
  EVSIM_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &w.size));
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  EVSIM_MPI_CHECK(MPI_Get_processor_name(name, &length));
  w.host.assign(name, static_cast<size_t>(length));
  MPI_Comm local = MPI_COMM_NULL;
  EVSIM_MPI_CHECK(
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w.rank, MPI_INFO_NULL, &local));
  EVSIM_MPI_CHECK(MPI_Comm_rank(local, &w.local_rank));
  EVSIM_MPI_CHECK(MPI_Comm_size(local, &w.local_size));
  EVSIM_MPI_CHECK(MPI_Allreduce(&w.rank, &w.host_key, 1, MPI_INT, MPI_MIN, local));
  // The node's cores for the job: OR of the local ranks' affinity masks (all CPUs of the machine
  // when a mask cannot be read).
  cpu_set_t mine, node;
  CPU_ZERO(&mine);
  CPU_ZERO(&node);
  if (sched_getaffinity(0, sizeof(mine), &mine) != 0) {
    const int all = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    for (int c = 0; c < all && c < CPU_SETSIZE; ++c) CPU_SET(c, &mine);
  }
  EVSIM_MPI_CHECK(MPI_Allreduce(&mine, &node, static_cast<int>(sizeof(cpu_set_t)),
                                MPI_UNSIGNED_CHAR, MPI_BOR, local));
  w.host_cores = std::max(1, CPU_COUNT(&node));
  EVSIM_MPI_CHECK(MPI_Comm_free(&local));
  registerPeers(w.rank, w.size, w.host_key);
  return w;
}

Topology discoverTopology(const MpiWorld& world, int emulated_ranks_per_node) {
  std::vector<int> keys(static_cast<size_t>(world.size));
  EVSIM_MPI_CHECK(
      MPI_Allgather(&world.host_key, 1, MPI_INT, keys.data(), 1, MPI_INT, MPI_COMM_WORLD));
  std::vector<std::string> names = gatherStrings(world.host, 0, MPI_COMM_WORLD);
  names = broadcastStrings(names, 0, MPI_COMM_WORLD);
  return buildTopology(keys, names, emulated_ranks_per_node);
}

GpuShortage findGpuShortage(const MpiWorld& world, int visible_gpus) {
  int mine[2] = {visible_gpus, world.local_size};
  std::vector<int> all(2 * static_cast<size_t>(world.size));
  EVSIM_MPI_CHECK(MPI_Allgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, MPI_COMM_WORLD));
  std::vector<std::string> hosts =
      broadcastStrings(gatherStrings(world.host, 0, MPI_COMM_WORLD), 0, MPI_COMM_WORLD);
  GpuShortage out;
  for (int r = 0; r < world.size; ++r) {
    const int gpus = all[2 * r], ranks_on_host = all[2 * r + 1];
    if (gpus == 0) {
      out.without.push_back(fmt::format("{}@{}", r, hosts[r]));
    } else if (gpus < ranks_on_host) {
      out.shared.push_back(
          fmt::format("{}@{} ({} ranks, {} GPUs)", r, hosts[r], ranks_on_host, gpus));
    }
  }
  return out;
}

std::string GpuShortage::message() const {
  if (!without.empty()) {
    return fmt::format(
        "--backend cuda: no CUDA device visible on rank(s) {} (check CUDA_VISIBLE_DEVICES and the "
        "driver, or use --backend cpu)",
        fmt::join(without, ", "));
  }
  return fmt::format(
      "--backend cuda: more ranks than GPUs on a host, rank(s) {}: each rank needs its own GPU "
      "(start fewer ranks per host, or use --backend cpu)",
      fmt::join(shared, ", "));
}

std::string mpiLibraryVersion() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  EVSIM_MPI_CHECK(MPI_Get_library_version(text, &length));
  std::string version(text, static_cast<size_t>(length));
  size_t cut = version.find_first_of(",\n");
  return version.substr(0, cut);
}

std::string broadcastString(const std::string& text, int root, MPI_Comm comm) {
  int64_t length = static_cast<int64_t>(text.size());
  MPI_Request request = MPI_REQUEST_NULL;
  EVSIM_MPI_CHECK(MPI_Ibcast(&length, 1, MPI_INT64_T, root, comm, &request));
  waitRequest(request, fmt::format("a broadcast from rank {}", root), WaitStyle::kSleep);
  std::string out = text;
  out.resize(static_cast<size_t>(length));
  EVSIM_CHECK(length <= INT32_MAX, "string of {} bytes too long to broadcast", length);
  if (length > 0) {
    EVSIM_MPI_CHECK(
        MPI_Ibcast(out.data(), static_cast<int>(length), MPI_CHAR, root, comm, &request));
    waitRequest(request, fmt::format("a broadcast from rank {}", root), WaitStyle::kSleep);
  }
  return out;
}

std::vector<std::string> broadcastStrings(const std::vector<std::string>& items, int root,
                                          MPI_Comm comm) {
  // One string with a length-prefixed encoding keeps it at two broadcasts.
  std::string packed;
  for (const std::string& item : items) packed += std::to_string(item.size()) + ":" + item;
  packed = broadcastString(packed, root, comm);
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < packed.size()) {
    size_t colon = packed.find(':', pos);
    EVSIM_CHECK(colon != std::string::npos, "corrupt string list");
    size_t length = std::stoul(packed.substr(pos, colon - pos));
    out.push_back(packed.substr(colon + 1, length));
    pos = colon + 1 + length;
  }
  return out;
}

std::vector<std::string> gatherStrings(const std::string& text, int root, MPI_Comm comm) {
  int rank = 0, size = 0;
  EVSIM_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  EVSIM_MPI_CHECK(MPI_Comm_size(comm, &size));
  int length = static_cast<int>(text.size());
  std::vector<int> lengths(rank == root ? size : 0);
  MPI_Request request = MPI_REQUEST_NULL;
  EVSIM_MPI_CHECK(
      MPI_Igather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, root, comm, &request));
  waitRequest(request, fmt::format("a gather to rank {}", root), WaitStyle::kSleep);
  std::vector<int> offsets(lengths.size(), 0);
  int total = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    offsets[i] = total;
    total += lengths[i];
  }
  std::string all(static_cast<size_t>(total), '\0');
  EVSIM_MPI_CHECK(MPI_Igatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(),
                               offsets.data(), MPI_CHAR, root, comm, &request));
  waitRequest(request, fmt::format("a gather to rank {}", root), WaitStyle::kSleep);
  std::vector<std::string> out;
  for (size_t i = 0; i < lengths.size(); ++i) out.push_back(all.substr(offsets[i], lengths[i]));
  return out;
}

}  // namespace evsim
