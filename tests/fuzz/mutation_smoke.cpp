// A fuzzing smoke that runs in every build and in CI (issue 17, item 7): each loader gets its
// seed files, the inputs earlier fuzzing found (regressions), and a fixed number of deterministic
// mutations of each seed (byte flips, insertions, deletions, duplicated and swapped chunks). Any
// exception other than InputError fails the run, printing the target and the input. It is no
// substitute for libFuzzer's coverage-guided search (scripts/fuzz.sh, clang + sanitizers); it keeps
// what that found fixed and catches gross regressions on every commit.
//   fuzz_mutation_smoke TARGET MUTATIONS_PER_SEED SEED_FILE...
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz_targets.h"

namespace {

std::string mutate(const std::string& seed, std::mt19937_64& rng) {
  std::string s = seed;
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  const int edits = 1 + static_cast<int>(rng() % 4);
  // Bytes YAML, CSV and signatures care about, so mutations reach past the first check.
  static const std::string kInteresting = ":{}[],-'\"#&*!|>% \n\t=0123456789.eE+";
  for (int e = 0; e < edits; ++e) {
    switch (rng() % 6) {
      case 0:  // flip a byte
        if (!s.empty()) s[pick(s.size())] = static_cast<char>(rng() & 0x7f);
        break;
      case 1:  // insert an interesting byte
        s.insert(s.begin() + static_cast<std::ptrdiff_t>(pick(s.size() + 1)),
                 kInteresting[pick(kInteresting.size())]);
        break;
      case 2:  // delete a run
        if (!s.empty()) {
          const size_t at = pick(s.size());
          s.erase(at, 1 + pick(std::min<size_t>(16, s.size() - at)));
        }
        break;
      case 3: {  // duplicate a chunk
        if (s.empty()) break;
        const size_t at = pick(s.size()), len = 1 + pick(std::min<size_t>(64, s.size() - at));
        s.insert(pick(s.size() + 1), s.substr(at, len));
        break;
      }
      case 4: {  // replace a digit run with a large or negative number
        static const char* kNumbers[] = {"0",     "-1",  "4294967296", "9223372036854775807",
                                         "1e308", "nan", "-0",         "65536"};
        const size_t at = s.find_first_of("0123456789", pick(s.size() + 1));
        if (at == std::string::npos) break;
        const size_t end = s.find_first_not_of("0123456789", at);
        s.replace(at, (end == std::string::npos ? s.size() : end) - at, kNumbers[pick(8)]);
        break;
      }
      default:  // truncate
        s.resize(pick(s.size() + 1));
        break;
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s TARGET MUTATIONS_PER_SEED SEED_FILE...\n", argv[0]);
    return 2;
  }
  const std::string name = argv[1];
  int target = -1;
  for (size_t i = 0; i < evsim::fuzz::kTargets.size(); ++i) {
    if (evsim::fuzz::kTargets[i] == name) target = static_cast<int>(i);
  }
  if (target < 0) {
    std::fprintf(stderr, "unknown target '%s'\n", name.c_str());
    return 2;
  }
  const long mutations = std::stol(argv[2]);
  std::mt19937_64 rng(0x5eed + static_cast<uint64_t>(target));
  long inputs = 0;
  for (int a = 3; a < argc; ++a) {
    std::ifstream in(argv[a], std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "cannot read seed %s\n", argv[a]);
      return 2;
    }
    const std::string seed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (long m = -1; m < mutations; ++m) {
      const std::string input = m < 0 ? seed : mutate(seed, rng);
      try {
        evsim::fuzz::feed(target, input);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "FINDING in %s (seed %s): %s\ninput (%zu bytes):\n%s\n", name.c_str(),
                     argv[a], e.what(), input.size(), input.c_str());
        return 1;
      }
      ++inputs;
    }
  }
  std::printf("%s: %ld inputs, 0 findings\n", name.c_str(), inputs);
  return 0;
}
