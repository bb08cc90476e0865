#include "data/corpus/corpus_sources.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>

#include "core/error.h"
#include "data/io/byte_stream.h"
#include "data/io/read_file.h"
#include "data/corpus/text_cleaning.h"

namespace fs = std::filesystem;

namespace sinklm {
namespace {

std::string clean(std::string_view text) { return normalize_whitespace(as_utf8(text)); }

void add_document(std::vector<CorpusDocument>& docs, std::string id, std::string text) {
  if (!text.empty()) docs.push_back(CorpusDocument{std::move(id), std::move(text)});
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// --- bible-kjv: the `bible` program of bible-kjv prints the text of bible-kjv-text, "Ge1:1 In the ..."
// per verse; one document per book, chapters separated by a blank line.
std::vector<CorpusDocument> extract_bible(DebianPackageCache& cache) {
  std::string program = cache.unpacked("bible-kjv") + "/usr/bin/bible";
  std::string data_dir = cache.unpacked("bible-kjv-text") + "/usr/lib";
  std::string text = shell_output(str(shell_quote(program), " -p ", shell_quote(data_dir), " -f gen1:1-rev22:21"),
                                  "the bible program needs libreadline8 (apt-get install libreadline8)");
  std::vector<CorpusDocument> docs;
  std::string book, chapter, body;
  for (const std::string& line : lines_of(text)) {
    size_t space = line.find(' '), colon = line.find(':');
    if (space == std::string::npos || colon == std::string::npos || colon > space) continue;
    size_t chapter_start = colon;
    while (chapter_start > 0 && std::isdigit(static_cast<unsigned char>(line[chapter_start - 1]))) --chapter_start;
    std::string verse_book = line.substr(0, chapter_start), verse_chapter = line.substr(chapter_start, colon - chapter_start);
    if (verse_book != book) {
      add_document(docs, "bible-kjv/" + book, clean(body));
      book = verse_book;
      body.clear();
    } else if (verse_chapter != chapter) {
      body += "\n";
    }
    chapter = verse_chapter;
    body += line.substr(space + 1) + "\n";
  }
  add_document(docs, "bible-kjv/" + book, clean(body));
  if (docs.size() != 66) fail(program, " printed ", docs.size(), " books of the Bible instead of 66");
  return docs;
}

// --- WordNet: synsets of data.{noun,verb,adj,adv} as "word, word: gloss; \"example\"" lines; one document
// per lexicographer file (noun.animal, verb.motion, ...).
const char* const kLexicographerFiles[] = {
    "adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal", "noun.artifact", "noun.attribute",
    "noun.body", "noun.cognition", "noun.communication", "noun.event", "noun.feeling", "noun.food", "noun.group",
    "noun.location", "noun.motive", "noun.object", "noun.person", "noun.phenomenon", "noun.plant",
    "noun.possession", "noun.process", "noun.quantity", "noun.relation", "noun.shape", "noun.state",
    "noun.substance", "noun.time", "verb.body", "verb.change", "verb.cognition", "verb.communication",
    "verb.competition", "verb.consumption", "verb.contact", "verb.creation", "verb.emotion", "verb.motion",
    "verb.perception", "verb.possession", "verb.social", "verb.stative", "verb.weather", "adj.ppl"};

std::vector<CorpusDocument> extract_wordnet(DebianPackageCache& cache) {
  std::string dir = cache.unpacked("wordnet-base") + "/usr/share/wordnet/";
  std::map<int, std::string> by_file;
  for (const char* part : {"data.noun", "data.verb", "data.adj", "data.adv"}) {
    std::string path = dir + part;
    for (const std::string& line : lines_of(read_file(path))) {
      if (line.empty() || line[0] == ' ') continue;  // licence header
      size_t bar = line.find(" | ");
      std::istringstream fields(line.substr(0, bar));
      std::string offset, type, count_hex;
      int lexfile = -1;
      fields >> offset >> lexfile >> type >> count_hex;
      if (lexfile < 0 || lexfile >= int(std::size(kLexicographerFiles)) || bar == std::string::npos)
        fail(path, ": unexpected synset line '", line.substr(0, 60), "'");
      int count = std::stoi(count_hex, nullptr, 16);
      std::string words;
      for (int i = 0; i < count; ++i) {
        std::string word, lex_id;
        fields >> word >> lex_id;
        if (size_t paren = word.find('('); paren != std::string::npos) word.erase(paren);  // adj. markers
        std::replace(word.begin(), word.end(), '_', ' ');
        words += (i ? ", " : "") + word;
      }
      std::string gloss = line.substr(bar + 3);
      while (!gloss.empty() && gloss.back() == ' ') gloss.pop_back();
      by_file[lexfile] += words + ": " + gloss + "\n";
    }
  }
  std::vector<CorpusDocument> docs;
  for (auto& [lexfile, text] : by_file) add_document(docs, str("wordnet/", kLexicographerFiles[lexfile]), clean(text));
  return docs;
}

// --- fortune cookie files: fortunes separated by "%" lines; one document per file.
std::vector<CorpusDocument> extract_fortunes(DebianPackageCache& cache) {
  std::vector<std::string> files;
  for (const char* package : {"fortunes-min", "fortunes"}) {
    fs::path dir = fs::path(cache.unpacked(package)) / "usr/share/games/fortunes";
    for (const auto& entry : fs::directory_iterator(dir)) {
      std::string ext = entry.path().extension().string();
      if (entry.is_regular_file() && !entry.is_symlink() && ext != ".dat" && ext != ".u8") files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<CorpusDocument> docs;
  for (const std::string& path : files) {
    std::string text;
    for (const std::string& line : lines_of(read_file(path))) text += line == "%" ? "\n\n" : line + "\n";
    add_document(docs, "fortunes/" + fs::path(path).filename().string(), clean(text));
  }
  return docs;
}

// --- dictd dictionaries: <name>.index ("headword\t<offset>\t<length>", numbers in dictd's base 64) into
// <name>.dict.dz; entries in file order, one document per group of entries sharing a two-letter prefix.
uint64_t dictd_number(const std::string& digits, const std::string& path) {
  static const std::string kDigits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  uint64_t value = 0;
  for (char c : digits) {
    size_t d = kDigits.find(c);
    if (d == std::string::npos) fail(path, ": '", digits, "' is not a dictd base-64 number");
    value = value * 64 + d;
  }
  return value;
}

std::vector<CorpusDocument> extract_dictd(DebianPackageCache& cache, const std::string& package, const std::string& name) {
  std::string base = cache.unpacked(package) + "/usr/share/dictd/" + name;
  std::string dict = read_gzip_file(base + ".dict.dz");
  struct Entry {
    uint64_t offset, length;
    std::string headword;
  };
  std::map<uint64_t, Entry> entries;  // by offset: synonyms share one definition
  for (const std::string& line : lines_of(read_file(base + ".index"))) {
    size_t tab1 = line.find('\t'), tab2 = line.rfind('\t');
    if (tab1 == std::string::npos || tab1 == tab2) fail(base, ".index: malformed line '", line, "'");
    std::string headword = line.substr(0, tab1);
    if (headword.rfind("00-database", 0) == 0 || headword.rfind("00database", 0) == 0) continue;
    Entry e{dictd_number(line.substr(tab1 + 1, tab2 - tab1 - 1), base), dictd_number(line.substr(tab2 + 1), base), headword};
    if (e.offset + e.length > dict.size()) fail(base, ".index: entry '", headword, "' points past the end of the dictionary");
    entries.emplace(e.offset, e);
  }
  std::vector<CorpusDocument> docs;
  std::string group, text;
  for (const auto& [offset, e] : entries) {
    std::string key;
    for (char c : e.headword)
      if (std::isalnum(static_cast<unsigned char>(c)) && key.size() < 2) key.push_back(static_cast<char>(std::tolower(c)));
    if (key != group) {
      add_document(docs, str("dict-", name, "/", group), clean(text));
      group = key;
      text.clear();
    }
    text += strip_dictionary_markup(dedent(std::string_view(dict).substr(e.offset, e.length))) + "\n";
  }
  add_document(docs, str("dict-", name, "/", group), clean(text));
  // Headwords in the same group may be spread over the file: keep ids unique by merging same-id documents.
  std::map<std::string, std::string> merged;
  for (auto& d : docs) merged[d.id] += d.text;
  docs.clear();
  for (auto& [id, text_of] : merged) add_document(docs, id, clean(text_of));
  return docs;
}

std::vector<CorpusDocument> extract_gcide(DebianPackageCache& cache) { return extract_dictd(cache, "dict-gcide", "gcide"); }
std::vector<CorpusDocument> extract_jargon(DebianPackageCache& cache) { return extract_dictd(cache, "dict-jargon", "jargon"); }
std::vector<CorpusDocument> extract_devil(DebianPackageCache& cache) { return extract_dictd(cache, "dict-devil", "devil"); }

// --- Linux kernel documentation: the English reStructuredText sources (translations/ excluded); one
// document per file.
std::vector<CorpusDocument> extract_linux_doc(DebianPackageCache& cache) {
  fs::path root = fs::path(cache.unpacked("linux-doc-6.1")) / "usr/share/doc/linux-doc-6.1/Documentation";
  std::vector<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    std::string path = entry.path().string();
    if (entry.is_regular_file() && path.size() > 7 && path.compare(path.size() - 7, 7, ".rst.gz") == 0 &&
        path.find("/translations/") == std::string::npos)
      files.push_back(path);
  }
  std::sort(files.begin(), files.end());
  std::vector<CorpusDocument> docs;
  for (const std::string& path : files) {
    std::string relative = fs::relative(path, root).string();
    add_document(docs, "linux-doc/" + relative.substr(0, relative.size() - 3),
                 clean(strip_rst_markup(as_utf8(read_gzip_file(path)))));
  }
  return docs;
}

}  // namespace

const std::vector<CorpusSource>& corpus_sources() {
  static const std::vector<CorpusSource> sources = {
      {"bible-kjv", {"bible-kjv", "bible-kjv-text"}, "public domain text (King James Version); Debian packaging GPL-2+",
       "a book", extract_bible},
      {"wordnet", {"wordnet-base"}, "WordNet 3.0 licence (Princeton University; permissive)",
       "a lexicographer file of synsets", extract_wordnet},
      {"fortunes", {"fortunes-min", "fortunes"}, "BSD (fortune-mod); quotations per their copyright file",
       "a fortune file", extract_fortunes},
      {"dict-gcide", {"dict-gcide"}, "GPL-3+ (GNU Collaborative International Dictionary of English; Webster 1913 is public domain)",
       "entries sharing a two-letter prefix", extract_gcide},
      {"dict-jargon", {"dict-jargon"}, "public domain (The Jargon File 4.4.7)", "entries sharing a two-letter prefix",
       extract_jargon},
      {"dict-devil", {"dict-devil"}, "public domain (Ambrose Bierce, The Devil's Dictionary, 1911)",
       "entries sharing a two-letter prefix", extract_devil},
      {"linux-doc", {"linux-doc-6.1"}, "GPL-2.0 (Linux kernel documentation; some files carry other licences, see SPDX lines)",
       "a documentation file", extract_linux_doc},
  };
  return sources;
}

}  // namespace sinklm
