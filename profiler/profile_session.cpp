#include "profiler/profile_session.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <new>

#include "common/strings.h"
#include "mpi/mpi_check.h"
#include "mpi/mpi_wait.h"
#include "profiler/comm_math.h"
#include "profiler/group_planner.h"
#include "profiler/stats.h"
#include "profiler/work_plan.h"

namespace evsim {

namespace {

// steady_clock ticks in ns; a sample below that is a clock artefact, and a zero time would make an
// invalid profile (times must be > 0), so samples are floored here.
constexpr double kClockFloorUs = 1e-3;

// One measured event as it travels between ranks (fixed size, sent as bytes).
struct WireResult {
  int32_t valid = 0;
  int32_t count = 0;
  double median_us = 0, min_us = 0, max_us = 0, stddev_us = 0;
};

WireResult toWire(const TimingStats& s) {
  return WireResult{1, s.count, s.median_us, s.min_us, s.max_us, s.stddev_us};
}

TimingStats fromWire(const WireResult& w, double scale) {
  return TimingStats{w.median_us * scale, w.min_us * scale, w.max_us * scale, w.stddev_us * scale,
                     w.count};
}

std::vector<double> floored(std::vector<double> samples) {
  for (double& s : samples) s = std::max(s, kClockFloorUs);
  return samples;
}

// Runs `fn` on rank 0; an InputError there becomes a CollectiveInputError on every rank.
template <typename Fn>
void onRootShared(int rank, Fn&& fn) {
  std::string error;
  if (rank == 0) {
    try {
      fn();
    } catch (const InputError& e) {
      error = e.what();
    }
  }
  error = broadcastString(error, 0, MPI_COMM_WORLD);
  if (!error.empty()) EVSIM_THROW(CollectiveInputError, "{}", error);
}

// Runs one measurement; running out of memory for its buffers names the event ("out of memory"
// alone did not, issue 33).
template <typename F>
std::vector<double> measuring(const Event& event, F&& measure) {
  try {
    return measure();
  } catch (const std::bad_alloc&) {
    EVSIM_THROW(EnvironmentError, "'{}': out of memory for the event's buffers", event.signature());
  }
}

std::vector<std::string> signaturesOf(const std::vector<Event>& events) {
  std::vector<std::string> out;
  for (const Event& e : events) out.push_back(e.signature());
  return out;
}

std::vector<Event> eventsOf(const std::vector<std::string>& signatures) {
  std::vector<Event> out;
  for (const std::string& s : signatures)
    out.push_back(parseEventSignature(s, "rank 0's event list"));
  return out;
}

}  // namespace

struct ProfileSession::Work {
  std::vector<Event> compute;
  std::vector<Event> communication;
  size_t already_measured = 0;            // rank 0 only
  std::vector<std::string> unmeasurable;  // rank 0 only
};

ProfileSession::ProfileSession(const MpiWorld& world, const Topology& topo, Device& device,
                               ProfileOptions options)
    : world_(world), topo_(topo), device_(device), options_(std::move(options)) {
  EVSIM_CHECK(options_.warmup >= 0 && options_.repeats > 0, "warmup {} repeats {}", options_.warmup,
              options_.repeats);
}

ProfileMetadata ProfileSession::collectMetadata() {
  ProfileMetadata m;
  m.devices = gatherStrings(device_.deviceName(), 0, MPI_COMM_WORLD);
  m.backend = device_.platform();
  m.date = utcNow();
  m.world_size = world_.size;
  m.ranks_per_node = topo_.ranksPerNode();
  m.hosts = topo_.node_names;
  m.versions = device_.versions();
  m.versions["mpi"] = mpiLibraryVersion();
  return m;
}

void ProfileSession::save(const ProfileDb& db) const {
  if (world_.rank == 0) db.save(options_.output_path);
}

ProfileSession::Work ProfileSession::prepare(const std::vector<Event>& wanted,
                                             const ProfileMetadata& metadata, ProfileDb& db) {
  WorkPlan plan;
  onRootShared(world_.rank, [&] {
    // An interrupted earlier run (kill -9 during a save) leaves "<output>.tmp.<pid>" behind.
    if (const int stale = ProfileDb::removeStaleTemps(options_.output_path);
        stale > 0 && options_.log != nullptr) {
      fmt::print(options_.log, "[eventprof] removed {} temp file(s) an interrupted run left\n",
                 stale);
    }
    std::optional<ProfileDb> previous;
    const bool exists = std::filesystem::exists(options_.output_path);
    if (options_.resume && exists) {
      previous = ProfileDb::load(options_.output_path);
      checkResumable(previous->metadata, metadata, options_.output_path);
      db = *previous;
    }
    if (options_.log != nullptr && exists != options_.resume) {
      fmt::print(options_.log, "[eventprof] {}\n",
                 exists ? fmt::format("{} exists: starting a new profile (use --resume to keep it)",
                                      options_.output_path)
                        : fmt::format("--resume: {} does not exist yet, starting a new profile",
                                      options_.output_path));
    }
    db.metadata = metadata;
    plan = planWork(wanted, previous ? &*previous : nullptr, topo_, options_.intra_node_only);
    // Refused before any measuring: an event beyond MPI's int count failed as an internal error
    // after hours of measuring (issue 33).
    for (const std::vector<Event>* events : {&plan.compute, &plan.communication}) {
      for (const Event& event : *events) {
        if (std::string why = device_.cannotMeasure(event); !why.empty()) {
          EVSIM_THROW(InputError, "'{}': cannot be measured: {}", event.signature(), why);
        }
      }
    }
    db.save(options_.output_path);  // fails early (exit 1) when the output is unwritable
    if (options_.log == nullptr) return;
    if (!topo_.uniform()) {
      fmt::print(options_.log,
                 "[eventprof] warning: nodes have different rank counts; the "
                 "profile records the largest, {}\n",
                 topo_.ranksPerNode());
    }
    if (previous) {
      fmt::print(options_.log, "[eventprof] resuming {}: {} event(s) already measured\n",
                 options_.output_path, plan.already_measured.size());
    }
    for (const std::string& u : plan.unmeasurable) {
      fmt::print(options_.log, "[eventprof] not measured (--intra-node-only): {}\n", u);
    }
  });
  // Everyone learns the plan from rank 0, which alone read the inputs.
  Work work;
  work.compute = eventsOf(broadcastStrings(signaturesOf(plan.compute), 0, MPI_COMM_WORLD));
  work.communication =
      eventsOf(broadcastStrings(signaturesOf(plan.communication), 0, MPI_COMM_WORLD));
  work.already_measured = plan.already_measured.size();
  work.unmeasurable = plan.unmeasurable;
  return work;
}

ProfileSummary ProfileSession::run(const std::vector<Event>& wanted) {
  auto start = std::chrono::steady_clock::now();
  ProfileMetadata metadata = collectMetadata();
  ProfileDb db;
  Work work = prepare(wanted, metadata, db);

  ProfileSummary summary;
  summary.already_measured = work.already_measured;
  summary.unmeasurable = work.unmeasurable;
  Progress progress(work.compute.size() + work.communication.size(),
                    world_.rank == 0 ? options_.log : nullptr);
  size_t done = 0;
  const std::vector<int> timers = timingRanks();
  summary.devices = static_cast<int>(timers.size());
  measureCompute(work.compute, timers, db, progress, done);
  summary.measured_compute = work.compute.size();
  measureCommunication(work.communication, db, progress, done, summary);
  summary.measured_communication = work.communication.size();

  MPI_Request reduce = MPI_REQUEST_NULL;
  EVSIM_MPI_CHECK(MPI_Ireduce(&busy_s_, &summary.measuring_device_s, 1, MPI_DOUBLE, MPI_SUM, 0,
                              MPI_COMM_WORLD, &reduce));
  waitRequest(reduce, "the sum of measuring time", WaitStyle::kSleep);
  summary.records_in_profile = db.records().size();
  summary.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

std::vector<int> ProfileSession::timingRanks() const {
  // All ranks on GPUs; on a CPU host with more ranks than cores, only as many as there are cores
  // (the others wait without spinning), so no two timed kernels share a core.
  const int timing = world_.local_rank < device_.computeSlots(world_.local_size) ? 1 : 0;
  std::vector<int> timing_flags(static_cast<size_t>(world_.size));
  MPI_Request gather = MPI_REQUEST_NULL;
  EVSIM_MPI_CHECK(MPI_Iallgather(&timing, 1, MPI_INT, timing_flags.data(), 1, MPI_INT,
                                 MPI_COMM_WORLD, &gather));
  waitRequest(gather, "the list of timing ranks", WaitStyle::kSleep);
  std::vector<int> timers;
  for (int r = 0; r < world_.size; ++r) {
    if (timing_flags[r]) timers.push_back(r);
  }
  return timers;
}

void ProfileSession::measureCompute(const std::vector<Event>& events,
                                    const std::vector<int>& timers, ProfileDb& db,
                                    Progress& progress, size_t& done) {
  const size_t ranks = static_cast<size_t>(world_.size);
  const size_t slots = timers.size();
  const auto my_slot = std::find(timers.begin(), timers.end(), world_.rank) - timers.begin();
  // Round r: the k-th timing rank measures event r * slots + k, so every device works at once, and
  // rank 0 saves after each round.
  for (size_t first = 0; first < events.size(); first += slots) {
    const size_t in_round = std::min(slots, events.size() - first);
    progress.starting(done, in_round == 1
                                ? events[first].signature()
                                : fmt::format("{} compute events on {} ranks ({}, ...)", in_round,
                                              in_round, events[first].signature()));
    WireResult mine;
    const size_t index = first + static_cast<size_t>(my_slot);
    if (my_slot < static_cast<std::ptrdiff_t>(slots) && index < events.size()) {
      auto t0 = std::chrono::steady_clock::now();
      std::vector<double> samples = measuring(events[index], [&] {
        return device_.timeCompute(events[index], options_.warmup, options_.repeats);
      });
      busy_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      mine = toWire(computeStats(floored(std::move(samples))));
    }
    // Every rank waits for the whole round (an allgather, not a gather to rank 0): with a gather,
    // a rank with nothing to measure finished all rounds at once (its send completes locally) and
    // then waited in the first communication event for the whole compute phase, which
    // --comm-timeout cut off on healthy runs (issue 33). Now every wait lasts one round: the
    // slowest measurement of the round, plus rank 0 saving the previous one.
    std::vector<WireResult> all(ranks);
    MPI_Request gather = MPI_REQUEST_NULL;
    EVSIM_MPI_CHECK(MPI_Iallgather(&mine, sizeof(WireResult), MPI_BYTE, all.data(),
                                   sizeof(WireResult), MPI_BYTE, MPI_COMM_WORLD, &gather));
    waitRequest(gather, "a compute round's results", WaitStyle::kSleep);
    if (world_.rank == 0) {
      for (size_t k = 0; k < in_round; ++k) {
        const WireResult& result = all[static_cast<size_t>(timers[k])];
        EVSIM_CHECK(result.valid == 1, "rank {} sent no result for '{}'", timers[k],
                    events[first + k].signature());
        ProfileRecord record;
        record.event = events[first + k];
        record.signature = record.event.signature();
        record.time = fromWire(result, 1.0);
        db.put(std::move(record));
      }
      save(db);
    }
    done += in_round;
  }
}

void ProfileSession::measureCommunication(const std::vector<Event>& events, ProfileDb& db,
                                          Progress& progress, size_t& done,
                                          ProfileSummary& summary) {
  for (const Event& event : events) {
    const GroupPlan plan = planEventGroup(topo_, event);  // same answer on every rank
    EVSIM_CHECK(plan.unmeasurable.empty(), "'{}': {}", event.signature(), plan.unmeasurable);
    const Placement& target = event.placement;
    const double scale = ringScaleFactor(event.kind, plan.measured.group_size, target.group_size);
    std::string what = event.signature();
    if (!plan.exact) {
      what += fmt::format(" [measured on group={} nodes={} rpn={}{}]", plan.measured.group_size,
                          plan.measured.nodes, plan.measured.ranks_per_node,
                          plan.scaled(target) ? fmt::format(", scaled x{:.4g}", scale) : "");
    }
    progress.starting(done, what);

    const auto it = std::find(plan.ranks.begin(), plan.ranks.end(), world_.rank);
    const bool member = it != plan.ranks.end();
    MPI_Comm comm = MPI_COMM_NULL;
    {
      CommWatch watch("creating a measurement group's communicator");
      EVSIM_MPI_CHECK(
          MPI_Comm_split(MPI_COMM_WORLD, member ? 0 : MPI_UNDEFINED, world_.rank, &comm));
    }
    WireResult result;
    if (member) {
      CommGroup group{comm, static_cast<int>(it - plan.ranks.begin()),
                      static_cast<int>(plan.ranks.size()), plan.ranks};
      auto t0 = std::chrono::steady_clock::now();
      std::vector<double> samples = measuring(event, [&] {
        return event.kind == EventKind::kP2P
                   ? device_.timeP2P(event, group, options_.warmup, options_.repeats)
                   : device_.timeCollective(event, group, options_.warmup, options_.repeats);
      });
      busy_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      EVSIM_CHECK(samples.size() == static_cast<size_t>(options_.repeats),
                  "{} samples for {} repeats", samples.size(), options_.repeats);
      std::vector<double> all(group.rank == 0 ? samples.size() * group.size : 0);
      MPI_Request gather = MPI_REQUEST_NULL;
      EVSIM_MPI_CHECK(MPI_Igather(samples.data(), options_.repeats, MPI_DOUBLE, all.data(),
                                  options_.repeats, MPI_DOUBLE, 0, comm, &gather));
      waitRequest(gather, fmt::format("the samples of '{}'", event.signature()));
      if (group.rank == 0) {
        std::vector<std::vector<double>> per_rank;
        for (int r = 0; r < group.size; ++r) {
          per_rank.emplace_back(all.begin() + r * options_.repeats,
                                all.begin() + (r + 1) * options_.repeats);
        }
        std::vector<double> combined = event.kind == EventKind::kP2P
                                           ? combineP2P(per_rank[0], per_rank[1])
                                           : combineCollective(per_rank);
        result = toWire(computeStats(floored(std::move(combined))));
      }
      EVSIM_MPI_CHECK(MPI_Comm_free(&comm));
    }
    // The group's first rank (its comm rank 0) has the result; rank 0 records it.
    MPI_Request broadcast = MPI_REQUEST_NULL;
    EVSIM_MPI_CHECK(MPI_Ibcast(&result, sizeof(WireResult), MPI_BYTE, plan.ranks.front(),
                               MPI_COMM_WORLD, &broadcast));
    waitRequest(broadcast, fmt::format("the result of '{}'", event.signature()), WaitStyle::kSleep);
    if (world_.rank == 0) {
      EVSIM_CHECK(result.valid == 1, "no result for '{}'", event.signature());
      ProfileRecord record;
      record.event = event;
      record.signature = event.signature();
      record.time = fromWire(result, scale);
      record.setMeasured(plan.measured);  // where it ran: the fit costs that group
      record.scaled = plan.scaled(target);
      record.algbw_gb_s = algorithmBandwidthGBs(event.message_bytes, record.time.median_us);
      record.busbw_gb_s = record.algbw_gb_s * busBandwidthFactor(event.kind, target.group_size);
      db.put(std::move(record));
      save(db);
    }
    if (plan.scaled(target)) ++summary.scaled;
    ++done;
  }
}

void printSummary(std::FILE* out, const ProfileSummary& s, const std::string& output_path,
                  int world_size) {
  if (out == nullptr) return;
  fmt::print(out,
             "[eventprof] done: measured {} event(s) ({} compute, {} communication, {} scaled from "
             "a smaller group); {} already in the profile; {} not measured\n",
             s.measured_compute + s.measured_communication, s.measured_compute,
             s.measured_communication, s.scaled, s.already_measured, s.unmeasurable.size());
  for (const std::string& u : s.unmeasurable)
    fmt::print(out, "[eventprof]   not measured: {}\n", u);
  fmt::print(out,
             "[eventprof] wrote {} ({} events) in {:.2f} s; profiling cost {:.2f} device-seconds "
             "measuring (sum over {} ranks; {:.2f} device-seconds held: {} devices x wall time)\n",
             output_path, s.records_in_profile, s.wall_s, s.measuring_device_s, world_size,
             s.heldDeviceSeconds(), s.devices);
  if (s.modeled && s.modeled->simulated > 0) {
    const double held_s = s.heldDeviceSeconds();
    const double modeled_s = s.modeled->device_s;
    fmt::print(out,
               "[eventprof] one modeled iteration of the {} strategies covered: {:.2f} device-s; "
               "profiling cost {:.1f}% of it held ({:.1f}% measuring)\n",
               s.modeled->simulated, modeled_s, 100 * held_s / modeled_s,
               100 * s.measuring_device_s / modeled_s);
  }
  if (s.modeled && s.modeled->not_covered > 0) {
    fmt::print(out,
               "[eventprof] {} strategies not modeled: the profile lacks some of their events\n",
               s.modeled->not_covered);
  }
  std::fflush(out);
}

}  // namespace evsim
