#include "io/megatron_args.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <mutex>
#include <string_view>
#include <utility>

#include "common/error.h"
#include "common/strings.h"

namespace evsim {

namespace {

// How many values an ignored argument takes: none (a switch), one, or every token up to the next
// "--" argument (--data-path 0.3 a 0.7 b).
enum class Values { kNone, kOne, kMany };

struct IgnoredArgument {
  std::string_view name;
  Values values;
};

// Megatron-LM (megatron/training/arguments.py) and torchrun arguments without effect on the time
// or the memory of one training iteration as eventsim models it. Sorted by name (binary search).
constexpr std::array kIgnored = std::to_array<IgnoredArgument>({
    {"--accumulate-allreduce-grads-in-fp32", Values::kNone},  // what --bf16 implies (optimizer_step.h)
    {"--adam-beta1", Values::kOne},
    {"--adam-beta2", Values::kOne},
    {"--adam-eps", Values::kOne},
    {"--apply-query-key-layer-scaling", Values::kNone},
    {"--async-save", Values::kNone},
    {"--attention-softmax-in-fp32", Values::kNone},
    {"--ckpt-format", Values::kOne},
    {"--clip-grad", Values::kOne},
    {"--data-cache-path", Values::kOne},
    {"--data-path", Values::kMany},
    {"--dataloader-type", Values::kOne},
    {"--distributed-backend", Values::kOne},
    {"--distributed-timeout-minutes", Values::kOne},
    {"--end-weight-decay", Values::kOne},
    {"--eod-mask-loss", Values::kNone},
    {"--eval-interval", Values::kOne},
    {"--eval-iters", Values::kOne},
    {"--exit-duration-in-mins", Values::kOne},
    {"--exit-interval", Values::kOne},
    {"--finetune", Values::kNone},
    {"--init-method-std", Values::kOne},
    {"--load", Values::kOne},
    {"--log-interval", Values::kOne},
    {"--log-memory-to-tensorboard", Values::kNone},
    {"--log-num-zeros-in-grad", Values::kNone},
    {"--log-params-norm", Values::kNone},
    {"--log-throughput", Values::kNone},
    {"--log-timers-to-tensorboard", Values::kNone},
    {"--log-validation-ppl-to-tensorboard", Values::kNone},
    {"--lr", Values::kOne},
    {"--lr-decay-iters", Values::kOne},
    {"--lr-decay-samples", Values::kOne},
    {"--lr-decay-style", Values::kOne},
    {"--lr-warmup-fraction", Values::kOne},
    {"--lr-warmup-init", Values::kOne},
    {"--lr-warmup-iters", Values::kOne},
    {"--lr-warmup-samples", Values::kOne},
    {"--manual-gc", Values::kNone},
    {"--manual-gc-interval", Values::kOne},
    {"--master_addr", Values::kOne},  // torchrun's
    {"--master_port", Values::kOne},
    {"--max-position-embeddings", Values::kOne},  // the sequence is --seq-length
    {"--merge-file", Values::kOne},
    {"--min-lr", Values::kOne},
    {"--mock-data", Values::kNone},
    {"--moe-aux-loss-coeff", Values::kOne},
    {"--moe-router-load-balancing-type", Values::kOne},
    {"--moe-z-loss-coeff", Values::kOne},
    {"--nnodes", Values::kOne},  // torchrun's: the GPU count is --gpus
    {"--no-load-optim", Values::kNone},
    {"--no-load-rng", Values::kNone},
    {"--node_rank", Values::kOne},
    {"--norm-epsilon", Values::kOne},
    {"--nproc_per_node", Values::kOne},
    {"--num-workers", Values::kOne},
    {"--rdzv_backend", Values::kOne},
    {"--rdzv_endpoint", Values::kOne},
    {"--rdzv_id", Values::kOne},
    {"--reset-attention-mask", Values::kNone},
    {"--reset-position-ids", Values::kNone},
    {"--rotary-base", Values::kOne},
    {"--rotary-percent", Values::kOne},
    {"--save", Values::kOne},
    {"--save-interval", Values::kOne},
    {"--seed", Values::kOne},
    {"--split", Values::kOne},
    {"--start-weight-decay", Values::kOne},
    {"--tensorboard-dir", Values::kOne},
    {"--tensorboard-log-interval", Values::kOne},
    {"--test-data-path", Values::kMany},
    {"--timing-log-level", Values::kOne},
    {"--timing-log-option", Values::kOne},
    {"--tokenizer-model", Values::kOne},
    {"--tokenizer-type", Values::kOne},
    {"--train-data-path", Values::kMany},
    {"--train-iters", Values::kOne},
    {"--train-samples", Values::kOne},
    {"--use-checkpoint-args", Values::kNone},
    {"--use-mcore-models", Values::kNone},
    {"--valid-data-path", Values::kMany},
    {"--vocab-file", Values::kOne},
    {"--wandb-exp-name", Values::kOne},
    {"--wandb-project", Values::kOne},
    {"--wandb-save-dir", Values::kOne},
    {"--weight-decay", Values::kOne},
});

const IgnoredArgument* findIgnored(std::string_view name) {
  static const bool sorted = std::is_sorted(
      kIgnored.begin(), kIgnored.end(),
      [](const IgnoredArgument& a, const IgnoredArgument& b) { return a.name < b.name; });
  EVSIM_CHECK(sorted, "the ignored Megatron argument table is not sorted");
  auto it = std::lower_bound(
      kIgnored.begin(), kIgnored.end(), name,
      [](const IgnoredArgument& entry, std::string_view key) { return entry.name < key; });
  return it != kIgnored.end() && it->name == name ? &*it : nullptr;
}

bool isArgumentName(const std::string& token) {
  return token.size() > 2 && token.rfind("--", 0) == 0;
}

}  // namespace

std::vector<std::string> acceptIgnoredMegatronArgs(const std::vector<std::string>& extras) {
  std::vector<std::string> accepted;
  for (size_t i = 0; i < extras.size();) {
    const std::string& token = extras[i];
    const size_t equals = token.find('=');
    const std::string name = token.substr(0, equals);
    const IgnoredArgument* entry = isArgumentName(name) ? findIgnored(name) : nullptr;
    if (entry == nullptr) {
      if (!isArgumentName(name)) {
        EVSIM_THROW(InputError, "unexpected argument '{}' (a value without its flag?)",
                    clipped(token, 200));
      }
      EVSIM_THROW(InputError,
                  "unknown argument {}: neither eventsim's nor a Megatron-LM argument without "
                  "effect on time or memory (eventsim <command> --help lists the mapped ones)",
                  clipped(name, 200));
    }
    std::string written = token;
    ++i;
    if (equals == std::string::npos && entry->values != Values::kNone) {
      const size_t first = i;
      while (i < extras.size() && !isArgumentName(extras[i]) &&
             (entry->values == Values::kMany || i == first)) {
        written += " " + extras[i++];
      }
      if (i == first) EVSIM_THROW(InputError, "{}: needs a value", name);
    } else if (equals != std::string::npos && entry->values == Values::kNone) {
      EVSIM_THROW(InputError, "{}: a switch, it takes no value ('{}')", name, clipped(token, 200));
    }
    accepted.push_back(std::move(written));
  }
  return accepted;
}

bool isIgnoredMegatronArg(const std::string& name) { return findIgnored(name) != nullptr; }

namespace {

// Guarded: the Python module runs commands on threads of their own (it defers nothing, but its
// commands take).
std::mutex& fileIgnoredMutex() {
  static std::mutex mutex;
  return mutex;
}
std::vector<std::string>& fileIgnored() {
  static std::vector<std::string> accepted;
  return accepted;
}

}  // namespace

void deferFileIgnoredArgs(std::vector<std::string> accepted) {
  std::lock_guard<std::mutex> lock(fileIgnoredMutex());
  fileIgnored() = std::move(accepted);
}

std::vector<std::string> takeFileIgnoredArgs() {
  std::lock_guard<std::mutex> lock(fileIgnoredMutex());
  return std::exchange(fileIgnored(), {});
}

std::string ignoredArgsNote(const std::vector<std::string>& accepted) {
  if (accepted.empty()) return "";
  return fmt::format("note: ignored (no effect on time or memory): {}", fmt::join(accepted, ", "));
}

}  // namespace evsim
