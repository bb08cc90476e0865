// On-disk form of a prepared corpus directory (written by `sinklm prepare corpus`):
//   <dir>/train.jsonl, validation.jsonl, test.jsonl   one document per line: {"id": "...", "text": "..."}
//                                                     (UTF-8 JSON; ids unique across the corpus)
//   <dir>/manifest.json                               sources, licences, seed, split and per-document
//                                                     byte (and, with a tokenizer, token) counts
#pragma once
#include <string>
#include <vector>

#include "data/corpus/corpus_sources.h"
#include "data/corpus/corpus_split.h"

namespace sinklm {

std::string corpus_split_file(const std::string& dir, Split split);
// One JSONL line (with its newline) for a document.
std::string corpus_jsonl_line(const CorpusDocument& doc);
// Every document of one split, in file order. UserError naming file and line on malformed input.
std::vector<CorpusDocument> read_corpus_split(const std::string& dir, Split split);

}  // namespace sinklm
