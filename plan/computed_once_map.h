#pragma once
// A map shared by threads whose values are each computed once and then read without a lock
// (PlanCache's look-ups, plan_cache.h).
//
// Why not a mutex around a std::map: the two workers of a search ask it ~110,000 times per
// search of Llama 3 70B on 1,024 GPUs, mostly for keys already there, and often for the same key
// at the same moment; one mutex was contended ~2,600 times, each a futex sleep and wake-up
// (~50 us on a 2-core VM), and even uncontended its lock word and the shared futures' counts
// bounced between the cores (issue 34 item 2; bench/RESULTS.md, session 30, lock30).
//
// Structure: a fixed array of buckets (allocated at the first insertion), each the head of a
// singly linked list of nodes, newest first. A node's hash, key and link are set before it is
// published (a compare-and-swap of the head, release) and never change after, so a reader walks
// a list with acquire loads alone and writes nothing shared. A node is computed by the thread
// whose swap published it; the value is then stored in the node and its state set to ready
// (release). A thread that finds the node still computing waits on its state (an atomic wait, a
// futex only while it really waits) and then reads the same value: a value is computed once.
// Two threads missing a key at once both try to publish; the loser finds the winner's node on
// its second walk, frees its own, and waits for the winner.
//
// A computation that throws is not kept: its node is marked failed (the exception stored for
// the threads waiting on it, which rethrow it) and stays in its list, unmatched, until clear():
// nodes are freed only there, since a reader may still be walking past it. A later asker
// publishes a new node and computes again, so every failed ask of a key adds one node to its
// list until clear() (PlanCache's computations throw only on a bug).
//
// References stay valid until clear(), which must not run while another thread is in get() or
// still holds a reference (nodes are freed there only). The bucket count is fixed: lists grow
// past one node each beyond `1 << bucket_bits` keys, which costs a few more hash comparisons per
// look-up, never a wrong value. A key's bucket is the top bits of its hash passed through `mix`
// once more: a scalar key's hash is the number itself, whose top bits are 0 for every small one.

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/error.h"

namespace evsim {

namespace once_map_detail {

inline uint64_t mix(uint64_t seed, uint64_t v) {
  // splitmix64's finalizer over the combination: every input bit reaches every output bit.
  uint64_t x = seed ^ (v + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

template <typename T>
struct IsTuple : std::false_type {};
template <typename... Ts>
struct IsTuple<std::tuple<Ts...>> : std::true_type {};
template <typename T>
struct IsVector : std::false_type {};
template <typename T, typename A>
struct IsVector<std::vector<T, A>> : std::true_type {};

// A hash consistent with operator== of tuples, vectors, integers, enums and doubles (0.0 and
// -0.0 compare equal and hash alike).
template <typename T>
uint64_t hashOf(const T& value) {
  if constexpr (IsTuple<T>::value) {
    return std::apply(
        [](const auto&... parts) {
          uint64_t h = 0;
          ((h = mix(h, hashOf(parts))), ...);
          return h;
        },
        value);
  } else if constexpr (IsVector<T>::value) {
    uint64_t h = mix(0, value.size());
    for (const auto& v : value) h = mix(h, hashOf(v));
    return h;
  } else if constexpr (std::is_floating_point_v<T>) {
    const double d = value == 0 ? 0.0 : static_cast<double>(value);
    return std::bit_cast<uint64_t>(d);
  } else if constexpr (std::is_enum_v<T>) {
    return static_cast<uint64_t>(value);
  } else {
    static_assert(std::is_integral_v<T>, "hashOf: tuples, vectors, numbers and enums only");
    return static_cast<uint64_t>(value);
  }
}

}  // namespace once_map_detail

template <typename Key, typename T>
class ComputedOnceMap {
 public:
  // 2^bucket_bits buckets, bucket_bits in 1..24 (24: 128 MiB of heads).
  explicit ComputedOnceMap(int bucket_bits) : bucket_bits_(bucket_bits) {
    EVSIM_CHECK(bucket_bits >= 1 && bucket_bits <= 24, "bucket_bits {} outside 1..24", bucket_bits);
  }
  ~ComputedOnceMap() { clear(); }
  ComputedOnceMap(const ComputedOnceMap&) = delete;
  ComputedOnceMap& operator=(const ComputedOnceMap&) = delete;

  // The value under `key`, or compute()'s result (a callable returning T) stored there; compute
  // runs on the calling thread with no lock held, and may ask this map for other keys. Valid
  // until clear(). Rethrows what the computation it waited for threw.
  template <typename Compute>
  const T& get(const Key& key, Compute&& compute) {
    // Mixed once more: the bucket comes from the top bits (bucket()), which an integer key's
    // own hash leaves 0.
    const uint64_t hash = once_map_detail::mix(0, once_map_detail::hashOf(key));
    std::atomic<Node*>& head = bucket(hash);
    Node* seen = head.load(std::memory_order_acquire);
    if (Node* found = find(seen, nullptr, hash, key)) return valueOf(*found);
    // A miss: publish a node of our own, unless another thread publishes one first.
    auto mine = std::make_unique<Node>(hash, key);
    Node* walked = seen;  // the lists below `walked` were searched already
    while (true) {
      mine->next = seen;
      if (head.compare_exchange_weak(seen, mine.get(), std::memory_order_release,
                                     std::memory_order_acquire)) {
        break;
      }
      // `seen` is the new head: only the nodes published since the last walk are new.
      if (Node* found = find(seen, walked, hash, key)) return valueOf(*found);
      walked = seen;
    }
    Node& node = *mine.release();
    try {
      node.value.emplace(std::forward<Compute>(compute)());
    } catch (...) {
      node.error = std::current_exception();
      node.state.store(kFailed, std::memory_order_release);
      node.state.notify_all();
      throw;
    }
    node.state.store(kReady, std::memory_order_release);
    node.state.notify_all();
    return *node.value;
  }

  // Frees every node (the buckets are kept for the next look-ups). Not while another thread is
  // in get() or holds a reference it returned.
  void clear() {
    if (!buckets_) return;
    for (size_t b = 0; b < (size_t{1} << bucket_bits_); ++b) {
      Node* node = buckets_[b].exchange(nullptr, std::memory_order_acquire);
      while (node != nullptr) delete std::exchange(node, node->next);
    }
  }

 private:
  static constexpr int kComputing = 0, kReady = 1, kFailed = 2;
  struct Node {
    Node(uint64_t h, const Key& k) : hash(h), key(k) {}
    const uint64_t hash;
    const Key key;
    Node* next = nullptr;  // set before the node is published, never after
    std::atomic<int> state{kComputing};
    std::optional<T> value;    // set before state becomes kReady
    std::exception_ptr error;  // set before state becomes kFailed
  };

  // The newest node of `key` not failed in the list from `from` down to (not including) `end`.
  static Node* find(Node* from, const Node* end, uint64_t hash, const Key& key) {
    for (Node* n = from; n != end; n = n->next) {
      if (n->hash == hash && n->key == key &&
          n->state.load(std::memory_order_acquire) != kFailed) {
        return n;
      }
    }
    return nullptr;
  }

  // The node's value, once its computing thread has stored it.
  static const T& valueOf(Node& node) {
    int state = node.state.load(std::memory_order_acquire);
    while (state == kComputing) {
      node.state.wait(kComputing, std::memory_order_acquire);
      state = node.state.load(std::memory_order_acquire);
    }
    if (state == kFailed) std::rethrow_exception(node.error);
    return *node.value;
  }

  std::atomic<Node*>& bucket(uint64_t hash) {
    std::atomic<Node*>* buckets = buckets_published_.load(std::memory_order_acquire);
    if (buckets == nullptr) {
      // The first insertion allocates the array (a map that is never asked allocates nothing;
      // a PlanCache made for one plan asks for a few keys, into 16 buckets: plan_cache.h); two
      // threads doing so at once keep the first array published.
      auto fresh = std::make_unique<std::atomic<Node*>[]>(size_t{1} << bucket_bits_);
      if (buckets_published_.compare_exchange_strong(buckets, fresh.get(),
                                                     std::memory_order_acq_rel)) {
        buckets = fresh.get();
        buckets_ = std::move(fresh);
      }
    }
    return buckets[hash >> (64 - bucket_bits_)];
  }

  const int bucket_bits_;
  std::atomic<std::atomic<Node*>*> buckets_published_{nullptr};
  std::unique_ptr<std::atomic<Node*>[]> buckets_;  // owns what buckets_published_ points to
};

}  // namespace evsim
