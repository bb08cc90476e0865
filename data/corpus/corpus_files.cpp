#include "data/corpus/corpus_files.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "data/io/read_file.h"

namespace sinklm {

std::string corpus_split_file(const std::string& dir, Split split) { return dir + "/" + split_name(split) + ".jsonl"; }

std::string corpus_jsonl_line(const CorpusDocument& doc) {
  return nlohmann::json{{"id", doc.id}, {"text", doc.text}}.dump() + "\n";
}

std::vector<CorpusDocument> read_corpus_split(const std::string& dir, Split split) {
  std::string path = corpus_split_file(dir, split);
  std::istringstream lines(read_file(path));
  std::vector<CorpusDocument> docs;
  size_t line_number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++line_number;
    if (line.empty()) continue;
    try {
      nlohmann::json j = nlohmann::json::parse(line);
      docs.push_back(CorpusDocument{j.at("id").get<std::string>(), j.at("text").get<std::string>()});
    } catch (const nlohmann::json::exception& e) {
      fail(path, ":", line_number, ": not a {\"id\", \"text\"} JSON line: ", e.what());
    }
  }
  return docs;
}

}  // namespace sinklm
