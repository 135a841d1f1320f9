// profile_check EVENTS PROFILE: the end-to-end test's verdict. Every event of the events file must
// be in the profile with positive times, communication records with positive bandwidths, and the
// metadata must describe the 4-rank, 2-ranks-per-node CPU run. Prints one line per problem.
#include <cstdio>
#include <exception>

#include "events/event_file.h"
#include "io/profile_db.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: profile_check EVENTS PROFILE\n");
    return 2;
  }
  try {
    std::vector<evsim::UniqueEvent> events = evsim::loadEventsFile(argv[1]);
    evsim::ProfileDb db = evsim::ProfileDb::load(argv[2]);
    int problems = 0;
    auto problem = [&](const std::string& what) {
      std::fprintf(stderr, "profile_check: %s\n", what.c_str());
      ++problems;
    };
    if (db.metadata.backend != "cpu") problem("backend " + db.metadata.backend);
    if (db.metadata.world_size != 4)
      problem("world_size " + std::to_string(db.metadata.world_size));
    if (db.metadata.ranks_per_node != 2)
      problem("ranks_per_node " + std::to_string(db.metadata.ranks_per_node));
    if (db.metadata.hosts.size() != 2) problem("expected 2 (emulated) hosts");
    if (db.metadata.devices.size() != 4) problem("expected 4 devices");
    if (db.metadata.versions.count("mpi") == 0) problem("no MPI version");
    for (const evsim::UniqueEvent& u : events) {
      const evsim::ProfileRecord* r = db.find(u.signature);
      if (r == nullptr) {
        problem("missing: " + u.signature);
        continue;
      }
      if (!(r->time.min_us > 0 && r->time.median_us > 0 && r->time.count == 3)) {
        problem("bad times: " + u.signature);
      }
      if (evsim::isCommunication(r->event.kind) && !(r->algbw_gb_s > 0 && r->busbw_gb_s > 0)) {
        problem("bad bandwidth: " + u.signature);
      }
    }
    if (db.records().size() != events.size()) problem("extra records in the profile");
    std::printf("profile_check: %zu events checked, %d problem(s)\n", events.size(), problems);
    return problems == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "profile_check: %s\n", e.what());
    return 1;
  }
}
