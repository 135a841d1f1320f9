#include "io/torchtitan_config.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <map>
#include <optional>
#include <set>
#include <string_view>

#include "common/error.h"
#include "common/input_file.h"

namespace evsim {

namespace {

// torchtitan's Llama 3 flavours (torchtitan/models/llama3/__init__.py) and the bundled configs
// with the same sizes: FFN = multiple_of x ceil(ffn_dim_multiplier x int(8 dim / 3) / multiple_of)
// gives 14,336 (8B), 28,672 (70B) and 53,248 (405B), the configs' ffn_hidden_size.
const std::map<std::string, std::string>& llama3Flavours() {
  static const std::map<std::string, std::string> flavours = {
      {"8B", "llama3-8b"}, {"70B", "llama3-70b"}, {"405B", "llama3.1-405b"}};
  return flavours;
}

// Tables read and left out: no effect on time or memory as eventsim models them.
const std::set<std::string_view> kIgnoredTables = {
    "job",  "profiling",       "metrics",           "lr_scheduler", "checkpoint", "validation",
    "comm", "fault_tolerance", "memory_estimation", "ft",           "float8",     "quantize"};

class Reader {
 public:
  Reader(const toml::table& root, std::string origin) : root_(root), origin_(std::move(origin)) {}

  // The table `name` (empty when absent); every key of it must be consumed or named ignorable.
  const toml::table* table(const std::string& name) {
    const toml::node* node = root_.get(name);
    if (!node) return nullptr;
    const toml::table* t = node->as_table();
    if (!t) fail(name, "is not a table");
    return t;
  }
  [[noreturn]] void fail(const std::string& key, std::string_view why) const {
    EVSIM_THROW(InputError, "{}: {} {}", origin_, key, why);
  }
  [[noreturn]] void notModelled(const std::string& key, std::string_view value,
                                std::string_view why) const {
    EVSIM_THROW(InputError, "{}: {} = {}: {}", origin_, key, value, why);
  }
  template <typename T>
  std::optional<T> get(const toml::table* t, const std::string& table, std::string_view key) {
    if (!t) return std::nullopt;
    const toml::node* node = t->get(key);
    if (!node) return std::nullopt;
    std::optional<T> value = node->value<T>();
    if (!value) fail(table + "." + std::string(key), "has the wrong type");
    return value;
  }
  const std::string& origin() const { return origin_; }

 private:
  const toml::table& root_;
  std::string origin_;
};

// Keys of `t` not in `mapped` nor `ignored`: refused by name; the ignored ones are noted.
void checkKeys(Reader& r, const toml::table* t, const std::string& table,
               const std::set<std::string_view>& mapped, const std::set<std::string_view>& ignored,
               std::vector<std::string>& noted) {
  if (!t) return;
  for (auto&& [key, node] : *t) {
    const std::string_view k = key.str();
    if (mapped.count(k)) continue;
    if (ignored.count(k)) {
      noted.push_back(table + "." + std::string(k));
      continue;
    }
    r.fail(table + "." + std::string(k), "is not a torchtitan key eventsim maps");
  }
}

std::string scheduleName(Reader& r, const std::string& schedule) {
  static const std::map<std::string, std::string> names = {{"1F1B", "1f1b"},
                                                           {"GPipe", "gpipe"},
                                                           {"Interleaved1F1B", "interleaved"},
                                                           {"ZBVZeroBubble", "zbv"},
                                                           {"DualPipeV", "dualpipev"}};
  auto it = names.find(schedule);
  if (it == names.end()) {
    r.notModelled("parallelism.pipeline_parallel_schedule", schedule,
                  "not a schedule eventsim models (1F1B, GPipe, Interleaved1F1B, ZBVZeroBubble, "
                  "DualPipeV)");
  }
  return it->second;
}

}  // namespace

TorchtitanArgs torchtitanArguments(const std::string& text, const std::string& origin) {
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    EVSIM_THROW(InputError, "{}:{}:{}: {}", origin, e.source().begin.line, e.source().begin.column,
                e.description());
  }
  Reader r(root, origin);
  TorchtitanArgs out;
  auto add = [&out](std::string flag, std::optional<std::string> value = std::nullopt) {
    out.args.push_back(std::move(flag));
    if (value) out.args.push_back(std::move(*value));
  };
  for (auto&& [key, node] : root) {
    const std::string_view k = key.str();
    static const std::set<std::string_view> mapped = {
        "model", "training", "parallelism", "activation_checkpoint", "compile", "optimizer"};
    if (mapped.count(k)) continue;
    if (kIgnoredTables.count(k)) {
      out.ignored.push_back(std::string(k));
      continue;
    }
    r.fail(std::string(k), "is not a torchtitan table eventsim maps");
  }

  // [model]: the flavour, and Float8 through the converters.
  const toml::table* model = r.table("model");
  checkKeys(r, model, "model", {"name", "flavor", "converters"},
            {"hf_assets_path", "tokenizer_path", "print_after_conversion"}, out.ignored);
  const std::string name = r.get<std::string>(model, "model", "name").value_or("");
  if (name != "llama3") {
    r.notModelled("model.name", name.empty() ? "(missing)" : name,
                  "eventsim maps torchtitan's llama3 flavours");
  }
  const std::string flavor = r.get<std::string>(model, "model", "flavor").value_or("");
  auto it = llama3Flavours().find(flavor);
  if (it == llama3Flavours().end()) {
    r.notModelled("model.flavor", flavor.empty() ? "(missing)" : flavor,
                  "not a flavour eventsim has (8B, 70B, 405B)");
  }
  add("--model", it->second);
  bool fp8 = false;
  if (const toml::node* converters = model->get("converters")) {
    const toml::array* list = converters->as_array();
    if (!list) r.fail("model.converters", "is not a list");
    for (const toml::node& c : *list) {
      const std::string converter = c.value<std::string>().value_or("?");
      if (converter != "float8") {
        r.notModelled("model.converters", converter, "only float8 is modelled");
      }
      fp8 = true;
    }
  }
  if (fp8) {
    // Float8 linears with FSDP's fp8 all-gather, as eventsim's fsdp framework models fp8.
    const toml::node* all_gather =
        root.at_path("quantize.linear.float8.enable_fsdp_float8_all_gather").node();
    if (!all_gather) all_gather = root.at_path("float8.enable_fsdp_float8_all_gather").node();
    if (!all_gather || !all_gather->value<bool>().value_or(false)) {
      r.notModelled("quantize.linear.float8.enable_fsdp_float8_all_gather", "false",
                    "eventsim's Float8 with FSDP gathers in fp8 (set it true)");
    }
    add("--fp8-format", "hybrid");
  }

  // [training]: sequence length, batch, precision.
  const toml::table* training = r.table("training");
  checkKeys(r, training, "training",
            {"local_batch_size", "global_batch_size", "seq_len", "mixed_precision_param",
             "mixed_precision_reduce", "enable_cpu_offload", "compile"},
            {"max_norm", "steps", "dataset", "dataset_path", "gc_freq", "gc_debug", "seed",
             "deterministic", "warmup_steps", "debug_moe_force_load_balance"},
            out.ignored);
  const int64_t local_batch = r.get<int64_t>(training, "training", "local_batch_size").value_or(8);
  const int64_t global_batch =
      r.get<int64_t>(training, "training", "global_batch_size").value_or(-1);
  // torchtitan's defaults where the file is silent: seq_len 2048, local_batch_size 8.
  add("--seq-length",
      std::to_string(r.get<int64_t>(training, "training", "seq_len").value_or(2048)));
  const std::string param =
      r.get<std::string>(training, "training", "mixed_precision_param").value_or("bfloat16");
  if (param != "bfloat16") {
    r.notModelled("training.mixed_precision_param", param, "eventsim's fsdp runs bf16 parameters");
  }
  const std::string reduce =
      r.get<std::string>(training, "training", "mixed_precision_reduce").value_or("float32");
  if (reduce != "float32") {
    r.notModelled("training.mixed_precision_reduce", reduce, "eventsim's fsdp reduces in fp32");
  }
  if (r.get<bool>(training, "training", "enable_cpu_offload").value_or(false)) {
    r.notModelled("training.enable_cpu_offload", "true", "FSDP's CPU offload is not modelled");
  }

  // [parallelism]
  const toml::table* par = r.table("parallelism");
  checkKeys(r, par, "parallelism",
            {"data_parallel_replicate_degree", "data_parallel_shard_degree",
             "fsdp_reshard_after_forward", "tensor_parallel_degree", "enable_async_tensor_parallel",
             "disable_loss_parallel", "pipeline_parallel_degree", "pipeline_parallel_schedule",
             "pipeline_parallel_microbatch_size", "pipeline_parallel_split_points",
             "pipeline_parallel_layers_per_stage", "context_parallel_degree",
             "expert_parallel_degree", "expert_tensor_parallel_degree"},
            {"context_parallel_rotate_method", "enable_compiled_autograd"}, out.ignored);
  auto degree = [&](std::string_view key) {
    const int64_t value = r.get<int64_t>(par, "parallelism", key).value_or(1);
    if (value < 1 && key != "data_parallel_shard_degree") {
      r.notModelled("parallelism." + std::string(key), std::to_string(value), "must be >= 1");
    }
    return value;
  };
  if (degree("data_parallel_replicate_degree") != 1) {
    r.notModelled("parallelism.data_parallel_replicate_degree",
                  std::to_string(degree("data_parallel_replicate_degree")),
                  "HSDP replicas are not modelled (eventsim's fsdp shards over all of D)");
  }
  const int64_t shard =
      r.get<int64_t>(par, "parallelism", "data_parallel_shard_degree").value_or(-1);
  const int64_t tp = degree("tensor_parallel_degree"), pp = degree("pipeline_parallel_degree");
  const int64_t cp = degree("context_parallel_degree"), ep = degree("expert_parallel_degree");
  // torchtitan's default expert TP is 1 (whole experts per rank under EP), not Megatron's M.
  const int64_t etp = degree("expert_tensor_parallel_degree");
  if (r.get<bool>(par, "parallelism", "enable_async_tensor_parallel").value_or(false)) {
    r.notModelled("parallelism.enable_async_tensor_parallel", "true",
                  "async TP's overlap of the TP collectives with the GEMMs is not modelled");
  }
  if (r.get<bool>(par, "parallelism", "disable_loss_parallel").value_or(false) && tp > 1) {
    r.notModelled("parallelism.disable_loss_parallel", "true",
                  "eventsim's loss is vocabulary-parallel under TP");
  }
  if (par && par->get("pipeline_parallel_split_points")) {
    const toml::array* points = par->get("pipeline_parallel_split_points")->as_array();
    if (!points || !points->empty()) {
      r.notModelled("parallelism.pipeline_parallel_split_points", "[...]",
                    "give the split as --stage-layers instead");
    }
  }
  if (par && par->get("pipeline_parallel_layers_per_stage")) {
    r.notModelled("parallelism.pipeline_parallel_layers_per_stage", "...",
                  "give the split as --stage-layers or --virtual-stages instead");
  }
  add("--framework", "fsdp");
  if (tp > 1) {
    add("--tp", std::to_string(tp));
    add("--sequence-parallel");  // torchtitan's TP is always sequence-parallel
  }
  if (pp > 1) add("--pp", std::to_string(pp));
  if (cp > 1) add("--cp", std::to_string(cp));
  if (ep > 1) add("--ep", std::to_string(ep));
  if (ep > 1 && etp != tp) add("--etp", std::to_string(etp));
  if (shard >= 1) add("--dp", std::to_string(shard));
  const std::string reshard =
      r.get<std::string>(par, "parallelism", "fsdp_reshard_after_forward").value_or("default");
  if (reshard != "default") add("--reshard-after-forward", reshard);

  // The batch: torchtitan's local batch is per data-parallel rank; under PP it is split into
  // micro-batches of pipeline_parallel_microbatch_size. Without a shard degree (-1: the rest of
  // the GPUs) the global batch is left to --global-batch.
  int64_t micro_batch = local_batch;
  if (pp > 1) {
    micro_batch =
        r.get<int64_t>(par, "parallelism", "pipeline_parallel_microbatch_size").value_or(1);
    add("--schedule",
        scheduleName(
            r,
            r.get<std::string>(par, "parallelism", "pipeline_parallel_schedule").value_or("1F1B")));
  }
  add("--micro-batch", std::to_string(micro_batch));
  if (global_batch > 0) {
    add("--global-batch", std::to_string(global_batch));
  } else if (shard >= 1) {
    add("--global-batch", std::to_string(local_batch * shard));
  } else {
    out.derive_global_batch = true;
    out.local_batch = local_batch;
    out.model_parallel = tp * pp * cp;
  }

  // [activation_checkpoint]
  const toml::table* ac = r.table("activation_checkpoint");
  checkKeys(r, ac, "activation_checkpoint", {"mode", "selective_ac_option"},
            {"preserve_rng_state", "determinism_check", "debug", "early_stop",
             "per_op_sac_force_recompute_mm_shapes_by_fqns"},
            out.ignored);
  const std::string mode =
      r.get<std::string>(ac, "activation_checkpoint", "mode").value_or("selective");
  const std::string option =
      r.get<std::string>(ac, "activation_checkpoint", "selective_ac_option").value_or("2");
  if (mode == "none") {
    add("--recompute", "none");
  } else if (mode == "full" || (mode == "selective" && option == "1")) {
    add("--recompute", "full");  // every block checkpointed
  } else if (mode == "selective" && option == "op") {
    add("--recompute", "selective-op");
  } else if (mode == "selective" && !option.empty() &&
             option.find_first_not_of("0123456789") == std::string::npos) {
    // torchtitan's layer SAC: every N-th block (N = 0 checkpoints every block, as 1 does).
    if (option.size() > 6) {
      r.notModelled("activation_checkpoint.selective_ac_option", option, "too large a layer step");
    }
    add("--recompute", "full");
    if (std::stoi(option) > 1) add("--recompute-every", std::to_string(std::stoi(option)));
  } else if (mode == "selective") {
    r.notModelled("activation_checkpoint.selective_ac_option", option,
                  "expected op or a block step N (torchtitan's selective options)");
  } else {
    r.notModelled("activation_checkpoint.mode", mode, "expected none, selective or full");
  }

  // [compile], [optimizer]
  // torch.compile: each block and the loss run Inductor's fused kernels (--torch-compile on);
  // without it, eager PyTorch's (eventsim's fsdp default, as torchtitan's). torchtitan compiles
  // components = ["model", "loss"] unless told otherwise; ["model"] alone leaves the loss eager
  // (--torch-compile blocks). The training.compile of its configs compiled the loss from
  // 2025-04-02 (bbb1b616e) and left it eager before, which a config does not say: it maps to on,
  // and runs of torchtitan before that date are --torch-compile blocks.
  const toml::table* compile = r.table("compile");
  checkKeys(r, compile, "compile", {"enable", "components"}, {"backend"}, out.ignored);
  const bool legacy_compile = r.get<bool>(training, "training", "compile").value_or(false);
  if (r.get<bool>(compile, "compile", "enable").value_or(false) || legacy_compile) {
    std::string setting = "on";
    if (const toml::node* node = compile ? compile->get("components") : nullptr) {
      const toml::array* list = node->as_array();
      if (!list) r.fail("compile.components", "has the wrong type");
      std::set<std::string> parts;
      for (const toml::node& part : *list) {
        if (!part.value<std::string>()) r.fail("compile.components", "has the wrong type");
        parts.insert(*part.value<std::string>());
      }
      if (parts == std::set<std::string>{"model"}) {
        setting = "blocks";
      } else if (parts != std::set<std::string>{"model", "loss"}) {
        r.notModelled("compile.components", fmt::format("[{}]", fmt::join(parts, ", ")),
                      "eventsim compiles the blocks and the loss ([\"model\", \"loss\"], "
                      "torchtitan's default) or the blocks alone ([\"model\"])");
      }
    }
    add("--torch-compile", setting);
  } else if (compile) {
    if (compile->get("components")) out.ignored.push_back("compile.components");
  }
  const toml::table* optimizer = r.table("optimizer");
  checkKeys(r, optimizer, "optimizer", {"name", "implementation", "fused"},
            {"lr", "eps", "beta1", "beta2", "weight_decay", "early_step_in_backward"},
            out.ignored);
  const std::string opt = r.get<std::string>(optimizer, "optimizer", "name").value_or("AdamW");
  if (opt != "AdamW" && opt != "Adam") {
    r.notModelled("optimizer.name", opt, "eventsim's optimizer state is Adam's");
  }
  // optimizer.implementation (torchtitan since 2025-02-24; default "fused"), or the bool
  // optimizer.fused of its configs before (default false, which ran foreach). A config with
  // neither key runs today's default, fused (as --compile's date, the config does not say it).
  const auto impl = r.get<std::string>(optimizer, "optimizer", "implementation");
  const auto fused = r.get<bool>(optimizer, "optimizer", "fused");
  if (impl && fused) {
    r.fail("optimizer.fused", "and optimizer.implementation both given (torchtitan has one)");
  }
  if (impl && *impl != "fused") {
    if (*impl != "foreach") {
      r.notModelled("optimizer.implementation", *impl, "fused and foreach are modelled");
    }
    add("--optimizer-impl", "foreach");
  } else if (fused && !*fused) {
    add("--optimizer-impl", "foreach");
  }
  return out;
}

std::vector<std::string> expandTorchtitanConfig(const std::vector<std::string>& args,
                                                std::vector<std::string>& ignored) {
  // Where --model names a .toml, and which flags the command line gives itself.
  std::optional<size_t> at;
  std::string path;
  std::set<std::string> given;
  std::optional<int64_t> gpus;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0) continue;
    const size_t eq = a.find('=');
    const std::string flag = a.substr(0, eq);
    std::string value =
        eq == std::string::npos ? (i + 1 < args.size() ? args[i + 1] : "") : a.substr(eq + 1);
    if (flag == "--model" && value.size() > 5 && value.substr(value.size() - 5) == ".toml") {
      at = i;
      path = value;
      continue;
    }
    given.insert(flag);
    if (flag == "--gpus") {
      try {
        gpus = std::stoll(value);
      } catch (const std::exception&) {
        // --gpus's own parser names a bad value.
      }
    }
  }
  if (!at) return args;
  // Aliases of the flags a config sets (run_options.cpp), so that either spelling wins.
  static const std::map<std::string, std::vector<std::string>> aliases = {
      {"--tp", {"--tensor-model-parallel-size", "--strategy"}},
      {"--pp", {"--pipeline-model-parallel-size", "--strategy"}},
      {"--dp", {"--strategy"}},
      {"--cp", {"--context-parallel-size"}},
      {"--ep", {"--expert-model-parallel-size"}},
      {"--etp", {"--expert-tensor-parallel-size"}},
      {"--micro-batch", {"--micro-batch-size"}},
      {"--global-batch", {"--global-batch-size"}},
      {"--recompute", {"--recompute-granularity", "--recompute-activations"}}};
  auto onCommandLine = [&](const std::string& flag) {
    if (given.count(flag)) return true;
    auto it = aliases.find(flag);
    if (it == aliases.end()) return false;
    for (const std::string& alias : it->second) {
      if (given.count(alias)) return true;
    }
    return false;
  };
  const TorchtitanArgs config = torchtitanArguments(readInputFile(path, "torchtitan config"), path);
  ignored = config.ignored;
  std::vector<std::string> out(args.begin(), args.begin() + static_cast<long>(*at));
  for (size_t i = 0; i < config.args.size(); ++i) {
    const std::string& flag = config.args[i];
    const bool has_value = i + 1 < config.args.size() && config.args[i + 1].rfind("--", 0) != 0;
    if (!onCommandLine(flag)) {
      out.push_back(flag);
      if (has_value) out.push_back(config.args[i + 1]);
    }
    if (has_value) ++i;
  }
  if (config.derive_global_batch && gpus && !onCommandLine("--global-batch") &&
      *gpus % config.model_parallel == 0) {
    out.push_back("--global-batch");
    out.push_back(std::to_string(config.local_batch * (*gpus / config.model_parallel)));
  }
  const bool joined = args[*at].find('=') != std::string::npos;
  out.insert(out.end(), args.begin() + static_cast<long>(*at) + (joined ? 1 : 2), args.end());
  return out;
}

}  // namespace evsim
