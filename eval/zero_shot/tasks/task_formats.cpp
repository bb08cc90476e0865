#include "eval/zero_shot/tasks/task_formats.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/files/sha256.h"
#include "eval/zero_shot/tasks/hellaswag_text.h"

namespace fs = std::filesystem;

namespace sinklm {
namespace {

using Json = nlohmann::json;

// Where a document came from, for error messages.
struct Origin {
  const std::string& file;
  size_t line;
};

Json field(const Json& doc, const char* name, const Origin& at) {
  if (!doc.is_object() || !doc.contains(name))
    fail(at.file, ":", at.line, ": missing field '", name, "' (expected the Hugging Face datasets field names)");
  return doc.at(name);
}

std::string text_field(const Json& doc, const char* name, const Origin& at) {
  Json value = field(doc, name, at);
  if (!value.is_string()) fail(at.file, ":", at.line, ": field '", name, "' must be a string");
  return value.get<std::string>();
}

std::vector<std::string> text_list(const Json& value, const char* name, const Origin& at) {
  if (!value.is_array() || value.empty()) fail(at.file, ":", at.line, ": field '", name, "' must be a non-empty list");
  std::vector<std::string> out;
  for (const Json& item : value) {
    if (!item.is_string()) fail(at.file, ":", at.line, ": field '", name, "' must hold strings");
    out.push_back(item.get<std::string>());
  }
  return out;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string strip(const std::string& s) {
  size_t begin = 0, end = s.size();
  while (begin < end && is_space(s[begin])) ++begin;
  while (end > begin && is_space(s[end - 1])) --end;
  return s.substr(begin, end - begin);
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, from.size(), from) == 0) {
      out += to;
      i += from.size();
    } else {
      out += s[i++];
    }
  }
  return out;
}

// Python's str.capitalize() on ASCII letters: first upper, the rest lower (other bytes unchanged).
std::string capitalize(const std::string& s) {
  std::string out = s;
  for (size_t i = 0; i < out.size(); ++i) {
    unsigned char c = out[i];
    if (c < 128) out[i] = static_cast<char>(i == 0 ? std::toupper(c) : std::tolower(c));
  }
  return out;
}

int label_index(const std::vector<std::string>& labels, const std::string& key, const Origin& at) {
  auto it = std::find(labels.begin(), labels.end(), key);
  if (it == labels.end()) fail(at.file, ":", at.line, ": answerKey '", key, "' is not one of choices.label");
  return static_cast<int>(it - labels.begin());
}

// ARC: "Question: {question}\nAnswer:" -> " {choice}".
TaskDocument arc_document(const Json& j, const Origin& at) {
  Json choices = field(j, "choices", at);
  auto texts = text_list(field(choices, "text", at), "choices.text", at);
  auto labels = text_list(field(choices, "label", at), "choices.label", at);
  if (texts.size() != labels.size()) fail(at.file, ":", at.line, ": choices.text and choices.label differ in length");
  return multiple_choice("Question: " + text_field(j, "question", at) + "\nAnswer:", texts,
                         label_index(labels, text_field(j, "answerKey", at), at));
}

// OpenBookQA: "{question_stem}" -> " {choice}"; the gold label is answerKey with leading spaces removed.
TaskDocument openbookqa_document(const Json& j, const Origin& at) {
  Json choices = field(j, "choices", at);
  auto texts = text_list(field(choices, "text", at), "choices.text", at);
  auto labels = text_list(field(choices, "label", at), "choices.label", at);
  std::string key = text_field(j, "answerKey", at);
  key.erase(0, key.find_first_not_of(" \t\n"));
  return multiple_choice(text_field(j, "question_stem", at), texts, label_index(labels, key, at));
}

// HellaSwag's Hugging Face layout (proxy_hellaswag): query = preprocess(activity_label + ": " + ctx_a + " " +
// ctx_b.capitalize()), choices = preprocess(ending).
TaskDocument hellaswag_document(const Json& j, const Origin& at) {
  std::string ctx = text_field(j, "ctx_a", at) + " " + capitalize(text_field(j, "ctx_b", at));
  std::string query = hellaswag_preprocess(text_field(j, "activity_label", at) + ": " + ctx);
  std::vector<std::string> endings;
  for (const auto& e : text_list(field(j, "endings", at), "endings", at)) endings.push_back(hellaswag_preprocess(e));
  Json label = field(j, "label", at);
  int gold = -1;
  if (label.is_string() && !label.get<std::string>().empty()) gold = std::atoi(label.get<std::string>().c_str());
  if (label.is_number_integer()) gold = label.get<int>();
  if (gold < 0 || gold >= static_cast<int>(endings.size()))
    fail(at.file, ":", at.line, ": 'label' must index 'endings' (the test split has no labels; use validation)");
  return multiple_choice(query, endings, gold);
}

// PIQA: "Question: {goal}\nAnswer:" -> " {sol1}" | " {sol2}".
TaskDocument piqa_document(const Json& j, const Origin& at) {
  Json label = field(j, "label", at);
  if (!label.is_number_integer() || label.get<int>() < 0 || label.get<int>() > 1)
    fail(at.file, ":", at.line, ": 'label' must be 0 or 1");
  return multiple_choice("Question: " + text_field(j, "goal", at) + "\nAnswer:",
                         {text_field(j, "sol1", at), text_field(j, "sol2", at)}, label.get<int>());
}

// Winogrande, partial scoring: context = sentence up to "_" with the option filled in; continuation =
// " " + the stripped rest of the sentence, the same for both options.
TaskDocument winogrande_document(const Json& j, const Origin& at) {
  std::string sentence = text_field(j, "sentence", at);
  size_t blank = sentence.find('_');
  if (blank == std::string::npos) fail(at.file, ":", at.line, ": 'sentence' has no '_' blank");
  std::string answer = text_field(j, "answer", at);
  if (answer != "1" && answer != "2") fail(at.file, ":", at.line, ": 'answer' must be \"1\" or \"2\"");
  std::string rest = " " + strip(sentence.substr(blank + 1));
  TaskDocument doc;
  for (const char* option : {"option1", "option2"})
    doc.requests.push_back({sentence.substr(0, blank) + text_field(j, option, at), rest});
  doc.gold = answer == "1" ? 0 : 1;
  return doc;
}

// LAMBADA (OpenAI): words split on single spaces; context = all but the last, continuation = " " + last.
TaskDocument lambada_document(const Json& j, const Origin& at) {
  std::string text = text_field(j, "text", at);
  size_t space = text.rfind(' ');
  if (space == std::string::npos || space == 0) fail(at.file, ":", at.line, ": 'text' needs at least two words");
  TaskDocument doc;
  doc.requests.push_back({text.substr(0, space), text.substr(space)});
  return doc;
}

// The first `limit` documents (0 = all) of a task file's text; errors name origin:line.
using DocumentReader =
    std::function<std::vector<TaskDocument>(const std::string& text, const std::string& origin, int64_t limit)>;

// JSONL: one document per non-blank line, made into requests by `parse`.
DocumentReader jsonl(std::function<TaskDocument(const Json&, const Origin&)> parse) {
  return [parse](const std::string& text, const std::string& origin, int64_t limit) {
    std::vector<TaskDocument> docs;
    std::istringstream in(text);
    size_t line_number = 0;
    for (std::string line; std::getline(in, line);) {
      ++line_number;
      if (strip(line).empty()) continue;
      if (limit > 0 && static_cast<int64_t>(docs.size()) >= limit) break;
      Json doc;
      try {
        doc = Json::parse(line);
      } catch (const Json::exception& e) {
        fail(origin, ":", line_number, ": not a JSON line: ", e.what());
      }
      docs.push_back(parse(doc, Origin{origin, line_number}));
    }
    return docs;
  };
}

struct TaskFormat {
  const char* name;
  TaskScoring scoring;
  bool proxy;
  const char* extension;  // of the task's file: <task><extension>
  const char* layout;     // what that file holds, for errors
  DocumentReader read;
  TaskVariant variant;
};

const char* const kJsonl = ".jsonl";
const char* const kHuggingFace = "one JSON object per line, with the Hugging Face datasets field names";

const std::vector<TaskFormat>& task_formats() {
  static const std::vector<TaskFormat> formats = {
      {"arc_challenge", TaskScoring::MultipleChoice, false, kJsonl, kHuggingFace, jsonl(arc_document)},
      {"arc_easy", TaskScoring::MultipleChoice, false, kJsonl, kHuggingFace, jsonl(arc_document)},
      {"hellaswag", TaskScoring::MultipleChoice, false, ".txt",
       "llama.cpp's HellaSwag text form, 6 lines per item: context, gold label 0-3, four endings",
       read_hellaswag_text,
       {"llama.cpp text form",
        "HellaSwag as llama.cpp's `perplexity --hellaswag` reads it (shipped: the 10,042 official validation "
        "items); its text is cleaned differently from lm-eval's hellaswag preprocessing, so scores are close to "
        "lm-eval's, not identical (docs/evaluation.md)."}},
      {"lambada_openai", TaskScoring::LastWord, false, kJsonl, kHuggingFace, jsonl(lambada_document)},
      {"openbookqa", TaskScoring::MultipleChoice, false, kJsonl, kHuggingFace, jsonl(openbookqa_document)},
      {"piqa", TaskScoring::MultipleChoice, false, kJsonl, kHuggingFace, jsonl(piqa_document)},
      {"winogrande", TaskScoring::PartialScoring, false, kJsonl, kHuggingFace, jsonl(winogrande_document)},
      {"proxy_lambada", TaskScoring::LastWord, true, kJsonl, kHuggingFace, jsonl(lambada_document)},
      {"proxy_hellaswag", TaskScoring::MultipleChoice, true, kJsonl, kHuggingFace, jsonl(hellaswag_document)},
      {"proxy_definitions", TaskScoring::MultipleChoice, true, kJsonl, kHuggingFace, jsonl(arc_document)},
  };
  return formats;
}

}  // namespace

TaskDocument multiple_choice(const std::string& context, const std::vector<std::string>& choices, int gold) {
  TaskDocument doc;
  for (const auto& choice : choices) doc.requests.push_back({context, " " + choice});
  doc.choices = choices;
  doc.gold = gold;
  return doc;
}

std::string hellaswag_preprocess(const std::string& text) {
  std::string s = replace_all(strip(text), " [title]", ". ");
  std::string without_brackets;  // re.sub("\\[.*?\\]", "", s): "." does not cross a newline
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '[') {
      size_t close = s.find_first_of("]\n", i + 1);
      if (close != std::string::npos && s[close] == ']') {
        i = close;
        continue;
      }
    }
    without_brackets += s[i];
  }
  return replace_all(without_brackets, "  ", " ");
}

const std::vector<std::string>& known_task_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& f : task_formats()) out.push_back(f.name);
    return out;
  }();
  return names;
}

namespace {

// nullptr for a name sinklm does not know.
const TaskFormat* find_format(const std::string& task) {
  auto it = std::find_if(task_formats().begin(), task_formats().end(),
                         [&](const TaskFormat& f) { return task == f.name; });
  return it == task_formats().end() ? nullptr : &*it;
}

const TaskFormat& format_of(const std::string& task) {
  require_known_task(task);
  return *find_format(task);
}

}  // namespace

std::string task_file_name(const std::string& task) { return task + format_of(task).extension; }

std::string task_file(const std::string& data_dir, const std::string& task) {
  return (fs::path(data_dir) / task_file_name(task)).string();
}

TaskVariant task_variant(const std::string& task) {
  const TaskFormat* format = find_format(task);
  return format ? format->variant : TaskVariant{};
}

void require_known_task(const std::string& task) {
  const auto& names = known_task_names();
  if (std::find(names.begin(), names.end(), task) != names.end()) return;
  std::string known;
  for (const auto& name : names) known += (known.empty() ? "" : ", ") + name;
  fail("--tasks: unknown task '", task, "' (known: ", known, ")");
}

ZeroShotTask load_task(const std::string& task, const std::string& data_dir, int64_t limit) {
  const TaskFormat& format = format_of(task);  // an unknown name is reported as such, not as a missing file
  const std::string file = task_file(data_dir, task);
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(file, ": cannot open task file (expected <data>/", task_file_name(task), ": ", format.layout, ")");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_task(task, text.str(), file, limit);
}

ZeroShotTask parse_task(const std::string& task, const std::string& text, const std::string& origin, int64_t limit) {
  const TaskFormat& format = format_of(task);
  ZeroShotTask out{task, origin, format.scoring, format.proxy};
  out.data_sha256 = sha256_bytes(text.data(), text.size());
  out.docs = format.read(text, origin, limit);
  if (out.docs.empty()) fail(origin, ": no documents");
  return out;
}

}  // namespace sinklm
