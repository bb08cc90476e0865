// Subcommands of the serve module; listed in cli/main.cpp.
#pragma once
#include <string>
#include <vector>

namespace sinklm {

int run_stream_command(const std::vector<std::string>& args);  // sinklm stream --checkpoint DIR --text FILE ...
int run_serve_command(const std::vector<std::string>& args);   // sinklm serve --checkpoint DIR
int run_bench_decode_command(const std::vector<std::string>& args);  // sinklm bench-decode (scripts/bench_serve)

}  // namespace sinklm
