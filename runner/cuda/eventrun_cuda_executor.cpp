#include "runner/cuda/eventrun_cuda_executor.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <map>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "mpi/cuda/cuda_buffers.h"
#include "mpi/cuda/nccl_check.h"
#include "mpi/cuda/nccl_collectives.h"
#include "mpi/cuda/nccl_comm.h"
#include "mpi/mpi_check.h"
#include "runner/eventrun_backend_p2p.h"
#include "runner/eventrun_backend_timing.h"

namespace evsim {

namespace {

// Send and receive buffers of one communication event: message_bytes is the full buffer of a
// collective (shards are count / group size) and the payload of a P2P transfer.
CommGroup commGroup(MPI_Comm comm, const std::vector<int64_t>& members) {
  CommGroup g;
  g.comm = comm;
  EVSIM_MPI_CHECK(MPI_Comm_rank(comm, &g.rank));
  EVSIM_MPI_CHECK(MPI_Comm_size(comm, &g.size));
  g.world_ranks.assign(members.begin(), members.end());
  return g;
}

class CudaRankExecutor : public RankExecutor {
 public:
  CudaRankExecutor(const IterationPlan& plan, const RankProgram& program,
                   const CudaExecutorOptions& options)
      : plan_(plan),
        program_(program),
        fused_recv_(program.actions.size(), kNone),
        received_early_(program.actions.size(), false) {
    const int count = cudaDeviceCount();
    EVSIM_CHECK(count > 0, "CUDA executor without a visible device");
    device_ = options.local_rank % count;
    EVSIM_CUDA_CHECK(cudaSetDevice(device_));
    EVSIM_CUDA_CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
    EVSIM_CUDA_CHECK(cudaStreamCreateWithFlags(&bucket_, cudaStreamNonBlocking));
    EVSIM_CUDA_CHECK(cudaEventCreate(&reference_));
    EVSIM_CUDA_CHECK(cudaEventCreate(&done_));
    for (size_t i : options.fused_sends) {
      const size_t j = nextReceive(program_, i);
      EVSIM_CHECK(i < program_.actions.size() && program_.actions[i].kind == ActionKind::kSend &&
                      j < program_.actions.size(),
                  "rank {}: action {} is not a send with a receive after it", program_.rank, i);
      fused_recv_[i] = j;
      received_early_[j] = true;
    }
    // Communicators in one global order (see the header).
    mpi_comms_ = createGroupComms(program_.groups);
    for (size_t g = 0; g < program_.groups.size(); ++g) {
      comms_.push_back(std::make_unique<NcclComm>(commGroup(mpi_comms_[g], program_.groups[g]),
                                                  options.comm_timeout_s));
    }
    for (size_t g = 0; g < program_.groups.size(); ++g) {
      const bool buckets =
          std::any_of(program_.actions.begin(), program_.actions.end(), [&](const Action& a) {
            return a.kind == ActionKind::kBucketStart && a.group == static_cast<int>(g);
          });
      if (buckets) {
        bucket_comms_[static_cast<int>(g)] = std::make_unique<NcclComm>(
            commGroup(mpi_comms_[g], program_.groups[g]), options.comm_timeout_s);
      }
    }
    if (plan_.deviceStages() > 1) {
      int world = 0;
      EVSIM_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world));
      std::vector<int64_t> all(static_cast<size_t>(world));
      for (int r = 0; r < world; ++r) all[static_cast<size_t>(r)] = r;
      p2p_ = std::make_unique<NcclComm>(commGroup(MPI_COMM_WORLD, all), options.comm_timeout_s);
    }
    for (const Action& a : program_.actions) {
      if (a.kind == ActionKind::kCompute) {
        if (!kernels_.count(a.event)) {
          kernels_[a.event] =
              makeCudaKernel(plan_.events[a.event].event, compute_, options.seed + 7919 * a.event);
        }
      } else if (a.event >= 0) {
        buffersFor(a.event);
      }
    }
    starts_.assign(program_.actions.size(), nullptr);
    ends_.assign(program_.actions.size(), nullptr);
    for (size_t i = 0; i < program_.actions.size(); ++i) {
      if (!program_.actions[i].recorded()) continue;
      EVSIM_CUDA_CHECK(cudaEventCreate(&starts_[i]));
      EVSIM_CUDA_CHECK(cudaEventCreate(&ends_[i]));
    }
    EVSIM_CUDA_CHECK(cudaDeviceSynchronize());  // kernels' inputs are filled before timing
  }

  ~CudaRankExecutor() override {
    static_cast<void>(cudaDeviceSynchronize());
    p2p_.reset();  // communicators before the streams and the MPI communicators they used
    bucket_comms_.clear();
    comms_.clear();
    kernels_.clear();
    buffers_.clear();
    for (cudaEvent_t e : starts_) {
      if (e) static_cast<void>(cudaEventDestroy(e));
    }
    for (cudaEvent_t e : ends_) {
      if (e) static_cast<void>(cudaEventDestroy(e));
    }
    static_cast<void>(cudaEventDestroy(reference_));
    static_cast<void>(cudaEventDestroy(done_));
    static_cast<void>(cudaStreamDestroy(compute_));
    static_cast<void>(cudaStreamDestroy(bucket_));
    for (MPI_Comm& comm : mpi_comms_) {
      if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);  // teardown: errors ignored
    }
  }

  std::string describe() const override {
    cudaDeviceProp props{};
    EVSIM_CUDA_CHECK(cudaGetDeviceProperties(&props, device_));
    const auto fused = std::count(received_early_.begin(), received_early_.end(), true);
    return fmt::format("cuda, device {} ({}), {} fused send/recv pair(s)", device_, props.name,
                       fused);
  }

  double timeErrorUs() const override { return error_us_; }

  void runIteration(std::vector<ActionTime>& times) override {
    // Both streams are idle here (the previous iteration synchronised them): the reference event
    // completes as soon as it is recorded.
    ReferenceWindow window;
    window.before_us = steadyNowUs();
    EVSIM_CUDA_CHECK(cudaEventRecord(reference_, compute_));
    for (;;) {
      cudaError_t status = cudaEventQuery(reference_);
      if (status == cudaSuccess) break;
      if (status != cudaErrorNotReady) EVSIM_CUDA_CHECK(status);
    }
    window.after_us = steadyNowUs();

    const std::vector<Action>& actions = program_.actions;
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      switch (a.kind) {
        case ActionKind::kCompute:
          EVSIM_CUDA_CHECK(cudaEventRecord(starts_[i], compute_));
          kernels_.at(a.event)->run();
          EVSIM_CUDA_CHECK(cudaEventRecord(ends_[i], compute_));
          break;
        case ActionKind::kCollective: {
          NcclComm& comm = *comms_.at(static_cast<size_t>(a.group));
          EVSIM_CUDA_CHECK(cudaEventRecord(starts_[i], compute_));
          enqueueCollective(a, comm, compute_);
          EVSIM_CUDA_CHECK(cudaEventRecord(ends_[i], compute_));
          comm.waitEvent(ends_[i], std::string(a.name));
          break;
        }
        case ActionKind::kSend: {
          EVSIM_CUDA_CHECK(cudaEventRecord(starts_[i], compute_));
          if (fused_recv_[i] != kNone) {
            // Megatron's send_*_recv_*: both directions in one group, so neither side waits for
            // the other's send to finish first.
            EVSIM_NCCL_CHECK(ncclGroupStart());
            enqueueP2P(a);
            enqueueP2P(actions[fused_recv_[i]]);
            EVSIM_NCCL_CHECK(ncclGroupEnd());
          } else {
            enqueueP2P(a);
          }
          p2p_->waitEnqueued("ncclSend");
          EVSIM_CUDA_CHECK(cudaEventRecord(ends_[i], compute_));
          p2p_->waitEvent(ends_[i], std::string(a.name));
          break;
        }
        case ActionKind::kRecv:
          if (received_early_[i]) break;  // ran in its send's group (a receive is not an event)
          enqueueP2P(a);
          p2p_->waitEnqueued("ncclRecv");
          EVSIM_CUDA_CHECK(cudaEventRecord(done_, compute_));
          p2p_->waitEvent(done_, "ncclRecv");
          break;
        case ActionKind::kRingExchange: {
          NcclComm& comm = *comms_.at(static_cast<size_t>(a.group));
          EVSIM_CUDA_CHECK(cudaEventRecord(starts_[i], compute_));
          enqueueRingExchange(a, comm);
          EVSIM_CUDA_CHECK(cudaEventRecord(ends_[i], compute_));
          comm.waitEvent(ends_[i], std::string(a.name));
          break;
        }
        case ActionKind::kBucketStart: {
          // The bucket starts once the op that completes it has run (on the compute stream) and
          // the previous bucket is done (stream order on the bucket stream).
          NcclComm& comm = *bucket_comms_.at(a.group);
          EVSIM_CUDA_CHECK(cudaEventRecord(done_, compute_));
          EVSIM_CUDA_CHECK(cudaStreamWaitEvent(bucket_, done_, 0));
          EVSIM_CUDA_CHECK(cudaEventRecord(starts_[i], bucket_));
          enqueueCollective(a, comm, bucket_);
          EVSIM_CUDA_CHECK(cudaEventRecord(ends_[i], bucket_));
          break;
        }
        case ActionKind::kBucketWait:
          EVSIM_CUDA_CHECK(cudaEventRecord(done_, bucket_));
          for (auto& [group, comm] : bucket_comms_) comm->waitEvent(done_, "gradient buckets");
          EVSIM_CUDA_CHECK(cudaStreamWaitEvent(compute_, done_, 0));
          break;
      }
    }
    EVSIM_CUDA_CHECK(cudaStreamSynchronize(bucket_));
    EVSIM_CUDA_CHECK(cudaStreamSynchronize(compute_));

    std::vector<GpuElapsed> elapsed(actions.size());
    std::vector<bool> recorded(actions.size(), false);
    for (size_t i = 0; i < actions.size(); ++i) {
      if (!actions[i].recorded()) continue;
      recorded[i] = true;
      float start_ms = 0, end_ms = 0;
      EVSIM_CUDA_CHECK(cudaEventElapsedTime(&start_ms, reference_, starts_[i]));
      EVSIM_CUDA_CHECK(cudaEventElapsedTime(&end_ms, reference_, ends_[i]));
      elapsed[i] = GpuElapsed{start_ms, end_ms};
    }
    ResolvedTimes resolved = resolveGpuTimes(window, elapsed, recorded);
    times = std::move(resolved.times);
    error_us_ = std::max(error_us_, resolved.error_us);
  }

 private:
  NcclCollectiveBuffers& buffersFor(int event_index) {
    auto it = buffers_.find(event_index);
    if (it != buffers_.end()) return it->second;
    const Event& event = plan_.events[event_index].event;
    NcclCollectiveBuffers b = makeNcclBuffers(event, event.placement.group_size);
    return buffers_.emplace(event_index, std::move(b)).first->second;
  }

  void enqueueCollective(const Action& a, NcclComm& comm, cudaStream_t stream) {
    enqueueNcclCollective(plan_.events[a.event].event, buffersFor(a.event), comm.get(), stream);
    comm.waitEnqueued(std::string(a.name));
  }

  // The CP ring step: send to the next member of the group, receive from the previous, in one
  // NCCL group so that neither waits for the other.
  void enqueueRingExchange(const Action& a, NcclComm& comm) {
    const RingPeers peers = ringPeers(program_, a.group);
    NcclCollectiveBuffers& b = buffersFor(a.event);
    EVSIM_NCCL_CHECK(ncclGroupStart());
    EVSIM_NCCL_CHECK(ncclSend(b.send->get(), b.elements, b.type, peers.next, comm.get(), compute_));
    EVSIM_NCCL_CHECK(
        ncclRecv(b.recv->get(), b.elements, b.type, peers.previous, comm.get(), compute_));
    EVSIM_NCCL_CHECK(ncclGroupEnd());
    comm.waitEnqueued(std::string(a.name));
  }

  void enqueueP2P(const Action& a) {
    EVSIM_CHECK(p2p_ != nullptr, "P2P action without a pipeline (P = 1)");
    NcclCollectiveBuffers& b = buffersFor(a.event);
    const int peer = static_cast<int>(a.peer);
    if (a.kind == ActionKind::kSend) {
      EVSIM_NCCL_CHECK(ncclSend(b.send->get(), b.elements, b.type, peer, p2p_->get(), compute_));
    } else {
      EVSIM_NCCL_CHECK(ncclRecv(b.recv->get(), b.elements, b.type, peer, p2p_->get(), compute_));
    }
  }

  const IterationPlan& plan_;
  const RankProgram& program_;
  static constexpr size_t kNone = static_cast<size_t>(-1);
  std::vector<size_t> fused_recv_;    // by send action: the receive run in its group, or kNone
  std::vector<bool> received_early_;  // by receive action: run in an earlier send's group
  int device_ = 0;
  cudaStream_t compute_ = nullptr, bucket_ = nullptr;
  cudaEvent_t reference_ = nullptr;
  cudaEvent_t done_ = nullptr;                    // scratch: the host waits for it, never timed
  std::vector<MPI_Comm> mpi_comms_;               // by program group
  std::vector<std::unique_ptr<NcclComm>> comms_;  // by program group
  std::map<int, std::unique_ptr<NcclComm>> bucket_comms_;  // by program group, bucket groups only
  std::unique_ptr<NcclComm> p2p_;                          // world, when P > 1
  std::map<int, std::unique_ptr<ComputeKernel>> kernels_;  // by event
  std::map<int, NcclCollectiveBuffers> buffers_;           // by event
  std::vector<cudaEvent_t> starts_, ends_;                 // by action, recorded ones only
  double error_us_ = 0;
};

}  // namespace

std::unique_ptr<RankExecutor> makeCudaRankExecutor(const IterationPlan& plan,
                                                   const RankProgram& program,
                                                   const CudaExecutorOptions& options) {
  return std::make_unique<CudaRankExecutor>(plan, program, options);
}

}  // namespace evsim
