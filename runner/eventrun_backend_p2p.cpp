#include "runner/eventrun_backend_p2p.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "common/error.h"

namespace evsim {

namespace {

// One transfer: (sender, receiver, tag). Tags are unique within an iteration.
using Transfer = std::tuple<int64_t, int64_t, int>;
// One blocking collective: (group members, occurrence of that group on the rank).
using CollectiveKey = std::pair<std::vector<int64_t>, int>;

}  // namespace

size_t nextReceive(const RankProgram& program, size_t send) {
  for (size_t j = send + 1; j < program.actions.size(); ++j) {
    if (program.actions[j].kind == ActionKind::kRecv) return j;
  }
  return program.actions.size();
}

namespace {

enum class StepKind { kP2P, kCollective, kBucketStart, kBucketWait };

struct Step {
  StepKind kind = StepKind::kP2P;
  size_t action = 0;                // first action of the step
  std::vector<Transfer> transfers;  // kP2P: one, or a send and a receive when fused
  CollectiveKey collective;         // kCollective; kBucketStart: members only
};

Transfer transferOf(const RankProgram& p, const Action& a) {
  return a.kind == ActionKind::kSend ? Transfer{p.rank, a.peer, a.tag}
                                     : Transfer{a.peer, p.rank, a.tag};
}

// NCCL has no tags: between two ranks, sends and receives match in issue order. The programs must
// therefore issue them in the same order on both sides (then tag matching, which the simulation
// uses, is the same as NCCL's).
void checkPairOrder(const std::vector<RankProgram>& programs) {
  std::map<std::pair<int64_t, int64_t>, std::vector<int>> sent, received;
  for (const RankProgram& p : programs) {
    for (const Action& a : p.actions) {
      if (a.kind == ActionKind::kSend) sent[{p.rank, a.peer}].push_back(a.tag);
      if (a.kind == ActionKind::kRecv) received[{a.peer, p.rank}].push_back(a.tag);
    }
  }
  EVSIM_CHECK(sent == received,
              "eventrun: the P2P transfers between some pair of ranks are not received in the "
              "order they are sent (NCCL matches in order)");
}

std::vector<Step> stepsOf(const RankProgram& p, const std::vector<size_t>& fused) {
  std::vector<Step> steps;
  std::map<std::vector<int64_t>, int> occurrences;
  std::vector<bool> received_early(p.actions.size(), false);
  for (size_t i = 0; i < p.actions.size(); ++i) {
    const Action& a = p.actions[i];
    if (received_early[i]) continue;
    Step s;
    s.action = i;
    switch (a.kind) {
      case ActionKind::kCompute:
        continue;
      case ActionKind::kSend:
      case ActionKind::kRecv:
        s.transfers.push_back(transferOf(p, a));
        if (a.kind == ActionKind::kSend && std::binary_search(fused.begin(), fused.end(), i)) {
          const size_t j = nextReceive(p, i);
          EVSIM_CHECK(j < p.actions.size(), "rank {}: fused send {} has no receive after it",
                      p.rank, i);
          s.transfers.push_back(transferOf(p, p.actions[j]));
          received_early[j] = true;
        }
        break;
      case ActionKind::kCollective:
      case ActionKind::kRingExchange: {  // every member of the group takes part
        s.kind = StepKind::kCollective;
        const std::vector<int64_t>& members = p.groups.at(static_cast<size_t>(a.group));
        s.collective = {members, occurrences[members]++};
        break;
      }
      case ActionKind::kBucketStart:
        s.kind = StepKind::kBucketStart;
        s.collective = {p.groups.at(static_cast<size_t>(a.group)), 0};
        break;
      case ActionKind::kBucketWait:
        s.kind = StepKind::kBucketWait;
        break;
    }
    steps.push_back(std::move(s));
  }
  return steps;
}

class Simulation {
 public:
  Simulation(const std::vector<RankProgram>& programs,
             const std::vector<std::vector<size_t>>& fused)
      : pos_(programs.size(), 0), issued_(programs.size()) {
    for (size_t r = 0; r < programs.size(); ++r) {
      EVSIM_CHECK(programs[r].rank == static_cast<int64_t>(r), "program {} is rank {}", r,
                  programs[r].rank);
      steps_.push_back(stepsOf(programs[r], r < fused.size() ? fused[r] : std::vector<size_t>{}));
    }
  }

  P2PStall run() {
    for (bool progress = true; progress;) {
      progress = false;
      for (size_t r = 0; r < steps_.size(); ++r) {
        while (pos_[r] < steps_[r].size() && complete(r, steps_[r][pos_[r]])) {
          ++pos_[r];
          progress = true;
        }
      }
    }
    P2PStall stall;
    for (size_t r = 0; r < steps_.size(); ++r) {
      if (pos_[r] < steps_[r].size()) {
        stall.ranks.push_back(static_cast<int64_t>(r));
        stall.actions.push_back(steps_[r][pos_[r]].action);
      }
    }
    return stall;
  }

 private:
  const Step* current(int64_t rank) const {
    const size_t r = static_cast<size_t>(rank);
    return pos_[r] < steps_[r].size() ? &steps_[r][pos_[r]] : nullptr;
  }

  bool complete(size_t r, const Step& step) {
    switch (step.kind) {
      case StepKind::kP2P: {
        bool all = true;
        for (const Transfer& t : step.transfers) {
          if (done_transfers_.count(t)) continue;
          const int64_t peer =
              std::get<0>(t) == static_cast<int64_t>(r) ? std::get<1>(t) : std::get<0>(t);
          const Step* other = current(peer);
          const bool met = other && other->kind == StepKind::kP2P &&
                           std::find(other->transfers.begin(), other->transfers.end(), t) !=
                               other->transfers.end();
          if (met) {
            done_transfers_.insert(t);
          } else {
            all = false;
          }
        }
        return all;
      }
      case StepKind::kCollective: {
        if (done_collectives_.count(step.collective)) return true;
        for (int64_t m : step.collective.first) {
          const Step* other = current(m);
          if (!other || other->kind != StepKind::kCollective ||
              other->collective != step.collective) {
            return false;
          }
        }
        done_collectives_.insert(step.collective);
        return true;
      }
      case StepKind::kBucketStart:
        ++issued_[r][step.collective.first];
        return true;
      case StepKind::kBucketWait:
        for (const auto& [members, count] : issued_[r]) {
          for (int64_t m : members) {
            auto it = issued_[static_cast<size_t>(m)].find(members);
            if (it == issued_[static_cast<size_t>(m)].end() || it->second < count) return false;
          }
        }
        return true;
    }
    return false;
  }

  std::vector<std::vector<Step>> steps_;
  std::vector<size_t> pos_;
  std::set<Transfer> done_transfers_;
  std::set<CollectiveKey> done_collectives_;
  std::vector<std::map<std::vector<int64_t>, int>> issued_;  // per rank: buckets issued per group
};

}  // namespace

std::string P2PStall::describe(const std::vector<RankProgram>& programs) const {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const Action& a = programs.at(static_cast<size_t>(ranks[i])).actions.at(actions[i]);
    if (!out.empty()) out += ", ";
    out += fmt::format("rank {} at action {} ({}", ranks[i], actions[i], a.name);
    if (a.kind == ActionKind::kSend || a.kind == ActionKind::kRecv) {
      out += fmt::format(" {} rank {}, micro-batch {}", a.kind == ActionKind::kSend ? "to" : "from",
                         a.peer, a.micro_batch);
    }
    out += ")";
  }
  return out;
}

P2PStall simulateP2P(const std::vector<RankProgram>& programs,
                     const std::vector<std::vector<size_t>>& fused) {
  return Simulation(programs, fused).run();
}

std::vector<std::vector<size_t>> fuseP2P(const std::vector<RankProgram>& programs) {
  checkPairOrder(programs);
  std::vector<std::vector<size_t>> fused(programs.size());
  for (;;) {
    const P2PStall stall = simulateP2P(programs, fused);
    if (!stall.stalled()) return fused;
    bool fused_any = false;
    for (size_t i = 0; i < stall.ranks.size(); ++i) {
      const RankProgram& p = programs[static_cast<size_t>(stall.ranks[i])];
      const size_t a = stall.actions[i];
      std::vector<size_t>& mine = fused[static_cast<size_t>(stall.ranks[i])];
      if (p.actions[a].kind == ActionKind::kSend && nextReceive(p, a) < p.actions.size() &&
          !std::binary_search(mine.begin(), mine.end(), a)) {
        mine.insert(std::upper_bound(mine.begin(), mine.end(), a), a);
        fused_any = true;
      }
    }
    if (!fused_any) {
      EVSIM_THROW(Error,
                  "eventrun: the ranks' programs deadlock under rendezvous send/receive even with "
                  "sends fused with their next receive: {}",
                  stall.describe(programs));
    }
  }
}

}  // namespace evsim
