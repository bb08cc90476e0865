// The subcommands of `sinklm`, one file of cli/ each; listed in cli/main.cpp. Each parses its own flags
// (core/config/args.h) and calls the libraries below; no library calls back up into cli/.
#pragma once
#include <string>
#include <vector>

namespace sinklm {

int run_config_command(const std::vector<std::string>& args);    // config --markdown | --yaml
int run_info_command(const std::vector<std::string>& args);      // info <config.yaml | checkpoint-dir>
int run_init_command(const std::vector<std::string>& args);      // init --config F --out DIR
int run_quantize_command(const std::vector<std::string>& args);  // quantize --checkpoint DIR --out DIR
int run_export_command(const std::vector<std::string>& args);    // export hf|gguf --checkpoint DIR --out PATH
int run_forward_command(const std::vector<std::string>& args);   // forward --checkpoint DIR ...
int run_tokenize_command(const std::vector<std::string>& args);  // tokenize --tokenizer PATH [--decode]
int run_prepare_command(const std::vector<std::string>& args);   // prepare corpus|shards|sentencepiece
int run_train_command(const std::vector<std::string>& args);     // [mpirun -np N] train --config F --out DIR
int run_stream_command(const std::vector<std::string>& args);    // stream --checkpoint DIR --text FILE ...
int run_serve_command(const std::vector<std::string>& args);     // serve --checkpoint DIR
int run_bench_decode_command(const std::vector<std::string>& args);  // bench-decode (scripts/bench/bench_serve)
// eval --checkpoint DIR --tasks LIST --data DIR | eval --compare A B | eval build-tasks ...
int run_eval_command(const std::vector<std::string>& args);
int run_analyze_command(const std::vector<std::string>& args);   // analyze --checkpoint DIR --text FILE --out DIR

}  // namespace sinklm
