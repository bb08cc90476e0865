// sinklm tokenize: text on stdin -> whitespace-separated ids on stdout, or back with --decode; with --jsonl
// one document per line -> one line of ids per document.
#include <chrono>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/config/args.h"
#include "core/error.h"
#include "cli/commands.h"
#include "data/tokenizers/tokenizer.h"

namespace sinklm {
namespace {

TokenIds parse_ids(const std::string& text) {
  TokenIds ids;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    size_t used = 0;
    unsigned long long id = 0;
    try {
      id = std::stoull(word, &used);
    } catch (const std::exception&) {
    }
    if (used != word.size() || word[0] == '-' || id > UINT32_MAX)
      fail("stdin: '", word, "' is not a token id (expected whitespace-separated non-negative integers)");
    ids.push_back(static_cast<uint32_t>(id));
  }
  return ids;
}

// "1 2 3\n"
std::string join_ids(const TokenIds& ids) {
  std::string out;
  out.reserve(ids.size() * 6 + 1);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out.push_back(' ');
    out += std::to_string(ids[i]);
  }
  out.push_back('\n');
  return out;
}

// One document per line: a JSON string, or an object with a "text" string (as in a corpus split file).
std::vector<std::string> parse_jsonl_documents(const std::string& input) {
  std::vector<std::string> docs;
  std::istringstream lines(input);
  size_t line_number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++line_number;
    try {
      nlohmann::json value = nlohmann::json::parse(line);
      docs.push_back(value.is_object() ? value.at("text").get<std::string>() : value.get<std::string>());
    } catch (const nlohmann::json::exception& e) {
      fail("stdin line ", line_number, ": --jsonl expects a JSON string or {\"text\": ...} per line: ", e.what());
    }
  }
  return docs;
}

}  // namespace

int run_tokenize_command(const std::vector<std::string>& argv) {
  std::string tokenizer_path;
  bool decode = false, jsonl = false, time = false;
  int threads_flag = 0;
  Args args("tokenize", "--tokenizer PATH [--decode | --jsonl] [--threads N] [--time] < input > output",
            {flag(&tokenizer_path, "tokenizer", "PATH", "tokenizer.json, vocab.json (+ merges.txt), *.tiktoken or SentencePiece *.model"),
             flag(&decode, "decode", "read ids, write text (default: read text, write ids)"),
             flag(&jsonl, "jsonl", "one document per input line (JSON string or {\"text\": ...}); one line of ids per "
                                   "document, encoded in parallel"),
             flag(&threads_flag, "threads", "N", "encoding threads (0 = all)", Range{0, 4096}),
             flag(&time, "time", "print the encoding time and throughput (MB/s) to stderr")},
            argv);
  if (args.print_help_if_requested()) return 0;
  std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(args.require("tokenizer"));
  std::ios::sync_with_stdio(false);
  std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  if (jsonl) {
    if (decode) fail("--jsonl encodes documents; it does not combine with --decode");
    std::vector<std::string> docs = parse_jsonl_documents(input);
    std::vector<std::string_view> views(docs.begin(), docs.end());
    std::string out;
    for (const TokenIds& ids : encode_documents(*tokenizer, views, threads_flag))
      out += join_ids(ids);
    std::cout << out;
    return 0;
  }
  if (decode) {
    std::cout << tokenizer->decode(parse_ids(input));
    return 0;
  }
  const int threads = resolve_thread_count(threads_flag);
  const auto start = std::chrono::steady_clock::now();
  TokenIds ids = tokenizer->encode_large(input, threads);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (time)
    std::cerr << "encoded " << input.size() << " bytes into " << ids.size() << " tokens in " << seconds << " s: "
              << input.size() / 1e6 / seconds << " MB/s on " << threads << " thread(s)\n";
  std::cout << join_ids(ids);
  return 0;
}

}  // namespace sinklm
