#include "runner/eventrun_executor.h"

#include <algorithm>
#include <thread>

#include "common/error.h"
#include "mpi/mpi_check.h"
#include "mpi/mpi_collectives.h"
#include "mpi/mpi_wait.h"

namespace evsim {

namespace {

// Between two MPI_Test calls of a sleeping wait: short against the events eventrun times
// (milliseconds on the CPU), long enough that the scheduler runs another rank meanwhile.
constexpr std::chrono::microseconds kSleepPoll{10};
// What a rank waits for in a stall message (mpi/mpi_wait.h).
constexpr std::string_view kWaitWhat = "a transfer or collective of this rank's program";

}  // namespace

int64_t mpiTagUpperBound() {
  void* tag_ub = nullptr;
  int has_tag_ub = 0;
  EVSIM_MPI_CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &has_tag_ub));
  return has_tag_ub ? *static_cast<int*>(tag_ub) : 32767;  // 32767: the least MPI allows
}

double steadyNowUs() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

CpuRankExecutor::CpuRankExecutor(const IterationPlan& plan, const RankProgram& program,
                                 WaitMode wait, uint64_t seed)
    : plan_(plan), program_(program), wait_mode_(wait) {
  // eventrun_main checked the tags against MPI_TAG_UB with the other input errors.
  EVSIM_CHECK(p2pTagBound(plan_) - 1 <= mpiTagUpperBound(), "P2P tags up to {} exceed MPI_TAG_UB",
              p2pTagBound(plan_) - 1);
  comms_ = createGroupComms(program_.groups);
  for (const Action& a : program_.actions) {
    if (a.kind == ActionKind::kCompute) {
      if (!kernels_.count(a.event)) {
        kernels_[a.event] = makeCpuKernel(plan_.events[a.event].event, seed + 7919 * a.event);
      }
    } else if (a.kind == ActionKind::kRecv) {
      MpiCollectiveBuffers b = bufferFor(a.event);  // a copy: every receive has its own buffer
      recv_buffers_.push_back(std::move(b));
    } else if (a.event >= 0) {
      bufferFor(a.event, a.kind == ActionKind::kBucketStart);
    }
  }
  recv_requests_.assign(recv_buffers_.size(), MPI_REQUEST_NULL);
}

CpuRankExecutor::~CpuRankExecutor() {
  for (MPI_Comm& comm : comms_) {
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);  // teardown: errors ignored
  }
}

MpiCollectiveBuffers& CpuRankExecutor::bufferFor(int event_index, bool in_flight) {
  auto it = buffers_.find({event_index, in_flight});
  if (it != buffers_.end()) return it->second;
  const Event& event = plan_.events[event_index].event;
  EVSIM_CHECK(isCommunication(event.kind), "'{}' is not a communication event", event.signature());
  MpiCollectiveBuffers b = makeMpiBuffers(event, event.placement.group_size);
  return buffers_.emplace(std::make_pair(event_index, in_flight), std::move(b)).first->second;
}

void CpuRankExecutor::runCollective(const Action& action, MPI_Request* request) {
  const Event& event = plan_.events[action.event].event;
  // A bucket in flight must not share its buffers with a blocking collective of the same event
  // (MPI forbids touching a buffer of a pending non-blocking operation).
  MpiCollectiveBuffers& b = bufferFor(action.event, /*in_flight=*/request != nullptr);
  runMpiCollective(event, b, comms_.at(static_cast<size_t>(action.group)), request);
}

void CpuRankExecutor::ringExchange(const Action& action) {
  const RingPeers peers = ringPeers(program_, action.group);
  MpiCollectiveBuffers& b = bufferFor(action.event);
  EVSIM_MPI_CHECK(MPI_Sendrecv(b.send.data(), static_cast<int>(b.elements), b.type, peers.next,
                               /*sendtag=*/0, b.recv.data(), static_cast<int>(b.elements), b.type,
                               peers.previous, /*recvtag=*/0,
                               comms_.at(static_cast<size_t>(action.group)), MPI_STATUS_IGNORE));
}

void CpuRankExecutor::wait(MPI_Request& request) {
  if (wait_mode_ == WaitMode::kSpin) {
    CommWatch watch(kWaitWhat);
    EVSIM_MPI_CHECK(MPI_Wait(&request, MPI_STATUS_IGNORE));
    return;
  }
  waitRequest(request, kWaitWhat, WaitStyle::kSleep, kSleepPoll);
}

void CpuRankExecutor::startNextBucket(std::vector<ActionTime>& times) {
  if (bucket_request_ != MPI_REQUEST_NULL || bucket_queue_.empty()) return;
  bucket_action_ = bucket_queue_.front();
  bucket_queue_.pop_front();
  times[bucket_action_].start_us = steadyNowUs();
  runCollective(program_.actions[bucket_action_], &bucket_request_);
}

void CpuRankExecutor::pollPending(std::vector<ActionTime>& times) {
  if (bucket_request_ != MPI_REQUEST_NULL) {
    int done = 0;
    EVSIM_MPI_CHECK(MPI_Test(&bucket_request_, &done, MPI_STATUS_IGNORE));
    if (done) {
      times[bucket_action_].end_us = steadyNowUs();
      startNextBucket(times);
    }
  }
  if (!recv_requests_.empty()) {
    int completed = 0;
    std::vector<int> indices(recv_requests_.size());
    EVSIM_MPI_CHECK(MPI_Testsome(static_cast<int>(recv_requests_.size()), recv_requests_.data(),
                                 &completed, indices.data(), MPI_STATUSES_IGNORE));
  }
}

void CpuRankExecutor::runIteration(std::vector<ActionTime>& times) {
  times.assign(program_.actions.size(), ActionTime{});
  // Post every receive of the iteration first (see the header).
  size_t next_recv = 0;
  for (const Action& a : program_.actions) {
    if (a.kind != ActionKind::kRecv) continue;
    MpiCollectiveBuffers& b = recv_buffers_[next_recv];
    EVSIM_MPI_CHECK(MPI_Irecv(b.recv.data(), static_cast<int>(b.elements), b.type,
                              static_cast<int>(a.peer), a.tag, MPI_COMM_WORLD,
                              &recv_requests_[next_recv]));
    ++next_recv;
  }
  next_recv = 0;
  for (size_t i = 0; i < program_.actions.size(); ++i) {
    const Action& a = program_.actions[i];
    const double start = steadyNowUs();
    switch (a.kind) {
      case ActionKind::kCompute: {
        ComputeKernel& kernel = *kernels_.at(a.event);
        kernel.run();
        kernel.synchronize();
        break;
      }
      case ActionKind::kCollective: {
        CommWatch watch(kWaitWhat);
        runCollective(a, nullptr);
        break;
      }
      case ActionKind::kSend: {
        MpiCollectiveBuffers& b = bufferFor(a.event);
        MPI_Request request = MPI_REQUEST_NULL;
        EVSIM_MPI_CHECK(MPI_Isend(b.send.data(), static_cast<int>(b.elements), b.type,
                                  static_cast<int>(a.peer), a.tag, MPI_COMM_WORLD, &request));
        wait(request);
        break;
      }
      case ActionKind::kRecv:
        wait(recv_requests_[next_recv++]);
        break;
      case ActionKind::kBucketStart:
        bucket_queue_.push_back(i);
        startNextBucket(times);
        break;
      case ActionKind::kRingExchange: {
        CommWatch watch(kWaitWhat);
        ringExchange(a);
        break;
      }
      case ActionKind::kBucketWait:
        while (bucket_request_ != MPI_REQUEST_NULL) {
          wait(bucket_request_);
          times[bucket_action_].end_us = steadyNowUs();
          startNextBucket(times);
        }
        break;
    }
    if (a.kind != ActionKind::kBucketStart) times[i] = ActionTime{start, steadyNowUs()};
    pollPending(times);
  }
}

std::string CpuRankExecutor::describe() const {
  return wait_mode_ == WaitMode::kSpin ? "cpu, wait spin" : "cpu, wait sleep";
}

std::vector<MPI_Comm> createGroupComms(const std::vector<std::vector<int64_t>>& groups) {
  std::vector<MPI_Comm> comms;
  CommWatch watch("creating the program's communicators");
  for (const std::vector<int64_t>& members : groups) {
    MPI_Group world_group = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
    EVSIM_MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world_group));
    std::vector<int> ranks(members.begin(), members.end());
    EVSIM_MPI_CHECK(
        MPI_Group_incl(world_group, static_cast<int>(ranks.size()), ranks.data(), &group));
    MPI_Comm comm = MPI_COMM_NULL;
    EVSIM_MPI_CHECK(MPI_Comm_create_group(MPI_COMM_WORLD, group, /*tag=*/0, &comm));
    EVSIM_MPI_CHECK(MPI_Group_free(&group));
    EVSIM_MPI_CHECK(MPI_Group_free(&world_group));
    comms.push_back(comm);
  }
  return comms;
}

ClockOffset estimateClockOffset(MPI_Comm comm, int rounds) {
  int rank = 0, size = 0;
  EVSIM_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  EVSIM_MPI_CHECK(MPI_Comm_size(comm, &size));
  ClockOffset mine;
  for (int peer = 1; peer < size; ++peer) {
    if (rank != 0 && rank != peer) continue;
    CommWatch watch("the clock alignment ping-pong with rank 0");
    double best_rtt = -1, best_offset = 0;
    for (int i = 0; i < rounds; ++i) {
      if (rank == 0) {
        double t0 = steadyNowUs(), tr = 0;
        EVSIM_MPI_CHECK(MPI_Send(&t0, 1, MPI_DOUBLE, peer, i, comm));
        EVSIM_MPI_CHECK(MPI_Recv(&tr, 1, MPI_DOUBLE, peer, i, comm, MPI_STATUS_IGNORE));
        double t1 = steadyNowUs();
        if (best_rtt < 0 || t1 - t0 < best_rtt) {
          best_rtt = t1 - t0;
          best_offset = tr - (t0 + t1) / 2;
        }
      } else {
        double t0 = 0;
        EVSIM_MPI_CHECK(MPI_Recv(&t0, 1, MPI_DOUBLE, 0, i, comm, MPI_STATUS_IGNORE));
        double tr = steadyNowUs();
        EVSIM_MPI_CHECK(MPI_Send(&tr, 1, MPI_DOUBLE, 0, i, comm));
      }
    }
    double result[2] = {best_offset, best_rtt / 2};
    if (rank == 0) {
      EVSIM_MPI_CHECK(MPI_Send(result, 2, MPI_DOUBLE, peer, rounds, comm));
    } else {
      EVSIM_MPI_CHECK(MPI_Recv(result, 2, MPI_DOUBLE, 0, rounds, comm, MPI_STATUS_IGNORE));
      mine = ClockOffset{result[0], result[1]};
    }
  }
  return mine;
}

}  // namespace evsim
