#include "modeler/ranked_rows.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <queue>
#include <string>
#include <type_traits>
#include <utility>

#include "common/error.h"

namespace evsim {

namespace {

// A run is merged with at most this many others at once: more runs are first merged in groups of
// this size into longer runs, so reading holds this many cursors whatever the row count.
constexpr size_t kMergeWidth = 64;
constexpr size_t kReadBufferBytes = size_t{32} * 1024;  // per cursor

// The record encoder below writes every field: adding one to Strategy or CandidateResult changes
// these sizes and must add it to encode()/decode() too (ranked_rows_test round-trips every field).
static_assert(sizeof(Strategy) == 152, "a Strategy field was added: encode and decode it");
static_assert(sizeof(CandidateResult) == 312,
              "a CandidateResult field was added: encode and decode it");

class Encoder {
 public:
  template <typename T>
  void put(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const char*>(&value);
    bytes_.append(p, sizeof(T));
  }
  void putString(const std::string& text) {
    put(static_cast<uint32_t>(text.size()));
    bytes_.append(text);
  }
  std::string& bytes() { return bytes_; }

 private:
  std::string bytes_;
};

class Decoder {
 public:
  Decoder(const char* data, size_t size) : data_(data), size_(size) {}
  template <typename T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    EVSIM_CHECK(at_ + sizeof(T) <= size_, "search rows: a spilled record is truncated");
    T value;
    std::memcpy(&value, data_ + at_, sizeof(T));
    at_ += sizeof(T);
    return value;
  }
  std::string getString() {
    const auto n = get<uint32_t>();
    EVSIM_CHECK(at_ + n <= size_, "search rows: a spilled record is truncated");
    std::string text(data_ + at_, n);
    at_ += n;
    return text;
  }

 private:
  const char* data_;
  size_t size_;
  size_t at_ = 0;
};

// One record: its payload's length (uint32), then the payload.
void encode(const CandidateResult& r, size_t index, Encoder& out) {
  const size_t length_at = out.bytes().size();
  out.put(uint32_t{0});
  out.put(static_cast<uint64_t>(index));
  const Strategy& s = r.strategy;
  out.put(s.tp), out.put(s.pp), out.put(s.dp), out.put(s.cp), out.put(s.ep), out.put(s.etp);
  out.put(s.micro_batch), out.put(s.global_batch), out.put(s.schedule), out.put(s.dp_overlap);
  out.put(s.dp_bucket_bytes), out.put(s.virtual_stages), out.put(s.recompute);
  out.put(s.sequence_parallel), out.put(s.zero_stage), out.put(s.offload);
  out.put(static_cast<uint32_t>(s.stage_layers.size()));
  for (int layers : s.stage_layers) out.put(layers);
  out.put(s.framework), out.put(s.reshard), out.put(s.torch_compile);
  out.put(s.tp_comm_overlap), out.put(s.overlap_param_gather);
  out.put(s.moe_dispatcher), out.put(s.moe_a2a_overlap);
  out.put(s.microbatch_group), out.put(s.recompute_every);
  out.put(s.cp_comm), out.put(s.cp_a2a);
  out.put(s.swiglu_recompute_product), out.put(s.grad_reduce_in_bf16);
  out.put(s.optimizer_impl), out.put(s.fsdp_wrap);
  out.put(s.grad_reduce_sync), out.put(s.grad_reduce_queue);
  out.put(r.status);
  out.putString(r.violation);
  out.put(r.rank), out.put(r.micro_batches), out.put(r.peak_memory_bytes);
  out.put(r.peak_memory_stage), out.put(r.iteration_us), out.put(r.samples_per_s);
  out.put(r.bubble_fraction), out.put(r.model_tflops_per_gpu);
  out.put(r.mfu), out.put(r.provenance_share);
  out.put(static_cast<uint32_t>(r.equivalents.size()));
  for (const std::string& e : r.equivalents) out.putString(e);
  const auto length = static_cast<uint32_t>(out.bytes().size() - length_at - sizeof(uint32_t));
  std::memcpy(out.bytes().data() + length_at, &length, sizeof(length));
}

void decode(Decoder& in, CandidateResult& r, size_t& index) {
  index = static_cast<size_t>(in.get<uint64_t>());
  Strategy& s = r.strategy;
  s.tp = in.get<int>(), s.pp = in.get<int>(), s.dp = in.get<int>();
  s.cp = in.get<int>(), s.ep = in.get<int>(), s.etp = in.get<int>();
  s.micro_batch = in.get<int64_t>(), s.global_batch = in.get<int64_t>();
  s.schedule = in.get<Schedule>(), s.dp_overlap = in.get<bool>();
  s.dp_bucket_bytes = in.get<int64_t>(), s.virtual_stages = in.get<int>();
  s.recompute = in.get<Recompute>(), s.sequence_parallel = in.get<bool>();
  s.zero_stage = in.get<int>(), s.offload = in.get<Offload>();
  s.stage_layers.resize(in.get<uint32_t>());
  for (int& layers : s.stage_layers) layers = in.get<int>();
  s.framework = in.get<Framework>(), s.reshard = in.get<Reshard>();
  s.torch_compile = in.get<TorchCompile>();
  s.tp_comm_overlap = in.get<bool>(), s.overlap_param_gather = in.get<bool>();
  s.moe_dispatcher = in.get<MoeDispatcher>(), s.moe_a2a_overlap = in.get<bool>();
  s.microbatch_group = in.get<int>(), s.recompute_every = in.get<int>();
  s.cp_comm = in.get<CpComm>(), s.cp_a2a = in.get<int>();
  s.swiglu_recompute_product = in.get<bool>(), s.grad_reduce_in_bf16 = in.get<bool>();
  s.optimizer_impl = in.get<OptimizerImpl>(), s.fsdp_wrap = in.get<FsdpWrap>();
  s.grad_reduce_sync = in.get<GradReduceSync>(), s.grad_reduce_queue = in.get<int>();
  r.status = in.get<CandidateStatus>();
  r.violation = in.getString();
  r.rank = in.get<int>(), r.micro_batches = in.get<int64_t>();
  r.peak_memory_bytes = in.get<int64_t>(), r.peak_memory_stage = in.get<int>();
  r.iteration_us = in.get<double>(), r.samples_per_s = in.get<double>();
  r.bubble_fraction = in.get<double>();
  r.model_tflops_per_gpu = in.get<double>(), r.mfu = in.get<double>();
  r.provenance_share = in.get<std::array<double, kProvenanceCount>>();
  r.equivalents.resize(in.get<uint32_t>());
  for (std::string& e : r.equivalents) e = in.getString();
}

}  // namespace

// Reads one spilled run record by record through a buffer of its own (pread: the cursors share
// the file without sharing a position).
class RankedRows::Cursor {
 public:
  Cursor(int fd, Run run) : fd_(fd), at_(run.offset), end_(run.offset + run.bytes) {
    buffer_.resize(kReadBufferBytes);
  }
  // The next record into `entry`; false at the end of the run.
  bool next(Entry& entry) {
    if (!fill(sizeof(uint32_t))) return false;
    uint32_t length;
    std::memcpy(&length, buffer_.data() + begin_, sizeof(length));
    EVSIM_CHECK(fill(sizeof(uint32_t) + length), "search rows: a spilled run is truncated");
    Decoder in(buffer_.data() + begin_ + sizeof(uint32_t), length);
    decode(in, entry.row, entry.index);
    begin_ += sizeof(uint32_t) + length;
    return true;
  }

 private:
  // At least `bytes` unread bytes in the buffer; false when the run ends before any.
  bool fill(size_t bytes) {
    if (filled_ - begin_ >= bytes) return true;
    std::memmove(buffer_.data(), buffer_.data() + begin_, filled_ - begin_);
    filled_ -= begin_;
    begin_ = 0;
    if (buffer_.size() < bytes) buffer_.resize(bytes);
    while (filled_ < bytes && at_ < end_) {
      const size_t want = std::min<int64_t>(buffer_.size() - filled_, end_ - at_);
      const ssize_t got = pread(fd_, buffer_.data() + filled_, want, at_);
      if (got < 0 && errno == EINTR) continue;
      EVSIM_CHECK(got > 0, "search rows: reading the temporary file: {}", std::strerror(errno));
      filled_ += static_cast<size_t>(got);
      at_ += got;
    }
    return filled_ >= bytes;
  }

  int fd_;
  int64_t at_, end_;
  std::vector<char> buffer_;
  size_t begin_ = 0, filled_ = 0;
};

RankedRows::RankedRows(size_t rows_in_memory)
    : rows_in_memory_(std::max<size_t>(rows_in_memory, 1)) {}
RankedRows::RankedRows(RankedRows&&) noexcept = default;
RankedRows& RankedRows::operator=(RankedRows&&) noexcept = default;
RankedRows::~RankedRows() = default;

bool RankedRows::before(const Entry& a, const Entry& b) {
  const CandidateResult &x = a.row, &y = b.row;
  if (x.status != y.status) return x.status < y.status;
  if (x.status == CandidateStatus::kOk && x.iteration_us != y.iteration_us) {
    return x.iteration_us < y.iteration_us;
  }
  if (x.status == CandidateStatus::kOom && x.peak_memory_bytes != y.peak_memory_bytes) {
    return x.peak_memory_bytes < y.peak_memory_bytes;
  }
  return a.index < b.index;
}

void RankedRows::add(CandidateResult row, size_t index) {
  EVSIM_CHECK(!finished_, "search rows: a row added after finish()");
  buffer_.push_back(Entry{std::move(row), index});
  ++size_;
  if (buffer_.size() >= rows_in_memory_) spill();
}

// Writes one run at the file's end, through an encoding buffer.
class RankedRows::RunWriter {
 public:
  RunWriter(std::FILE* file, int64_t offset) : file_(file), run_{offset, 0} {}
  void write(const Entry& entry) {
    encode(entry.row, entry.index, out_);
    if (out_.bytes().size() >= kReadBufferBytes) flush();
  }
  Run close() {
    flush();
    EVSIM_CHECK(std::fflush(file_) == 0, "search rows: writing the temporary file: {}",
                std::strerror(errno));
    return run_;
  }

 private:
  void flush() {
    const size_t n = std::fwrite(out_.bytes().data(), 1, out_.bytes().size(), file_);
    EVSIM_CHECK(n == out_.bytes().size(), "search rows: writing the temporary file: {}",
                std::strerror(errno));
    run_.bytes += static_cast<int64_t>(n);
    out_.bytes().clear();
  }

  std::FILE* file_;
  Run run_;
  Encoder out_;
};

RankedRows::RunWriter RankedRows::newRun() {
  if (!file_) {
    file_.reset(std::tmpfile());
    EVSIM_CHECK(file_ != nullptr, "search rows: no temporary file: {}", std::strerror(errno));
  }
  return RunWriter(file_.get(), file_bytes_);
}

void RankedRows::addRun(Run run) {
  file_bytes_ += run.bytes;
  runs_.push_back(run);
}

void RankedRows::spill() {
  std::sort(buffer_.begin(), buffer_.end(), before);
  RunWriter writer = newRun();
  for (const Entry& entry : buffer_) writer.write(entry);
  addRun(writer.close());
  buffer_.clear();
}

void RankedRows::merge(const std::vector<Run>& runs, bool with_buffer,
                       const std::function<bool(Entry&&)>& visit) const {
  const int fd = file_ ? fileno(file_.get()) : -1;
  std::vector<Cursor> cursors;
  cursors.reserve(runs.size());
  for (const Run& run : runs) cursors.emplace_back(fd, run);
  // Heads: one entry per source that has one; source runs.size() is the in-memory buffer.
  std::vector<Entry> heads(runs.size() + 1);
  size_t buffer_at = 0;
  auto advance = [&](size_t source) {
    if (source < runs.size()) return cursors[source].next(heads[source]);
    if (!with_buffer || buffer_at == buffer_.size()) return false;
    heads[source] = buffer_[buffer_at++];
    return true;
  };
  auto later = [&](size_t a, size_t b) { return before(heads[b], heads[a]); };
  std::priority_queue<size_t, std::vector<size_t>, decltype(later)> heap(later);
  for (size_t source = 0; source < heads.size(); ++source) {
    if (advance(source)) heap.push(source);
  }
  while (!heap.empty()) {
    const size_t source = heap.top();
    heap.pop();
    if (!visit(std::move(heads[source]))) return;
    if (advance(source)) heap.push(source);
  }
}

int64_t RankedRows::finish(const Collapse& collapse) {
  EVSIM_CHECK(!finished_, "search rows: finish() called twice");
  finished_ = true;
  std::sort(buffer_.begin(), buffer_.end(), before);
  // Merge passes until reading needs at most kMergeWidth cursors.
  while (runs_.size() > kMergeWidth) {
    const std::vector<Run> group(runs_.begin(), runs_.begin() + kMergeWidth);
    runs_.erase(runs_.begin(), runs_.begin() + kMergeWidth);
    RunWriter writer = newRun();
    merge(group, /*with_buffer=*/false, [&](Entry&& entry) {
      writer.write(entry);
      return true;
    });
    addRun(writer.close());
  }
  int64_t removed = 0;
  if (collapse) {
    // Each run of ok rows with one iteration time (consecutive in rank order) goes through
    // `collapse` as a group; the rows in memory in place, spilled ones into one final run.
    std::vector<Entry> kept;
    std::vector<Entry> group;
    std::vector<CandidateResult> rows;
    using Out = std::function<void(Entry &&)>;
    auto close_group = [&](const Out& out) {
      if (group.size() > 1) {
        rows.clear();
        for (Entry& e : group) rows.push_back(std::move(e.row));
        removed += collapse(rows);
        for (size_t i = 0; i < rows.size(); ++i) out(Entry{std::move(rows[i]), group[i].index});
      } else if (!group.empty()) {
        out(std::move(group.front()));
      }
      group.clear();
    };
    auto emit = [&](Entry&& entry, const Out& out) {
      const bool joins = !group.empty() && entry.row.status == CandidateStatus::kOk &&
                         entry.row.iteration_us == group.front().row.iteration_us;
      if (!joins) close_group(out);
      if (entry.row.status == CandidateStatus::kOk) {
        group.push_back(std::move(entry));
      } else {
        out(std::move(entry));
      }
    };
    if (runs_.empty()) {
      kept.reserve(buffer_.size());
      const Out out = [&](Entry&& e) { kept.push_back(std::move(e)); };
      for (Entry& entry : buffer_) emit(std::move(entry), out);
      close_group(out);
      buffer_ = std::move(kept);
    } else {
      RunWriter writer = newRun();
      const Out out = [&](Entry&& e) { writer.write(e); };
      merge(runs_, /*with_buffer=*/true, [&](Entry&& entry) {
        emit(std::move(entry), out);
        return true;
      });
      close_group(out);
      const Run final_run = writer.close();
      runs_.clear();
      buffer_.clear();
      addRun(final_run);
    }
    size_ -= static_cast<size_t>(removed);
  }
  forEach([&](const CandidateResult& r) {
    if (r.status == CandidateStatus::kOk) best_ = r;
    return false;
  });
  return removed;
}

void RankedRows::forEach(const std::function<bool(const CandidateResult&)>& visit) const {
  EVSIM_CHECK(finished_, "search rows: read before finish()");
  int rank = 0;
  merge(runs_, /*with_buffer=*/true, [&](Entry&& entry) {
    CandidateResult& r = entry.row;
    if (r.status == CandidateStatus::kOk) r.rank = ++rank;
    return visit(r);
  });
}

std::vector<CandidateResult> RankedRows::toVector() const {
  std::vector<CandidateResult> rows;
  rows.reserve(size_);
  forEach([&](const CandidateResult& r) {
    rows.push_back(r);
    return true;
  });
  return rows;
}

}  // namespace evsim
