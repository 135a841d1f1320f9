#pragma once
// The search's rows in rank order, in memory that does not grow with their number (issue 34 item
// 1): rows arrive in any order; up to `rows_in_memory` are buffered, and each full buffer is
// sorted and spilled to one anonymous temporary file as a run. Reading (forEach) merges the runs
// and the buffer (k-way, a heap of cursors with a small read buffer each), so a search of any size
// writes its sorted CSV, JSON and table with a few MB of rows in memory. A space that fits in one
// buffer never touches the file.
//
// Rank order (what runSearch's stable sort gave): ok rows by iteration time, then OOM rows by peak
// memory, then invalid ones; ties by enumeration index. finish() can collapse each run of ok rows
// with equal times (the search's equivalent plans); forEach numbers the ok rows (rank).

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "modeler/candidate_result.h"

namespace evsim {

class RankedRows {
 public:
  static constexpr size_t kDefaultRowsInMemory = 4096;

  explicit RankedRows(size_t rows_in_memory = kDefaultRowsInMemory);
  RankedRows(RankedRows&&) noexcept;
  RankedRows& operator=(RankedRows&&) noexcept;
  ~RankedRows();

  // A row and its index in the enumeration (the tie-breaker). Not after finish().
  void add(CandidateResult row, size_t index);
  // Rewrites a run of ok rows of equal iteration time (in rank order) in place, returning how
  // many rows it removed (equivalent_plans.h's collapseEquivalents).
  using Collapse = std::function<int64_t(std::vector<CandidateResult>&)>;
  // No more rows. With `collapse`, each run of equal-time ok rows passes through it (the rows are
  // then merged once more into one run when they were spilled). Returns what collapse removed.
  int64_t finish(const Collapse& collapse = {});

  // Every row in rank order, with rank set (after finish()). Stops early
  // when `visit` returns false. Reads the spilled runs again on every call.
  void forEach(const std::function<bool(const CandidateResult&)>& visit) const;
  // All rows in rank order in one vector: for tests and small spaces only.
  std::vector<CandidateResult> toVector() const;

  size_t size() const { return size_; }  // after finish(): what is left after collapsing
  bool empty() const { return size_ == 0; }
  size_t spilledRuns() const { return runs_.size(); }
  // The first row in rank order when it is ok (rank 1), else nullptr (after finish()).
  const CandidateResult* best() const { return best_ ? &*best_ : nullptr; }

 private:
  struct Entry {
    CandidateResult row;
    size_t index = 0;
  };
  struct Run {
    int64_t offset = 0;  // in the file
    int64_t bytes = 0;
  };
  struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  class Cursor;
  class RunWriter;
  static bool before(const Entry& a, const Entry& b);
  void spill();
  RunWriter newRun();    // a run at the file's end (the file made on the first)
  void addRun(Run run);  // a run written by newRun()'s writer
  // The entries of `runs` (and the sorted buffer) in rank order to `visit`, until it returns false.
  void merge(const std::vector<Run>& runs, bool with_buffer,
             const std::function<bool(Entry&&)>& visit) const;

  size_t rows_in_memory_;
  size_t size_ = 0;
  bool finished_ = false;
  std::vector<Entry> buffer_;  // sorted once finish() has run
  std::vector<Run> runs_;
  std::unique_ptr<std::FILE, FileCloser> file_;  // tmpfile(): removed when closed
  int64_t file_bytes_ = 0;
  std::optional<CandidateResult> best_;
};

}  // namespace evsim
