// The steps of `sinklm prepare <step>`; dispatched by run_prepare_command (prepare_command.cpp).
#pragma once
#include <string>
#include <vector>

namespace sinklm {

int prepare_corpus(const std::vector<std::string>& args);          // prepare_corpus.cpp
int prepare_shards(const std::vector<std::string>& args);          // prepare_shards.cpp
int prepare_sentencepiece(const std::vector<std::string>& args);   // prepare_sentencepiece.cpp
int prepare_synthetic(const std::vector<std::string>& args);       // prepare_synthetic_command.cpp

}  // namespace sinklm
