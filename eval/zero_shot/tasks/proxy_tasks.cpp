#include "eval/zero_shot/tasks/proxy_tasks.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/files/atomic_dir.h"
#include "core/error.h"
#include "data/corpus/corpus_files.h"
#include "core/seeded_random.h"

namespace sinklm {
namespace {

using Json = nlohmann::json;

constexpr int kMinPassageWords = 20, kMaxPassageWords = 150;
constexpr int kMinSentenceWords = 5, kMaxSentenceWords = 40;
constexpr int kMinDefinitionWords = 3, kMaxDefinitionWords = 30;

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

std::vector<std::string> words_of(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

std::string join(const std::vector<std::string>& words, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end; ++i) out += (i > begin ? " " : "") + words[i];
  return out;
}

// Blank-line separated paragraphs, each as its lines (trailing spaces removed).
std::vector<std::vector<std::string>> paragraphs_of(const std::string& text) {
  std::vector<std::vector<std::string>> out(1);
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (line.empty()) {
      if (!out.back().empty()) out.emplace_back();
    } else {
      out.back().push_back(line);
    }
  }
  if (out.back().empty()) out.pop_back();
  return out;
}

std::string flatten(const std::vector<std::string>& lines, size_t begin = 0) {
  std::string joined;
  for (size_t i = begin; i < lines.size(); ++i) joined += lines[i] + " ";
  return join(words_of(joined), 0, words_of(joined).size());
}

bool ends_sentence(const std::string& word) {
  size_t end = word.find_last_not_of("\"')]");
  return end != std::string::npos && std::strchr(".!?", word[end]) != nullptr && word.size() > 1;
}

// Sentences of a flattened paragraph, as word lists (a sentence ends with a word ending in . ! or ?).
std::vector<std::vector<std::string>> sentences_of(const std::string& paragraph) {
  std::vector<std::vector<std::string>> out(1);
  for (const auto& w : words_of(paragraph)) {
    out.back().push_back(w);
    if (ends_sentence(w)) out.emplace_back();
  }
  out.pop_back();  // the unterminated tail (or the empty list after the last sentence)
  return out;
}

bool is_alphabetic(const std::string& word) {
  return word.size() >= 2 && std::all_of(word.begin(), word.end(), [](unsigned char c) { return std::isalpha(c); });
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool is_dictionary(const std::string& id) { return starts_with(id, "wordnet/") || starts_with(id, "dict-"); }

// --- candidates per corpus document ---

// LAMBADA: the longest run of whole sentences of a paragraph with at most kMaxPassageWords words, ending
// with a plain word, with the final punctuation removed so the text ends on the target word.
void lambada_candidates(const std::string& paragraph, std::vector<Json>& out) {
  auto sentences = sentences_of(paragraph);
  if (sentences.size() < 2) return;
  std::vector<std::string> words;
  for (size_t s = sentences.size(); s-- > 0;) {
    if (words.size() + sentences[s].size() > static_cast<size_t>(kMaxPassageWords)) break;
    words.insert(words.begin(), sentences[s].begin(), sentences[s].end());
  }
  if (words.size() < static_cast<size_t>(kMinPassageWords)) return;
  std::string last = words.back();
  last.erase(last.find_last_not_of(".!?\"')]") + 1);
  if (!is_alphabetic(last)) return;
  words.back() = last;
  out.push_back({{"text", join(words, 0, words.size())}});
}

struct SentencePair {
  std::string first, next;
};

bool sentence_size_ok(const std::vector<std::string>& s) {
  return s.size() >= static_cast<size_t>(kMinSentenceWords) && s.size() <= static_cast<size_t>(kMaxSentenceWords);
}

void sentence_pairs(const std::string& paragraph, size_t doc, std::vector<std::pair<size_t, SentencePair>>& out) {
  auto sentences = sentences_of(paragraph);
  for (size_t i = 0; i + 1 < sentences.size(); i += 2)
    if (sentence_size_ok(sentences[i]) && sentence_size_ok(sentences[i + 1]))
      out.push_back(
          {doc, {join(sentences[i], 0, sentences[i].size()), join(sentences[i + 1], 0, sentences[i + 1].size())}});
}

struct Definition {
  std::string word, gloss;
};

// The first sentence of a gloss, without "1." numbering, "(Field)" labels or "[...]" notes; empty when
// too short or too long, a cross-reference ("See ...", "Same as ..."), or when it gives the word away.
std::string clean_gloss(const std::string& text, const std::string& word) {
  std::string s;
  int depth = 0;
  for (char c : text) {
    if (c == '[') ++depth;
    if (depth == 0) s += c;
    if (c == ']' && depth > 0) --depth;
  }
  auto words = words_of(s);
  size_t begin = 0;
  while (begin < words.size() &&
         (std::isdigit(static_cast<unsigned char>(words[begin][0])) || words[begin][0] == '(')) {
    if (words[begin][0] == '(')
      while (begin < words.size() && words[begin].back() != ')') ++begin;
    ++begin;
  }
  size_t end = begin;
  while (end < words.size() && end - begin < static_cast<size_t>(kMaxDefinitionWords)) {
    const std::string& w = words[end++];
    if (w.back() == ';' || ends_sentence(w)) break;
  }
  if (end - begin < static_cast<size_t>(kMinDefinitionWords) || end - begin >= static_cast<size_t>(kMaxDefinitionWords))
    return "";
  std::string gloss = join(words, begin, end);
  if (starts_with(gloss, "See ") || starts_with(lower(gloss), "same as")) return "";  // cross-references
  while (!gloss.empty() && std::strchr(".;:,", gloss.back())) gloss.pop_back();
  // A gloss that contains the word's stem ("One who flouts" for "flouter") gives the answer away.
  const std::string stem = word.substr(0, std::max<size_t>(4, word.size() >= 3 ? word.size() - 3 : 0));
  if (lower(gloss).find(stem) != std::string::npos) return "";
  return gloss;
}

void add_definition(const std::string& headword, const std::string& gloss_text, std::vector<Definition>& out) {
  std::string word = lower(headword);
  if (!is_alphabetic(word)) return;
  std::string gloss = clean_gloss(gloss_text, word);
  if (!gloss.empty()) out.push_back({word, gloss});
}

// WordNet lines "word, word: gloss; \"example\"": the first word and the gloss before any example.
// GCIDE entries "Word, pos. [etymology] (Field)\n definition ...": the header runs until its brackets close.
// Devil's Dictionary entries "WORD, n.  definition ...".
void definitions(const std::string& id, const std::string& text, std::vector<Definition>& out) {
  if (starts_with(id, "wordnet/")) {
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      size_t colon = line.find(": ");
      if (colon == std::string::npos) continue;
      std::string gloss = line.substr(colon + 2);
      add_definition(line.substr(0, std::min(line.find(','), colon)), gloss.substr(0, gloss.find('"')), out);
    }
    return;
  }
  for (const auto& lines : paragraphs_of(text)) {
    const std::string& first = lines[0];
    const std::string headword = first.substr(0, first.find(','));
    if (starts_with(id, "dict-devil/")) {
      size_t gap = first.find("  ");
      if (gap == std::string::npos || first.find(',') > gap) continue;
      std::vector<std::string> body = lines;
      body[0] = first.substr(gap);
      add_definition(headword, flatten(body), out);
    } else if (starts_with(id, "dict-gcide/") && first.find(',') != std::string::npos) {
      size_t line = 0;
      for (int depth = 0; line < lines.size(); ++line) {
        for (char c : lines[line]) depth += (c == '[') - (c == ']');
        if (depth <= 0) break;
      }
      if (line + 1 < lines.size()) add_definition(headword, flatten(lines, line + 1), out);
    }
  }
}

// --- selection and output ---

// Round-robin over documents, each document's candidates in a seeded order, until `max` are taken.
template <typename T>
std::vector<T> round_robin(const std::vector<std::vector<T>>& per_doc, const std::vector<std::string>& doc_ids,
                           uint64_t seed, int64_t max) {
  std::vector<std::vector<uint64_t>> orders;
  for (size_t d = 0; d < per_doc.size(); ++d)
    orders.push_back(seeded_permutation(per_doc[d].size(), seeded_hash(seed, doc_ids[d])));
  std::vector<T> out;
  for (size_t round = 0; static_cast<int64_t>(out.size()) < max; ++round) {
    bool any = false;
    for (size_t d = 0; d < per_doc.size() && static_cast<int64_t>(out.size()) < max; ++d) {
      if (round >= per_doc[d].size()) continue;
      out.push_back(per_doc[d][orders[d][round]]);
      any = true;
    }
    if (!any) break;
  }
  return out;
}

// `k` distinct indices into [0, n) other than those `excluded` says no to, chosen by hashing (seed, tag, i).
template <typename Excluded>
std::vector<size_t> distractors(size_t n, size_t k, uint64_t seed, const std::string& tag, Excluded excluded) {
  std::vector<size_t> picked;
  for (uint64_t attempt = 0; picked.size() < k && attempt < 64 * k; ++attempt) {
    size_t j = seeded_hash(seed, str(tag, "/", attempt)) % n;
    if (!excluded(j) && std::find(picked.begin(), picked.end(), j) == picked.end()) picked.push_back(j);
  }
  return picked;
}

// Puts the true answer at a seeded position among the distractors; returns its index.
size_t place_answer(std::vector<std::string>& choices, const std::string& answer, uint64_t seed,
                    const std::string& tag) {
  size_t gold = seeded_hash(seed, "answer/" + tag) % (choices.size() + 1);
  choices.insert(choices.begin() + gold, answer);
  return gold;
}

std::string source_name(const std::string& id) { return id.substr(0, id.find('/')); }

}  // namespace

std::vector<std::pair<std::string, int64_t>> build_proxy_tasks(const std::string& corpus_dir,
                                                               const std::string& out_dir,
                                                               const ProxyTaskOptions& options) {
  std::vector<CorpusDocument> docs;
  for (Split split : {Split::Validation, Split::Test})
    for (auto& d : read_corpus_split(corpus_dir, split)) docs.push_back(std::move(d));

  std::vector<std::string> ids;
  std::vector<std::vector<Json>> passages;
  std::vector<std::vector<std::pair<size_t, SentencePair>>> pairs;  // (document, pair)
  std::vector<std::vector<Definition>> entries;
  for (const auto& doc : docs) {
    ids.push_back(doc.id);
    passages.emplace_back();
    pairs.emplace_back();
    entries.emplace_back();
    if (is_dictionary(doc.id)) {
      definitions(doc.id, doc.text, entries.back());
      continue;
    }
    for (const auto& lines : paragraphs_of(doc.text)) {
      lambada_candidates(flatten(lines), passages.back());
      sentence_pairs(flatten(lines), ids.size() - 1, pairs.back());
    }
  }
  const uint64_t seed = options.seed;
  const int64_t max = options.max_per_task;

  std::string lambada;
  int64_t n_lambada = 0;
  for (const Json& j : round_robin(passages, ids, seed, max)) lambada += j.dump() + "\n", ++n_lambada;

  // HellaSwag: distractor endings are second sentences of pairs from other documents.
  std::vector<std::pair<size_t, SentencePair>> all_pairs;
  for (const auto& p : pairs) all_pairs.insert(all_pairs.end(), p.begin(), p.end());
  std::string hellaswag;
  int64_t n_hellaswag = 0;
  for (const auto& [doc, pair] : round_robin(pairs, ids, seed, max)) {
    const std::string tag = str("hellaswag/", n_hellaswag);
    auto others =
        distractors(all_pairs.size(), 3, seed, tag, [&, d = doc](size_t j) { return all_pairs[j].first == d; });
    if (others.size() < 3) continue;
    std::vector<std::string> endings;
    for (size_t j : others) endings.push_back(all_pairs[j].second.next);
    size_t gold = place_answer(endings, pair.next, seed, tag);
    hellaswag += Json{{"ind", n_hellaswag},
                      {"activity_label", source_name(ids[doc])},
                      {"ctx_a", pair.first},
                      {"ctx_b", ""},
                      {"ctx", pair.first},
                      {"endings", endings},
                      {"label", std::to_string(gold)},
                      {"source_id", ids[doc]},
                      {"split", "validation"},
                      {"split_type", "proxy"}}
                     .dump() +
                 "\n";
    ++n_hellaswag;
  }

  std::vector<Definition> all_entries;
  for (const auto& e : entries) all_entries.insert(all_entries.end(), e.begin(), e.end());
  std::string definition_task;
  int64_t n_definitions = 0;
  for (const Definition& entry : round_robin(entries, ids, seed, max)) {
    const std::string tag = str("definitions/", n_definitions);
    auto others =
        distractors(all_entries.size(), 3, seed, tag, [&](size_t j) { return all_entries[j].word == entry.word; });
    if (others.size() < 3) continue;
    std::vector<std::string> words;
    for (size_t j : others) words.push_back(all_entries[j].word);
    if (std::set<std::string>(words.begin(), words.end()).size() < 3) continue;
    size_t gold = place_answer(words, entry.word, seed, tag);
    const std::vector<std::string> labels = {"A", "B", "C", "D"};
    definition_task += Json{{"id", str("proxy-definition-", n_definitions)},
                            {"question", "Which word is defined as: " + entry.gloss + "?"},
                            {"choices", {{"text", words}, {"label", labels}}},
                            {"answerKey", labels[gold]}}
                           .dump() +
                       "\n";
    ++n_definitions;
  }

  std::vector<std::pair<std::string, int64_t>> counts = {
      {"proxy_lambada", n_lambada}, {"proxy_hellaswag", n_hellaswag}, {"proxy_definitions", n_definitions}};
  if (n_lambada + n_hellaswag + n_definitions == 0)
    fail(corpus_dir, ": the validation and test splits yield no proxy task documents (too little held-out text)");
  Json manifest = {{"format", "sinklm-proxy-tasks"},
                   {"version", 1},
                   {"proxy", true},
                   {"corpus", corpus_dir},
                   {"splits", {"validation", "test"}},
                   {"seed", seed},
                   {"max_per_task", max},
                   {"note", "PROXY tasks derived from sinklm's held-out corpus; not the official data sets"}};
  manifest["tasks"] = {{"proxy_lambada",
                        {{"documents", n_lambada},
                         {"format", "lambada_openai"},
                         {"description", "last word of a held-out prose passage"}}},
                       {"proxy_hellaswag",
                        {{"documents", n_hellaswag},
                         {"format", "hellaswag"},
                         {"description", "true next sentence vs three sentences from other documents"}}},
                       {"proxy_definitions",
                        {{"documents", n_definitions},
                         {"format", "arc"},
                         {"description", "headword for a held-out dictionary / WordNet definition"}}}};
  AtomicDirWriter writer(out_dir);
  write_file_durable(writer.staging_path("proxy_lambada.jsonl"), lambada);
  write_file_durable(writer.staging_path("proxy_hellaswag.jsonl"), hellaswag);
  write_file_durable(writer.staging_path("proxy_definitions.jsonl"), definition_task);
  write_file_durable(writer.staging_path("manifest.json"), manifest.dump(2) + "\n");
  writer.commit();
  return counts;
}

}  // namespace sinklm
