#include "data/tokenizers/bpe/added_tokens.h"

#include <algorithm>
#include <regex>

#include "core/error.h"

namespace sinklm {

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens) : tokens_(tokens), by_first_byte_(256) {
  for (size_t i = 0; i < tokens_.size(); ++i)
    if (!tokens_[i].content.empty())  // an empty one matches nothing (the readers refuse it, naming the file)
      by_first_byte_[static_cast<unsigned char>(tokens_[i].content[0])].push_back(i);
  for (auto& list : by_first_byte_)
    std::stable_sort(list.begin(), list.end(),
                     [&](size_t a, size_t b) { return tokens_[a].content.size() > tokens_[b].content.size(); });
}

std::vector<TextSpan> AddedTokenMatcher::split(std::string_view text) const {
  std::vector<TextSpan> out;
  size_t text_start = 0;
  for (size_t pos = 0; pos < text.size();) {
    const AddedToken* match = nullptr;
    for (size_t i : by_first_byte_[static_cast<unsigned char>(text[pos])])
      if (text.compare(pos, tokens_[i].content.size(), tokens_[i].content) == 0) {
        match = &tokens_[i];
        break;
      }
    if (!match) {
      ++pos;
      continue;
    }
    if (pos > text_start) out.push_back(TextSpan{text.substr(text_start, pos - text_start)});
    out.push_back(TextSpan{text.substr(pos, match->content.size()), match->id});
    pos += match->content.size();
    text_start = pos;
  }
  if (text_start < text.size()) out.push_back(TextSpan{text.substr(text_start)});
  return out;
}

SpecialTokenIds special_ids_by_name(const std::vector<AddedToken>& tokens) {
  auto first_of = [&](std::initializer_list<const char*> names) -> int64_t {
    for (const char* name : names)  // in order of preference
      for (const auto& t : tokens)
        if (t.content == name) return t.id;
    return -1;
  };
  return {first_of({"<|endoftext|>", "<|end_of_text|>", "</s>"}), first_of({"<|begin_of_text|>", "<s>"}),
          first_of({"<|padding|>", "<pad>"})};
}

std::string sink_token_text(size_t index, size_t count) {
  return count == 1 ? "<|sink|>" : "<|sink_" + std::to_string(index) + "|>";
}

bool is_sink_token_text(const std::string& content) {
  static const std::regex name(R"(<\|sink(_[0-9]+)?\|>)");
  return std::regex_match(content, name);
}

}  // namespace sinklm
