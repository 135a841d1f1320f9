#include "modeler/chakra_export.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>

#include "common/atomic_file.h"
#include "common/cancel.h"
#include "common/error.h"
#include "common/strings.h"
#include "io/chakra/chakra_file.h"
#include "modeler/device_events.h"
#include "modeler/trace_writer.h"

namespace evsim {

namespace {

using ChakraProtoMsg::Node;
using ChakraProtoMsg::NodeType;

constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;
// Two times this close are one instant (sums of offsets in microseconds round differently).
constexpr double kSameInstantUs = 1e-6;
// CP ring exchanges' tags, apart from the pipeline's (which start at 1).
constexpr int32_t kCpTagBase = 1 << 30;

// The kinds ASTRA-sim schedules apart: compute and host ops and communication each one at a
// time, receives any number at once.
enum Kind { kGpuCompute, kHostCompute, kCommunication, kReceive, kKindCount };

struct Item {
  NodeType type = ChakraProtoMsg::COMP_NODE;
  Kind kind = kGpuCompute;
  DeviceEvent event;
  int64_t peer = -1;  // send: the receiver; receive: the sender
  int32_t tag = 0;
  int group = 0;  // collectives: the comm-group id
  double end_us() const { return event.start_us + event.duration_us; }
};

int64_t collectiveType(EventKind kind) {
  switch (kind) {
    case EventKind::kAllReduce:
      return ChakraProtoMsg::ALL_REDUCE;
    case EventKind::kAllGather:
      return ChakraProtoMsg::ALL_GATHER;
    case EventKind::kReduceScatter:
      return ChakraProtoMsg::REDUCE_SCATTER;
    case EventKind::kAllToAll:
      return ChakraProtoMsg::ALL_TO_ALL;
    case EventKind::kBroadcast:
      return ChakraProtoMsg::BROADCAST;
    default:
      EVSIM_THROW(Error, "chakra: {} is not a collective", eventKindName(kind));
  }
}

// The members of the group a collective of `rank` runs in, by the stream it runs on (the DP
// stream's expert syncs in the expert-data-parallel group), checked against the event's size.
std::vector<int64_t> collectiveRanks(const IterationPlan& plan, const RankLayout& layout,
                                     const RankCoord& c, const DeviceEvent& e) {
  std::vector<int64_t> ranks;
  switch (e.stream) {
    case Stream::kTpComm:
      ranks = layout.tpRanks(c);
      break;
    case Stream::kCpComm: {
      // The whole CP group (a2a, allgather), or a2a+p2p's a2a block of consecutive CP ranks.
      const int a2a = plan.strategy.cpA2aSize();
      ranks = layout.cpRanks(c);
      if (a2a > 1 && a2a < plan.strategy.cp) {
        const auto first = ranks.begin() + (c.cp / a2a) * a2a;
        ranks = std::vector<int64_t>(first, first + a2a);
      }
      break;
    }
    case Stream::kEpComm:
      ranks = layout.epRanks(c);
      break;
    case Stream::kDpComm:
      ranks = e.name.find("expert") != std::string_view::npos ? layout.expertDpRanks(c)
                                                              : layout.dpRanks(c);
      break;
    default:
      break;
  }
  const UniqueEvent& u = plan.events[e.event];
  if (static_cast<int64_t>(ranks.size()) != u.event.placement.group_size) {
    EVSIM_THROW(Error, "chakra: {} ({}) on the {} stream: no group of {} ranks found for it",
                e.name, u.signature, streamName(e.stream), u.event.placement.group_size);
  }
  return ranks;
}

// Every event of `rank`, with the receives of the pipeline sends aimed at it (found among the
// sends of its pipeline neighbours), in start order.
std::vector<Item> rankItems(const Simulation& sim, int64_t rank, ChakraCommGroups& groups) {
  const IterationPlan& plan = sim.plan;
  const Strategy& s = plan.strategy;
  const RankLayout layout = plan.layout();
  const RankCoord c = layout.coord(rank);
  const int chunks = plan.chunksPerDevice();
  // Both ends compute a transfer's tag from the sender's event.
  auto pipeline_tag = [&](const DeviceEvent& e) {
    const int64_t tag =
        1 + (int64_t{e.micro_batch} * chunks + e.chunk) * 2 + (e.name == "send_activation" ? 0 : 1);
    EVSIM_CHECK(tag < kCpTagBase, "chakra: pipeline tag {} overflows", tag);
    return static_cast<int32_t>(tag);
  };
  std::vector<Item> items;
  int32_t cp_exchange = 0;
  forEachDeviceEvent(sim, rank, [&](const DeviceEvent& e) {
    const Event& ev = plan.events[e.event].event;
    Item item{.event = e};
    if (ev.kind == EventKind::kCompute) {
      item.kind = e.stream == Stream::kHost ? kHostCompute : kGpuCompute;
      items.push_back(item);
      return;
    }
    item.kind = kCommunication;
    if (ev.kind != EventKind::kP2P) {
      item.type = ChakraProtoMsg::COMM_COLL_NODE;
      item.group = groups.id(collectiveRanks(plan, layout, c, e));
      items.push_back(item);
      return;
    }
    if (e.stream == Stream::kPpComm) {
      const std::optional<SendTarget> target = sendTarget(plan, layout, c, e);
      EVSIM_CHECK(target, "chakra: pipeline send {} of rank {} has no receiver", e.name, rank);
      if (target->rank == rank) return;  // between two chunks of this device: no transfer
      item.type = ChakraProtoMsg::COMM_SEND_NODE;
      item.peer = target->rank;
      item.tag = pipeline_tag(e);
      items.push_back(item);
      return;
    }
    EVSIM_CHECK(e.stream == Stream::kCpComm, "chakra: point-to-point {} on the {} stream", e.name,
                streamName(e.stream));
    // A ring step: this rank's K/V to the next CP rank while the previous one's arrive.
    const int32_t tag = kCpTagBase + cp_exchange++;
    Item send = item, recv = item;
    send.type = ChakraProtoMsg::COMM_SEND_NODE;
    // Ring neighbours are the next CP rank, or under a2a+p2p the next of the same a2a index.
    const int stride = s.cp / s.cpRingSize();
    send.peer = layout.rank(c.tp, c.dp, c.pp, (c.cp + stride) % s.cp);
    send.tag = tag;
    recv.type = ChakraProtoMsg::COMM_RECV_NODE;
    recv.kind = kReceive;
    recv.peer = layout.rank(c.tp, c.dp, c.pp, (c.cp + s.cp - stride) % s.cp);
    recv.tag = tag;
    items.push_back(send);
    items.push_back(recv);
  });
  // Receives: a send to this rank comes from a neighbouring device stage (the previous one for
  // activations, the next for gradients, around the ring when interleaved).
  std::vector<int> senders;
  for (int pp : {(c.pp + s.pp - 1) % s.pp, (c.pp + 1) % s.pp}) {
    if (pp != c.pp && std::find(senders.begin(), senders.end(), pp) == senders.end())
      senders.push_back(pp);
  }
  for (int pp : senders) {
    const int64_t from = layout.rank(c.tp, c.dp, pp, c.cp);
    const RankCoord fc = layout.coord(from);
    forEachDeviceEvent(sim, from, [&](const DeviceEvent& e) {
      const std::optional<SendTarget> target = sendTarget(plan, layout, fc, e);
      if (!target || target->rank != rank) return;
      Item recv{.type = ChakraProtoMsg::COMM_RECV_NODE, .kind = kReceive, .event = e};
      recv.event.chunk = target->chunk;
      recv.event.name = e.name == "send_activation" ? "recv_activation" : "recv_gradient";
      recv.peer = from;
      recv.tag = pipeline_tag(e);
      items.push_back(recv);
    });
  }
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return a.event.start_us < b.event.start_us;
  });
  return items;
}

// For each node, the latest node of each other kind that ended by its start (ids below its own).
class EndedBefore {
 public:
  EndedBefore(const std::vector<Item>& items, Kind kind) : items_(items) {
    for (size_t i = 0; i < items.size(); ++i) {
      if (items[i].kind == kind) by_end_.push_back(static_cast<int64_t>(i));
    }
    std::stable_sort(by_end_.begin(), by_end_.end(),
                     [&](int64_t a, int64_t b) { return items[a].end_us() < items[b].end_us(); });
  }
  // Queried in id order.
  std::optional<int64_t> latest(int64_t id) {
    const double start = items_[id].event.start_us + kSameInstantUs;
    for (; next_ < by_end_.size() && items_[by_end_[next_]].end_us() <= start; ++next_)
      pending_.push_back(by_end_[next_]);
    // Nodes that end at this instant but start after this one count from the next id on.
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (*it < id) {
        if (!best_ || items_[*it].end_us() >= items_[*best_].end_us()) best_ = *it;
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
    return best_;
  }

 private:
  const std::vector<Item>& items_;
  std::vector<int64_t> by_end_;
  size_t next_ = 0;
  std::vector<int64_t> pending_;
  std::optional<int64_t> best_;
};

void addAttr(Node& node, const char* name, auto setter) {
  ChakraProtoMsg::AttributeProto* attr = node.add_attr();
  attr->set_name(name);
  setter(*attr);
}

Node toNode(const IterationPlan& plan, const Item& item, int64_t rank, uint64_t id) {
  const DeviceEvent& e = item.event;
  const Event& ev = plan.events[e.event].event;
  Node node;
  node.set_id(id);
  // "qkv_gemm forward mb0 chunk0 layer 3"; without the micro-batch and layer where the event has
  // none (pipeline transfers, gradient syncs, the optimizer).
  std::string name = fmt::format("{} {}", e.name, phaseName(e.phase));
  if (e.micro_batch >= 0) name += fmt::format(" mb{}", e.micro_batch);
  name += fmt::format(" chunk{}", e.chunk);
  if (e.micro_batch >= 0 && e.stream != Stream::kPpComm) {
    name += fmt::format(" layer {}", layerText(e.layer));
  }
  node.set_name(std::move(name));
  node.set_type(item.type);
  node.set_start_time_micros(static_cast<uint64_t>(std::llround(std::max(0.0, e.start_us))));
  node.set_duration_micros(static_cast<uint64_t>(std::llround(std::max(0.0, e.duration_us))));
  const bool cpu = item.kind == kHostCompute;
  addAttr(node, "is_cpu_op", [&](auto& a) { a.set_bool_val(cpu); });
  switch (item.type) {
    case ChakraProtoMsg::COMP_NODE:
      addAttr(node, "num_ops", [&](auto& a) { a.set_int64_val(std::llround(ev.flops)); });
      addAttr(node, "tensor_size", [&](auto& a) { a.set_uint64_val(ev.memory_bytes); });
      break;
    case ChakraProtoMsg::COMM_COLL_NODE:
      addAttr(node, "comm_type", [&](auto& a) { a.set_int64_val(collectiveType(ev.kind)); });
      addAttr(node, "comm_size", [&](auto& a) { a.set_int64_val(ev.message_bytes); });
      addAttr(node, "pg_name", [&](auto& a) { a.set_string_val(std::to_string(item.group)); });
      break;
    default: {  // send or receive
      const bool send = item.type == ChakraProtoMsg::COMM_SEND_NODE;
      const int64_t src = send ? rank : item.peer, dst = send ? item.peer : rank;
      addAttr(node, "comm_src", [&](auto& a) { a.set_int32_val(static_cast<int32_t>(src)); });
      addAttr(node, "comm_dst", [&](auto& a) { a.set_int32_val(static_cast<int32_t>(dst)); });
      addAttr(node, "comm_tag", [&](auto& a) { a.set_int32_val(item.tag); });
      addAttr(node, "comm_size", [&](auto& a) { a.set_int64_val(ev.message_bytes); });
      break;
    }
  }
  return node;
}

std::filesystem::path tracePath(const std::string& dir, const std::string& prefix, int64_t rank) {
  return std::filesystem::path(dir) / fmt::format("{}.{}.et", prefix, rank);
}

// The rank N of a file named exactly <prefix>.<N>.et (N decimal digits only), or -1.
int64_t traceRank(const std::string& file_name, const std::string& prefix) {
  const std::string head = prefix + ".", tail = ".et";
  if (file_name.size() <= head.size() + tail.size() || file_name.rfind(head, 0) != 0 ||
      !file_name.ends_with(tail)) {
    return -1;
  }
  const std::string digits =
      file_name.substr(head.size(), file_name.size() - head.size() - tail.size());
  if (digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), [](char c) {
        return c >= '0' && c <= '9';
      })) {
    return -1;
  }
  return std::stoll(digits);
}

// Removes the rank files of an earlier run with more ranks than `world`; returns how many.
int64_t removeStaleTraces(const std::string& dir, const std::string& prefix, int64_t world) {
  namespace fs = std::filesystem;
  std::vector<fs::path> stale;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file() && traceRank(entry.path().filename().string(), prefix) >= world) {
      stale.push_back(entry.path());
    }
  }
  for (const fs::path& path : stale) {
    std::error_code ec;
    if (!fs::remove(path, ec) && ec) {
      EVSIM_THROW(InputError, "--chakra {}: cannot remove the earlier run's {} ({})", dir,
                  path.filename().string(), ec.message());
    }
  }
  return static_cast<int64_t>(stale.size());
}

}  // namespace

int ChakraCommGroups::id(const std::vector<int64_t>& ranks) {
  auto [it, added] = ids_.try_emplace(ranks, static_cast<int>(groups_.size()) + 1);
  if (added) groups_.push_back(ranks);
  return it->second;
}

std::string ChakraCommGroups::json() const {
  std::string out = "{";
  for (size_t g = 0; g < groups_.size(); ++g) {
    out += fmt::format("{}\n  \"{}\": [{}]", g ? "," : "", g + 1, fmt::join(groups_[g], ", "));
  }
  return out + "\n}\n";
}

std::vector<Node> chakraNodes(const Simulation& sim, int64_t rank, ChakraCommGroups& groups) {
  EVSIM_CHECK(sim.plan.strategy.gpus() < (int64_t{1} << 31), "chakra: rank ids are int32");
  const std::vector<Item> items = rankItems(sim, rank, groups);
  std::vector<EndedBefore> ended;
  for (int k = 0; k < kKindCount; ++k) ended.emplace_back(items, static_cast<Kind>(k));
  std::vector<Node> nodes;
  nodes.reserve(items.size());
  std::array<std::optional<int64_t>, kKindCount> previous;  // the chains, by kind
  for (size_t i = 0; i < items.size(); ++i) {
    const auto id = static_cast<int64_t>(i);
    const Item& item = items[i];
    Node node = toNode(sim.plan, item, rank, static_cast<uint64_t>(id));
    std::vector<int64_t> deps;
    if (item.kind != kReceive && previous[item.kind]) deps.push_back(*previous[item.kind]);
    for (int k = 0; k < kKindCount; ++k) {
      const std::optional<int64_t> before = ended[k].latest(id);
      if (k != item.kind && before) deps.push_back(*before);
    }
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    for (int64_t d : deps) node.add_data_deps(static_cast<uint64_t>(d));
    previous[item.kind] = id;
    nodes.push_back(std::move(node));
  }
  return nodes;
}

double estimateChakraBytes(const Simulation& sim) {
  const IterationPlan& plan = sim.plan;
  const RankLayout layout = plan.layout();
  std::map<std::pair<int, int>, int64_t> ranks_of;  // (pipeline class, stage) -> ranks
  for (int64_t r = 0; r < plan.strategy.gpus(); ++r) {
    const RankCoord c = layout.coord(r);
    ++ranks_of[{plan.pipelineOf(c.dp), c.pp}];
  }
  std::map<int, int> replica_of;  // pipeline class -> a DP index of it
  for (int dp = 0; dp < plan.strategy.dp; ++dp) replica_of.emplace(plan.pipelineOf(dp), dp);
  double bytes = 0;
  for (const auto& [key, count] : ranks_of) {
    ChakraCommGroups groups;
    const int64_t rank = layout.rank(0, replica_of.at(key.first), key.second);
    double one = 0;
    for (const Node& node : chakraNodes(sim, rank, groups)) {
      one += static_cast<double>(node.ByteSizeLong()) + 2;  // + its length prefix
    }
    bytes += one * static_cast<double>(count);
  }
  return bytes;
}

ChakraOutput writeChakraTraces(const Simulation& sim, const std::string& dir,
                               const std::string& prefix, double max_gib) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) {
    EVSIM_THROW(InputError, "--chakra {}: is a file, not a directory", dir);
  }
  const int64_t world = sim.plan.strategy.gpus();
  const double estimate = estimateChakraBytes(sim);
  if (estimate > max_gib * kBytesPerGiB) {
    EVSIM_THROW(InputError,
                "--chakra {}: about {} ({} files, one per rank), over the {:g} GiB limit of one "
                "output (--max-output-gib): raise it or simulate fewer GPUs",
                dir, formatBytes(estimate), world, max_gib);
  }
  fs::create_directories(dir, ec);
  if (ec)
    EVSIM_THROW(InputError, "--chakra {}: cannot create the directory ({})", dir, ec.message());
  const fs::space_info space = fs::space(dir, ec);
  if (!ec && estimate > static_cast<double>(space.available)) {
    EVSIM_THROW(InputError, "--chakra {}: about {}, more than the {} free there", dir,
                formatBytes(estimate), formatBytes(static_cast<double>(space.available)));
  }
  ChakraOutput out;
  ChakraCommGroups groups;
  for (int64_t rank = 0; rank < world; ++rank) {
    throwIfCancelled();
    const std::vector<Node> nodes = chakraNodes(sim, rank, groups);
    AtomicFileWriter file(tracePath(dir, prefix, rank).string());
    ChakraProtoMsg::GlobalMetadata metadata;
    metadata.set_version("0.0.4");
    auto* producer = metadata.add_attr();
    producer->set_name("producer");
    producer->set_string_val(
        fmt::format("eventsim simulate {} rank {} of {}", sim.plan.strategy.name(), rank, world));
    writeChakraMessage(file.stream(), metadata);
    for (const Node& node : nodes) writeChakraMessage(file.stream(), node);
    out.bytes += static_cast<double>(file.stream().tellp());
    file.commit();
    ++out.files;
    out.nodes += static_cast<int64_t>(nodes.size());
  }
  out.comm_group_path = (fs::path(dir) / fmt::format("{}.comm_group.json", prefix)).string();
  AtomicFileWriter group_file(out.comm_group_path);
  const std::string text = groups.json();
  group_file.stream() << text;
  group_file.commit();
  out.bytes += static_cast<double>(text.size());
  out.groups = static_cast<int>(groups.groups().size());
  out.stale_removed = removeStaleTraces(dir, prefix, world);
  return out;
}

}  // namespace evsim
