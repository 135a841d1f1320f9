#include "io/args_file.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "common/error.h"
#include "common/strings.h"
#include "io/megatron_args.h"

namespace evsim {

namespace {

constexpr size_t kMaxScriptBytes = size_t{1} << 20;

bool isFlag(const std::string& token) { return token.size() > 2 && token.rfind("--", 0) == 0; }

std::string flagName(const std::string& token) { return token.substr(0, token.find('=')); }

// Shell words of one logical line: quotes group, '#' at a word's start comments out the rest.
std::vector<std::string> words(const std::string& line, const std::string& origin, int line_no) {
  std::vector<std::string> out;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (char c : line) {
    if (quote != 0) {
      if (c == quote) {
        quote = 0;
      } else {
        word += c;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == ';') {
      if (in_word) out.push_back(word);
      word.clear();
      in_word = false;
    } else if (c == '#' && !in_word) {
      break;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (quote != 0) {
    EVSIM_THROW(InputError, "--args-file {}: line {}: unbalanced {} quote", origin, line_no, quote);
  }
  if (in_word) out.push_back(word);
  return out;
}

// True when `text` ends inside a quote (words()'s rules: '#' at a word's start comments out).
bool quoteOpen(const std::string& text) {
  char quote = 0;
  bool in_word = false;
  for (char c : text) {
    if (quote != 0) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == ';') {
      in_word = false;
    } else if (c == '#' && !in_word) {
      return false;
    } else {
      in_word = true;
    }
  }
  return quote != 0;
}

// A program a launch line runs: it ends the values of the flag before it.
bool isProgram(const std::string& token) {
  static const std::set<std::string> launchers = {
      "torchrun", "python", "python3", "deepspeed", "srun", "mpirun", "bash", "sh", "exec"};
  const bool script = token.size() > 3 && (token.ends_with(".py") || token.ends_with(".sh"));
  return script || launchers.count(token.substr(token.rfind('/') + 1)) > 0;
}

// Substitutes $NAME and ${NAME} from `variables`; false when a variable stays unset.
bool substitute(std::string& token, const std::map<std::string, std::string>& variables) {
  static const std::regex reference(R"(\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*))");
  std::string out;
  bool complete = true;
  auto begin = std::sregex_iterator(token.begin(), token.end(), reference);
  size_t last = 0;
  for (auto it = begin; it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    out += token.substr(last, static_cast<size_t>(m.position()) - last);
    const std::string name = m[1].matched ? m[1].str() : m[2].str();
    auto found = variables.find(name);
    if (found == variables.end()) {
      complete = false;
      out += m.str();
    } else {
      out += found->second;
    }
    last = static_cast<size_t>(m.position() + m.length());
  }
  out += token.substr(last);
  token = out;
  return complete && token.find('$') == std::string::npos;
}

}  // namespace

ExpandedArgs argumentsOfScript(const std::string& text, const std::string& origin) {
  static const std::regex assignment(R"(^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$)");
  std::map<std::string, std::string> variables;
  std::set<std::string> arrays;
  ExpandedArgs out;
  bool in_flag = false;  // the last kept token is a flag or one of its values
  std::istringstream lines(text);
  std::string line, logical;
  int line_no = 0, logical_start = 1;
  while (std::getline(lines, line)) {
    ++line_no;
    if (logical.empty()) logical_start = line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty() && line.back() == '\\') {
      logical += line.substr(0, line.size() - 1) + " ";
      continue;
    }
    logical += line;
    if (quoteOpen(logical)) {
      // GPT_ARGS=" --num-layers 24 \n --hidden-size 1024 " (Megatron's older examples): a quoted
      // string over several lines is one logical line.
      logical += " ";
      continue;
    }
    std::vector<std::string> tokens;
    for (std::string token : words(logical, origin, logical_start)) {
      // $GPT_ARGS holding several arguments becomes its words (as the shell splits it unquoted).
      std::string substituted = token;
      if (token.find('$') != std::string::npos && substitute(substituted, variables) &&
          substituted.find_first_of(" \t") != std::string::npos) {
        for (std::string& part : words(substituted, origin, logical_start)) {
          tokens.push_back(std::move(part));
        }
      } else {
        tokens.push_back(std::move(token));
      }
    }
    logical.clear();
    std::smatch m;
    const std::string first = tokens.empty() ? "" : tokens.front();
    if (tokens.size() >= 1 && std::regex_match(first, m, assignment)) {
      const std::string name = m[1].str(), value = m[2].str();
      if (value.rfind('(', 0) == 0) {
        arrays.insert(name);  // NAME=( --flag v ... ): its words are read as arguments below
        tokens.front() = value.substr(1);
        if (tokens.front().empty()) tokens.erase(tokens.begin());
      } else if (tokens.size() == 1 || (first.rfind("export", 0) == 0 && tokens.size() == 2)) {
        std::string substituted = value;
        if (substitute(substituted, variables)) variables[name] = substituted;
        continue;
      }
    } else if (first == "export" && tokens.size() == 2 &&
               std::regex_match(tokens[1], m, assignment)) {
      std::string substituted = m[2].str();
      if (substitute(substituted, variables)) variables[m[1].str()] = substituted;
      continue;
    }
    for (std::string token : tokens) {
      bool closes_array = false;
      if (token == "(") continue;
      if (token.ends_with(")")) {
        token.pop_back();
        closes_array = true;
      }
      if (!token.empty() && !substitute(token, variables)) {
        const bool array_use = std::any_of(arrays.begin(), arrays.end(), [&](const auto& name) {
          return token.find("{" + name + "[") != std::string::npos ||
                 token.find("$" + name) != std::string::npos;
        });
        const bool value_of_last = in_flag && !out.args.empty() && isFlag(out.args.back());
        if (value_of_last && isIgnoredMegatronArg(flagName(out.args.back()))) {
          // --data-path $DATA_PATH: an argument without effect, left out whole.
          out.dropped.push_back(out.args.back() + " " + token);
          out.args.pop_back();
        } else if (value_of_last) {
          out.args.push_back(token);  // the flag's parser names it: "Could not convert: $TP"
        } else if (!array_use) {
          out.dropped.push_back(token);
        }
        token.clear();
      }
      if (token.empty()) {
        if (closes_array) in_flag = false;
        continue;
      }
      if (isFlag(token)) {
        out.args.push_back(token);
        in_flag = true;
      } else if (isProgram(token)) {
        in_flag = false;
      } else if (in_flag) {
        out.args.push_back(token);
      }
      if (closes_array) in_flag = false;
    }
  }
  if (!logical.empty()) words(logical, origin, logical_start);  // names an unclosed quote
  return out;
}

ExpandedArgs expandArgsFile(const std::vector<std::string>& args) {
  ExpandedArgs out;
  std::set<std::string> given;
  for (const std::string& a : args) {
    if (isFlag(a)) given.insert(flagName(a));
  }
  // One name per option whichever spelling: a file's --tensor-model-parallel-size gives way to
  // the command line's --tp.
  static const std::map<std::string, std::string> canonical = {
      {"--tensor-model-parallel-size", "--tp"},   {"--pipeline-model-parallel-size", "--pp"},
      {"--micro-batch-size", "--micro-batch"},    {"--global-batch-size", "--global-batch"},
      {"--context-parallel-size", "--cp"},        {"--expert-model-parallel-size", "--ep"},
      {"--recompute-granularity", "--recompute"}, {"--overlap-grad-reduce", "--dp-overlap"}};
  auto canon = [&](const std::string& name) {
    auto it = canonical.find(name);
    return it == canonical.end() ? name : it->second;
  };
  std::set<std::string> given_canonical;
  for (const std::string& name : given) given_canonical.insert(canon(name));
  const bool wants_gpus = !args.empty() &&
                          (args.front() == "simulate" || args.front() == "search") &&
                          given.count("--gpus") == 0;

  for (size_t i = 0; i < args.size(); ++i) {
    const std::string name = flagName(args[i]);
    if (name != "--args-file") {
      out.args.push_back(args[i]);
      continue;
    }
    std::string path;
    if (args[i].size() > name.size()) {
      path = args[i].substr(name.size() + 1);
    } else if (i + 1 < args.size()) {
      path = args[++i];
    } else {
      EVSIM_THROW(InputError, "--args-file: needs a file (a Megatron-LM launch script)");
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) EVSIM_THROW(InputError, "--args-file {}: cannot be read", clipped(path, 200));
    std::string text(kMaxScriptBytes + 1, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxScriptBytes) {
      EVSIM_THROW(InputError, "--args-file {}: larger than 1 MiB, not a launch script",
                  clipped(path, 200));
    }
    ExpandedArgs file = argumentsOfScript(text, path);
    out.dropped.insert(out.dropped.end(), file.dropped.begin(), file.dropped.end());
    std::optional<int64_t> nodes, per_node;
    bool skipping = false;
    bool without_effect = false;       // the current flag is a Megatron one without effect
    std::vector<std::string> ignored;  // those flags and their values, as the file gave them
    for (size_t k = 0; k < file.args.size(); ++k) {
      const std::string& token = file.args[k];
      if (isFlag(token)) {
        const std::string flag = flagName(token);
        skipping = given_canonical.count(canon(flag)) > 0;
        without_effect = !skipping && isIgnoredMegatronArg(flag);
        if (wants_gpus && (flag == "--nnodes" || flag == "--nproc_per_node")) {
          const std::string value = token.size() > flag.size() ? token.substr(flag.size() + 1)
                                    : k + 1 < file.args.size() ? file.args[k + 1]
                                                               : "";
          (flag == "--nnodes" ? nodes : per_node) = parseInteger(value);
        }
      }
      if (without_effect) {
        ignored.push_back(token);
        continue;
      }
      if (!skipping) out.args.push_back(token);
      if (!skipping && isFlag(token)) {
        const std::string flag = flagName(token);
        const std::string where = fmt::format("{} as {}", clipped(path, 200), flag);
        out.origin[flag] = where;
        out.origin[canon(flag)] = where;
      }
    }
    try {
      for (std::string& accepted : acceptIgnoredMegatronArgs(ignored)) {
        out.ignored.push_back(std::move(accepted));
      }
    } catch (const InputError& e) {
      EVSIM_THROW(InputError, "--args-file {}: {}", clipped(path, 200), e.what());
    }
    if (wants_gpus && nodes && per_node && *nodes > 0 && *per_node > 0) {
      out.args.push_back("--gpus");
      out.args.push_back(std::to_string(*nodes * *per_node));
    }
  }
  return out;
}

std::string fromArgsFile(const ExpandedArgs& expanded, const std::string& message) {
  if (expanded.origin.empty()) return "";
  // The first "--flag" the message names ("--tp: must be ...", "Could not convert: --tp = x"),
  // and only it: in "--seed requires --jitter" the command line's --seed is at fault, not a
  // --jitter the file gave.
  for (size_t at = message.find("--"); at != std::string::npos; at = message.find("--", at + 2)) {
    if (at > 0 && message[at - 1] != ' ' && message[at - 1] != '\'') continue;
    const size_t end = message.find_first_of(" :=',", at);
    const auto it =
        expanded.origin.find(message.substr(at, end == std::string::npos ? end : end - at));
    return it == expanded.origin.end() ? ""
                                       : fmt::format(" (read from --args-file {})", it->second);
  }
  return "";
}

}  // namespace evsim
