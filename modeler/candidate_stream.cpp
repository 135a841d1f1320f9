#include "modeler/candidate_stream.h"

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>

namespace evsim {

namespace {

// Unwinds the background enumeration when the consumer has stopped.
struct Stopped {};

}  // namespace

void streamCandidates(const ModelConfig& model, const ClusterConfig& cluster, const Strategy& base,
                      const StrategySpace& space, size_t batch_size, bool background,
                      SearchReport& invalid,
                      const std::function<void(std::vector<IndexedStrategy>&&)>& consume) {
  // Enumerates, handing each full batch (and the last) to `emit`.
  auto enumerate = [&](const std::function<void(std::vector<IndexedStrategy>&&)>& emit) {
    std::vector<IndexedStrategy> batch;
    batch.reserve(batch_size);
    size_t index = 0;
    forEachCandidate(model, cluster, base, space, [&](Candidate&& c) {
      const size_t at = index++;
      if (c.violation) {
        ++invalid.invalid;
        invalid.noteInvalid(c.strategy, *c.violation);
        return;
      }
      batch.push_back(IndexedStrategy{std::move(c.strategy), at});
      if (batch.size() == batch_size) {
        emit(std::move(batch));
        batch = {};
        batch.reserve(batch_size);
      }
    });
    if (!batch.empty()) emit(std::move(batch));
  };
  if (!background) {
    enumerate(consume);
    return;
  }

  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::vector<IndexedStrategy>> queue;
  bool done = false, stop = false;
  std::exception_ptr error;
  std::thread producer([&] {
    try {
      enumerate([&](std::vector<IndexedStrategy>&& batch) {
        std::unique_lock<std::mutex> lock(mutex);
        changed.wait(lock, [&] { return stop || queue.size() < kQueuedBatches; });
        if (stop) throw Stopped{};
        queue.push_back(std::move(batch));
        changed.notify_all();
      });
    } catch (const Stopped&) {
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex);
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mutex);
    done = true;
    changed.notify_all();
  });
  auto finish = [&] {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop = true;
      changed.notify_all();
    }
    producer.join();
  };
  try {
    for (;;) {
      std::vector<IndexedStrategy> batch;
      {
        std::unique_lock<std::mutex> lock(mutex);
        changed.wait(lock, [&] { return done || !queue.empty(); });
        if (queue.empty()) break;  // done, and nothing left
        batch = std::move(queue.front());
        queue.pop_front();
        changed.notify_all();
      }
      consume(std::move(batch));
    }
  } catch (...) {
    finish();
    throw;
  }
  finish();
  if (error) std::rethrow_exception(error);
}

}  // namespace evsim
