// The CUDA platform: compute events through kernels/cuda, timed by the span of their kernels as
// CUPTI activity records report them (CUDA events behind a hold kernel when CUPTI is unavailable
// or --compute-timer cuda-events asks for them); communication through NCCL on its own stream,
// timed with CUDA events, each repetition after an MPI barrier of the group. Rank programs run
// through runner/'s CUDA executor (runner/executor_factory.h).
#include "platform/cuda/cuda_device.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_ops.h"
#include "mpi/cuda/cuda_buffers.h"
#include "mpi/cuda/nccl_check.h"
#include "mpi/cuda/nccl_collectives.h"
#include "mpi/cuda/nccl_comm.h"
#include "mpi/mpi_check.h"
#include "mpi/mpi_env.h"
#include "mpi/mpi_wait.h"
#include "platform/cuda/cupti_tracer.h"

namespace evsim {

namespace {

// Two ints in pinned, device-mapped host memory: the hold kernel's release flag and its timeout
// report (kernels/cuda/hold.cu).
class HoldFlags {
 public:
  HoldFlags() {
    EVSIM_CUDA_CHECK(
        cudaHostAlloc(&flags_, 2 * sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
    EVSIM_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_flags_), flags_, 0));
  }
  ~HoldFlags() { static_cast<void>(cudaFreeHost(flags_)); }
  HoldFlags(const HoldFlags&) = delete;
  HoldFlags& operator=(const HoldFlags&) = delete;

  void arm() {
    flag(0) = 0;
    flag(1) = 0;
  }
  void releaseNow() { flag(0) = 1; }
  bool timedOutNow() { return flag(1) != 0; }
  const volatile int* release() const { return device_flags_; }
  int* timedOut() const { return device_flags_ + 1; }

 private:
  volatile int& flag(int i) { return const_cast<volatile int*>(flags_)[i]; }
  int* flags_ = nullptr;
  int* device_flags_ = nullptr;
};

std::string versionText(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

class CudaDevice : public Device {
 public:
  explicit CudaDevice(const CudaDeviceOptions& options) : options_(options) {
    int count = cudaDeviceCount();
    EVSIM_CHECK(count > 0, "CUDA backend without a visible device");
    device_ = options.local_rank % count;
    EVSIM_CUDA_CHECK(cudaSetDevice(device_));
    EVSIM_CUDA_CHECK(cudaStreamCreateWithFlags(&compute_stream_, cudaStreamNonBlocking));
    EVSIM_CUDA_CHECK(cudaStreamCreateWithFlags(&comm_stream_, cudaStreamNonBlocking));
    EVSIM_CUDA_CHECK(cudaEventCreate(&start_));
    EVSIM_CUDA_CHECK(cudaEventCreate(&stop_));
    if (options.compute_timer != CudaComputeTimer::kCupti) return;
    try {
      tracer_ = CuptiTracer::create();
      compute_stream_id_ = CuptiTracer::streamId(compute_stream_);
      span_timer_ = std::make_unique<KernelSpanTimer>(*tracer_);
    } catch (const Error& e) {
      tracer_.reset();
      std::fprintf(stderr,
                   "[eventprof] CUPTI unavailable (%s): compute events are timed with CUDA "
                   "events instead\n",
                   e.what());
    }
  }

  ~CudaDevice() override {
    comms_.clear();  // communicators before the streams they used
    span_timer_.reset();
    tracer_.reset();
    static_cast<void>(cudaEventDestroy(start_));
    static_cast<void>(cudaEventDestroy(stop_));
    static_cast<void>(cudaStreamDestroy(compute_stream_));
    static_cast<void>(cudaStreamDestroy(comm_stream_));
  }

  std::string platform() const override { return "cuda"; }

  std::string deviceName() const override {
    cudaDeviceProp props{};
    EVSIM_CUDA_CHECK(cudaGetDeviceProperties(&props, device_));
    return props.name;
  }

  double maxClockMhz() const override {
    int khz = 0;
    EVSIM_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device_));
    return khz / 1000.0;
  }

  std::map<std::string, std::string> versions() const override {
    std::map<std::string, std::string> out;
    int runtime = 0, driver = 0, nccl = 0;
    EVSIM_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
    EVSIM_CUDA_CHECK(cudaDriverGetVersion(&driver));
    EVSIM_NCCL_CHECK(ncclGetVersion(&nccl));
    out["cuda"] = versionText(runtime);
    out["cuda_driver"] = versionText(driver);
    out["nccl"] = fmt::format("{}.{}.{}", nccl / 10000, (nccl % 10000) / 100, nccl % 100);
    // Present only when compute events were timed by CUPTI (absent: CUDA-event fallback).
    if (tracer_) out["cupti"] = CuptiTracer::version();
    return out;
  }

  std::vector<double> timeCompute(const Event& event, int warmup, int repeats) override {
    std::unique_ptr<ComputeKernel> kernel = makeCudaKernel(event, compute_stream_, options_.seed);
    const OpFamily family = computeOpKind(event, "CUDA").family;
    // The host's Adam (optimizer offload) runs on the CPU: the host clock times it.
    if (family == OpFamily::kHostAdam) return timeOnHost(*kernel, warmup, repeats);
    // An offload copy is a DMA with no kernel for CUPTI to span: CUDA events on its stream.
    if (family == OpFamily::kHostCopy) return timeWithEvents(*kernel, warmup, repeats);
    auto run = [&] { kernel->run(); };
    auto sync = [&] { kernel->synchronize(); };
    if (span_timer_) {
      EnqueueGate gate{[&] { holdStream(); }, [&] { releaseStream(); }};
      std::vector<double> spans =
          span_timer_->time(compute_stream_id_, warmup, repeats, run, sync, gate);
      checkHoldKept(repeats);
      return spans;
    }
    return timeWithEvents(*kernel, warmup, repeats);
  }

  std::string timingNote() const override {
    if (host_enqueue_us_.empty()) return "";
    std::vector<double> v = host_enqueue_us_;
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return fmt::format(
        "compute timed with CUDA events; host time to enqueue one repetition (this executor's "
        "issue cost per op): median {:.2f} us over {} events",
        v[v.size() / 2], v.size());
  }

  std::vector<double> timeP2P(const Event& event, const CommGroup& group, int warmup,
                              int repeats) override {
    EVSIM_CHECK(group.size == 2, "p2p over {} ranks", group.size);
    auto [type, count] = ncclElements(event, event.message_bytes);
    DeviceBuffer buffer(static_cast<size_t>(event.message_bytes));
    const bool sender = group.rank == 0;
    return timeNccl(group, warmup, repeats, sender ? "ncclSend" : "ncclRecv", [&](ncclComm_t c) {
      if (sender) {
        EVSIM_NCCL_CHECK(ncclSend(buffer.get(), count, type, 1, c, comm_stream_));
      } else {
        EVSIM_NCCL_CHECK(ncclRecv(buffer.get(), count, type, 0, c, comm_stream_));
      }
    });
  }

  std::vector<double> timeCollective(const Event& event, const CommGroup& group, int warmup,
                                     int repeats) override {
    NcclCollectiveBuffers buffers = makeNcclBuffers(event, group.size);
    return timeNccl(group, warmup, repeats, ncclCallName(event.kind),
                    [&](ncclComm_t c) { enqueueNcclCollective(event, buffers, c, comm_stream_); });
  }

  // The kernel on the compute stream, alone and then while the transfer runs back to back on the
  // comm stream (NCCL's kernels beside it, as a DP bucket beside the backward). Both timed with
  // CUDA events around each repetition (the same way, so they compare; the events add a few us
  // to each, which is why the kernels are large). The transfer loop is sized from one transfer's
  // time to outlast the kernels twice over, the same count on every member; a beside-sample is
  // kept only when its kernel ended before the last transfer did.
  OverlapSamples timeComputeBeside(const Event& compute, const Event& transfer,
                                   const CommGroup& group, int warmup, int repeats) override {
    const OpFamily family = computeOpKind(compute, "CUDA").family;
    EVSIM_CHECK(family != OpFamily::kHostAdam && family != OpFamily::kHostCopy,
                "--overlap: '{}' is not a GPU kernel", compute.signature());
    std::unique_ptr<ComputeKernel> kernel = makeCudaKernel(compute, compute_stream_, options_.seed);
    NcclCollectiveBuffers buffers = makeNcclBuffers(transfer, group.size);
    const char* call = ncclCallName(transfer.kind);
    auto enqueue = [&](ncclComm_t c) { enqueueNcclCollective(transfer, buffers, c, comm_stream_); };
    const int runs = warmup + repeats;
    std::vector<cudaEvent_t> marks(static_cast<size_t>(runs) + 1);
    for (cudaEvent_t& e : marks) EVSIM_CUDA_CHECK(cudaEventCreate(&e));
    OverlapSamples out;
    try {
      NcclComm& nccl = communicator(group);
      auto timeRuns = [&](cudaEvent_t transfers_end) {
        for (int i = 0; i < runs; ++i) {
          EVSIM_CUDA_CHECK(cudaEventRecord(marks[i], compute_stream_));
          kernel->run();
        }
        EVSIM_CUDA_CHECK(cudaEventRecord(marks[runs], compute_stream_));
        kernel->synchronize();
        if (transfers_end != nullptr) nccl.waitEvent(transfers_end, call);
        std::vector<double> samples;
        for (int i = warmup; i < runs; ++i) {
          float ms = 0, left_ms = 0;
          EVSIM_CUDA_CHECK(cudaEventElapsedTime(&ms, marks[i], marks[i + 1]));
          if (transfers_end != nullptr) {
            EVSIM_CUDA_CHECK(cudaEventElapsedTime(&left_ms, marks[i + 1], transfers_end));
            if (left_ms < 0) continue;  // ended after the last transfer: not wholly beside it
          }
          samples.push_back(double(ms) * 1000.0);
        }
        return samples;
      };
      out.alone_us = timeRuns(nullptr);
      std::vector<double> alone_sorted = out.alone_us;
      std::sort(alone_sorted.begin(), alone_sorted.end());
      const double kernel_us = alone_sorted[alone_sorted.size() / 2];
      std::vector<double> transfer_us = timeNccl(group, 1, 3, call, enqueue);
      std::sort(transfer_us.begin(), transfer_us.end());
      int loops = static_cast<int>(std::ceil(2.0 * runs * kernel_us / transfer_us[1])) + 2;
      EVSIM_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &loops, 1, MPI_INT, MPI_MAX, group.comm));
      {
        CommWatch watch("the barrier before a kernel beside a transfer");
        EVSIM_MPI_CHECK(MPI_Barrier(group.comm));
      }
      EVSIM_CUDA_CHECK(cudaEventRecord(start_, comm_stream_));
      for (int i = 0; i < loops; ++i) enqueue(nccl.get());
      nccl.waitEnqueued(call);
      EVSIM_CUDA_CHECK(cudaEventRecord(stop_, comm_stream_));
      // The kernels start once the transfers have (the first is enqueued before them).
      EVSIM_CUDA_CHECK(cudaStreamWaitEvent(compute_stream_, start_, 0));
      out.beside_us = timeRuns(stop_);
    } catch (...) {
      for (cudaEvent_t e : marks) static_cast<void>(cudaEventDestroy(e));
      throw;
    }
    for (cudaEvent_t e : marks) static_cast<void>(cudaEventDestroy(e));
    EVSIM_CHECK(!out.beside_us.empty(), "--overlap: no run of '{}' ended inside the transfers",
                compute.signature());
    return out;
  }

 private:
  NcclComm& communicator(const CommGroup& group) {
    auto it = comms_.find(group.world_ranks);
    if (it == comms_.end()) {
      it = comms_
               .emplace(group.world_ranks,
                        std::make_unique<NcclComm>(group, options_.comm_timeout_s))
               .first;
    }
    return *it->second;
  }

  template <typename Enqueue>
  std::vector<double> timeNccl(const CommGroup& group, int warmup, int repeats, const char* what,
                               Enqueue&& enqueue) {
    NcclComm& nccl = communicator(group);
    std::vector<double> samples;
    for (int i = 0; i < warmup + repeats; ++i) {
      {
        CommWatch watch("the barrier before a NCCL measurement");
        EVSIM_MPI_CHECK(MPI_Barrier(group.comm));  // the stream is idle: the last wait finished
      }
      EVSIM_CUDA_CHECK(cudaEventRecord(start_, comm_stream_));
      enqueue(nccl.get());
      nccl.waitEnqueued(what);
      EVSIM_CUDA_CHECK(cudaEventRecord(stop_, comm_stream_));
      nccl.waitEvent(stop_, what);
      float ms = 0;
      EVSIM_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
      if (i >= warmup) samples.push_back(double(ms) * 1000.0);
    }
    return samples;
  }

  // A host-side op (the host's Adam of optimizer offload): the host clock around each run.
  static std::vector<double> timeOnHost(ComputeKernel& kernel, int warmup, int repeats) {
    for (int i = 0; i < warmup; ++i) kernel.run();
    std::vector<double> samples;
    for (int i = 0; i < repeats; ++i) {
      const auto start = std::chrono::steady_clock::now();
      kernel.run();
      samples.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
              .count());
    }
    return samples;
  }

  // CUDA events around groups of back-to-back repetitions, all enqueued while a hold kernel keeps
  // the stream waiting: each sample is a group's device time over its size, not the host's time to
  // launch it (longer for kernels of a few microseconds). Events only between groups: an event
  // between every two repetitions stops the device from preparing the next launch while the last
  // runs, adding 3-5 us to each (measured on an H100). Also records the host's enqueue time per
  // repetition (timingNote).
  std::vector<double> timeWithEvents(ComputeKernel& kernel, int warmup, int repeats) {
    for (int i = 0; i < warmup; ++i) kernel.run();
    kernel.synchronize();
    const int group = std::max(1, repeats / kEventGroups);
    const int groups = (repeats + group - 1) / group;
    std::vector<cudaEvent_t> marks(static_cast<size_t>(groups) + 1);
    for (cudaEvent_t& e : marks) EVSIM_CUDA_CHECK(cudaEventCreate(&e));
    std::vector<double> samples;
    try {
      holdStream();
      const auto enqueue_start = std::chrono::steady_clock::now();
      EVSIM_CUDA_CHECK(cudaEventRecord(marks[0], compute_stream_));
      for (int i = 0; i < repeats; ++i) {
        kernel.run();
        if ((i + 1) % group == 0 || i + 1 == repeats) {
          EVSIM_CUDA_CHECK(cudaEventRecord(marks[(i + group) / group], compute_stream_));
        }
      }
      const std::chrono::duration<double, std::micro> enqueue =
          std::chrono::steady_clock::now() - enqueue_start;
      releaseStream();
      kernel.synchronize();
      checkHoldKept(repeats);
      host_enqueue_us_.push_back(enqueue.count() / repeats);
      for (int g = 0; g < groups; ++g) {
        float ms = 0;
        EVSIM_CUDA_CHECK(cudaEventElapsedTime(&ms, marks[g], marks[g + 1]));
        const int size = std::min(group, repeats - g * group);
        samples.push_back(double(ms) * 1000.0 / size);
      }
    } catch (...) {
      releaseStream();
      for (cudaEvent_t e : marks) static_cast<void>(cudaEventDestroy(e));
      throw;
    }
    for (cudaEvent_t e : marks) static_cast<void>(cudaEventDestroy(e));
    return samples;
  }

  void holdStream() {
    hold_.arm();
    cuda::holdStream(hold_.release(), kHoldTimeoutS, hold_.timedOut(), compute_stream_);
  }
  void releaseStream() { hold_.releaseNow(); }
  // After the stream synchronized: a hold that timed out let repetitions start before all were
  // enqueued, so their times may include the host's launch gaps.
  void checkHoldKept(int repeats) {
    EVSIM_CHECK(!hold_.timedOutNow(),
                "compute timing: enqueueing {} repetitions took over {} s (the launch queue is "
                "full?): time fewer --repeats",
                repeats, kHoldTimeoutS);
  }

  static constexpr double kHoldTimeoutS = 10;
  static constexpr int kEventGroups = 5;  // samples from the CUDA-event timer (enough for a spread)

  CudaDeviceOptions options_;
  HoldFlags hold_;
  std::vector<double> host_enqueue_us_;
  int device_ = 0;
  cudaStream_t compute_stream_ = nullptr;
  cudaStream_t comm_stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  std::unique_ptr<CuptiTracer> tracer_;
  uint32_t compute_stream_id_ = 0;
  std::unique_ptr<KernelSpanTimer> span_timer_;
  std::map<std::vector<int>, std::unique_ptr<NcclComm>> comms_;
};

}  // namespace

std::unique_ptr<Device> makeCudaDevice(const CudaDeviceOptions& options) {
  return std::make_unique<CudaDevice>(options);
}

}  // namespace evsim
