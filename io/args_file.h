#pragma once
// `--args-file FILE`: the arguments of a Megatron-LM launch script, read where the flag stands.
// A script sets its arguments in many ways (one torchrun line with continuations, bash arrays
// GPT_ARGS=( ... ), variables TP=8 used as --tensor-model-parallel-size $TP); what is read is
// every `--flag [values]` run of tokens in it (quoted strings over several lines too), with the
// variables assigned in the file substituted. Program names (torchrun, python, *.py) end a flag's
// values. A flag also given on the command line keeps the command line's value. torchrun's
// --nnodes x --nproc_per_node become --gpus for simulate and search when the command line has no
// --gpus. The file's arguments without effect (io/megatron_args.h) go to `ignored`, not to the
// parser, whatever the command calls a flag of the same name.

#include <map>
#include <string>
#include <vector>

namespace evsim {

struct ExpandedArgs {
  std::vector<std::string> args;     // the command line with the file's arguments in place
  std::vector<std::string> dropped;  // $VARIABLES the file does not set, left out
  // Each flag taken from a file (as the file spells it, and the tool's own name for it) -> "FILE
  // as --FLAG": an error about the flag names where its value came from (fromArgsFile).
  std::map<std::string, std::string> origin;
  // The file's Megatron-LM arguments without effect ("--seed 1234"), taken out before parsing and
  // named in the usual note: a launch script's --seed is Megatron's, never simulate's --seed of
  // the --jitter draws (which refuses to stand without --jitter).
  std::vector<std::string> ignored;
};

// " (read from --args-file FILE as --FLAG)" when `message` names a flag the file gave, else "".
std::string fromArgsFile(const ExpandedArgs& expanded, const std::string& message);

// `args` without the program name. Throws InputError naming the file on an unreadable file or
// unbalanced quotes.
ExpandedArgs expandArgsFile(const std::vector<std::string>& args);

// Tokens of one launch script's text (exposed for tests): flags and their values in order.
ExpandedArgs argumentsOfScript(const std::string& text, const std::string& origin);

}  // namespace evsim
