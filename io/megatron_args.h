#pragma once
// Megatron-LM arguments that a pasted launch line carries but that change neither the time nor
// the memory of an iteration (learning rate, data paths, logging, checkpointing, torchrun's own
// flags): accepted and named in one note, so that a Megatron command line runs as it is. The
// arguments that do change time or memory are mapped to eventsim's flags where they are
// registered (io/run_options.h, io/model_overrides.h); everything else is refused by name.

#include <string>
#include <vector>

namespace evsim {

// `extras` are the arguments the command's parser did not know, in command-line order ("--lr",
// "3e-4", "--bf16", "--data-path", "a", "b", "--x=1"). Returns them as accepted, one entry per
// argument with its values ("--lr 3e-4", "--data-path a b"), or throws InputError naming the first
// argument that is neither eventsim's nor a Megatron-LM argument listed as without effect.
std::vector<std::string> acceptIgnoredMegatronArgs(const std::vector<std::string>& extras);

// True when `name` ("--lr") is one of the Megatron-LM arguments accepted without effect.
bool isIgnoredMegatronArg(const std::string& name);

// A launch script's arguments without effect (--args-file: ExpandedArgs::ignored), handed from
// main() to the command: RunOptions::acceptMegatronExtras names them with the command line's in
// its one note once the command's flags have parsed, so that a parse error stays the only line on
// stderr. take returns them once (main() names those no command took after parsing).
void deferFileIgnoredArgs(std::vector<std::string> accepted);
std::vector<std::string> takeFileIgnoredArgs();

// The note printed on standard error for the accepted arguments ("" when there are none).
std::string ignoredArgsNote(const std::vector<std::string>& accepted);

}  // namespace evsim
