// Subcommands of the data module (tokenizers, corpus, shards); listed in cli/main.cpp.
#pragma once
#include <string>
#include <vector>

namespace sinklm {

int run_tokenize_command(const std::vector<std::string>& args);  // sinklm tokenize --tokenizer PATH [--decode]
int run_prepare_command(const std::vector<std::string>& args);   // sinklm prepare corpus|shards|sentencepiece

}  // namespace sinklm
