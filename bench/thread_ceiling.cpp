// What a second thread can give on this machine at best (issue 34 item 2: "threads scale, aim >=
// 1.8x on 2 threads"): the same fixed work per thread run on one thread, then on two at once,
// for kernels with no shared data at all, so that whatever two threads lose is the machine's
// (shared caches, memory, hypervisor, a host core's sibling), not the code's.
//
//   build/bench/thread_ceiling [--reps N] [--scale X] [--default-heap]
//
// Kernels (each thread its own data):
//   alu-latency   one dependent chain of multiply/xor-shift: a core's latency, not its units;
//                 two such threads scale even on the two hyperthreads of one core.
//   alu-throughput eight independent chains: a core's integer units busy; two hyperthreads of
//                 one core would share them (well under 2x), two cores would not.
//   chase-256K/4M/16M  a random cyclic pointer chase over that many bytes per thread: L2-resident,
//                 L3-resident, and (two threads x 16 MB = the 32 MB L3) L3-contended. The
//                 searches' peak RSS is 27-33 MB (Llama 3 70B) to 51-57 MB (405B) at 1,024 GPUs.
//   malloc        each thread allocates and frees blocks of 16-2,048 bytes with ~1,000 live,
//                 through the heap the searches use (search_heap.h: two arenas;
//                 --default-heap: glibc's per-thread arenas instead).
// Per kernel: the median wall time of --reps runs at one thread (t1) and at two (t2), alternated,
// the scaling 2 x t1 / t2 (2.00 = perfect), and the CPU time a thread took for its work at two
// threads over one (the searches' "CPU inflation": 1.00 = none). Wall ratios need a quiet machine;
// results: bench/RESULTS.md, session 26, par34.
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "modeler/search_heap.h"

namespace {

double threadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Keeps a result from being optimized away.
std::atomic<uint64_t> g_sink{0};

uint64_t aluLatency(uint64_t steps, uint64_t seed) {
  uint64_t x = seed + 1;
  for (uint64_t i = 0; i < steps; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    x ^= x >> 17;
  }
  return x;
}

uint64_t aluThroughput(uint64_t steps, uint64_t seed) {
  uint64_t x[8];
  for (int k = 0; k < 8; ++k) x[k] = seed + static_cast<uint64_t>(k) * 0x9E3779B97F4A7C15ULL;
  for (uint64_t i = 0; i < steps / 8; ++i) {
    for (int k = 0; k < 8; ++k) {
      x[k] = (x[k] + (x[k] << 3)) ^ (x[k] >> 7);
      x[k] += 0x632BE59BD9B4E019ULL;
    }
  }
  uint64_t r = 0;
  for (int k = 0; k < 8; ++k) r ^= x[k];
  return r;
}

// A single random cycle through `bytes` of 8-byte slots (Sattolo's shuffle), walked `steps` times.
struct Chase {
  std::vector<uint64_t> next;
  explicit Chase(size_t bytes, uint64_t seed) : next(bytes / sizeof(uint64_t)) {
    for (size_t i = 0; i < next.size(); ++i) next[i] = i;
    std::mt19937_64 rng(seed);
    for (size_t i = next.size() - 1; i > 0; --i) {
      std::swap(next[i], next[std::uniform_int_distribution<size_t>(0, i - 1)(rng)]);
    }
  }
  uint64_t walk(uint64_t steps) const {
    uint64_t j = 0;
    for (uint64_t i = 0; i < steps; ++i) j = next[j];
    return j;
  }
};

uint64_t mallocChurn(uint64_t steps, uint64_t seed) {
  std::vector<void*> live(1024, nullptr);
  uint64_t x = seed * 2654435761u + 1, sum = 0;
  for (uint64_t i = 0; i < steps; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    void*& slot = live[(x >> 20) % live.size()];
    std::free(slot);
    const size_t size = 16 + (x >> 40) % 2033;
    slot = std::malloc(size);
    static_cast<char*>(slot)[0] = static_cast<char>(i);
    sum += reinterpret_cast<uintptr_t>(slot) & 0xff;
  }
  for (void* p : live) std::free(p);
  return sum;
}

struct Kernel {
  std::string name;
  uint64_t steps;  // per thread, sized for ~0.1-0.3 s of a quiet core at --scale 1
  size_t chase_bytes = 0;  // chase kernels only
  std::function<uint64_t(uint64_t steps, uint64_t seed, const Chase* chase)> run;
};

struct Run {
  double wall = 0;
  double cpu_per_thread = 0;  // mean over the threads
};

// Runs `kernel` on `threads` threads at once, each its own data; the setup (a chase's cycle) is
// outside the timing.
Run runOnce(const Kernel& kernel, unsigned threads, double scale) {
  std::vector<std::unique_ptr<Chase>> chases(threads);
  if (kernel.chase_bytes > 0) {
    for (unsigned t = 0; t < threads; ++t) chases[t] = std::make_unique<Chase>(kernel.chase_bytes, t + 1);
  }
  const uint64_t steps = static_cast<uint64_t>(static_cast<double>(kernel.steps) * scale);
  std::vector<double> cpu(threads, 0);
  std::vector<std::thread> pool;
  const auto start = std::chrono::steady_clock::now();
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      const double c0 = threadCpuSeconds();
      g_sink.fetch_xor(kernel.run(steps, t + 1, chases[t].get()), std::memory_order_relaxed);
      cpu[t] = threadCpuSeconds() - c0;
    });
  }
  for (std::thread& t : pool) t.join();
  Run r;
  r.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (double c : cpu) r.cpu_per_thread += c / threads;
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  double scale = 1;
  bool default_heap = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--scale") == 0 && i + 1 < argc) {
      scale = std::atof(argv[++i]);
    } else if (std::strcmp(argv[i], "--default-heap") == 0) {
      default_heap = true;
    } else {
      std::fprintf(stderr, "usage: %s [--reps N] [--scale X] [--default-heap]\n", argv[0]);
      return 2;
    }
  }
  if (!default_heap) evsim::useSearchHeap();  // as eventsim and the benches, first thing

  auto chase = [](uint64_t steps, uint64_t, const Chase* c) { return c->walk(steps); };
  const std::vector<Kernel> kernels{
      {"alu-latency", 40'000'000, 0,
       [](uint64_t s, uint64_t seed, const Chase*) { return aluLatency(s, seed); }},
      {"alu-throughput", 200'000'000, 0,
       [](uint64_t s, uint64_t seed, const Chase*) { return aluThroughput(s, seed); }},
      {"chase-256K", 30'000'000, size_t{256} << 10, chase},
      {"chase-4M", 4'000'000, size_t{4} << 20, chase},
      {"chase-16M", 2'000'000, size_t{16} << 20, chase},
      {"malloc", 3'000'000, 0,
       [](uint64_t s, uint64_t seed, const Chase*) { return mallocChurn(s, seed); }},
  };
  std::printf("%-15s %9s %9s %8s %10s %14s   (median of %d, alternating; heap: %s)\n",
              "kernel", "t1 (s)", "t2 (s)", "scaling", "cpu1 (s)", "cpu/thread 2:1", reps,
              default_heap ? "glibc default" : "the searches' (search_heap.h)");
  for (const Kernel& k : kernels) {
    std::vector<double> wall1, wall2, cpu1, cpu2;
    for (int r = 0; r < reps; ++r) {
      const Run one = runOnce(k, 1, scale), two = runOnce(k, 2, scale);
      wall1.push_back(one.wall);
      wall2.push_back(two.wall);
      cpu1.push_back(one.cpu_per_thread);
      cpu2.push_back(two.cpu_per_thread);
    }
    const double t1 = median(wall1), t2 = median(wall2);
    std::printf("%-15s %9.4f %9.4f %7.2fx %10.4f %13.2fx\n", k.name.c_str(), t1, t2, 2 * t1 / t2,
                median(cpu1), median(cpu2) / median(cpu1));
  }
  return 0;
}
