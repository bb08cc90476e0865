// The English text sources of `sinklm prepare corpus`, each taken from Debian packages by name (see
// DebianPackageCache) and cut into documents, one per logical unit.
#pragma once
#include <string>
#include <vector>

#include "data/corpus/debian_package_cache.h"

namespace sinklm {

struct CorpusDocument {
  std::string id;    // "<source>/<unit>", unique and stable across runs
  std::string text;  // cleaned UTF-8, normalised whitespace
};

struct CorpusSource {
  std::string name;
  std::vector<std::string> packages;  // Debian packages the text comes from
  std::string licence;
  std::string unit;  // what one document is
  std::vector<CorpusDocument> (*extract)(DebianPackageCache& cache);
};

// bible-kjv, wordnet, fortunes, dict-gcide, dict-jargon, dict-devil, linux-doc.
const std::vector<CorpusSource>& corpus_sources();

}  // namespace sinklm
