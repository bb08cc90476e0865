#define PCRE2_CODE_UNIT_WIDTH 8
#include "data/tokenizers/bpe/regex_pretokenizer.h"

#include <pcre2.h>

#include <string>

#include "core/error.h"
#include "data/tokenizers/utf8.h"

namespace sinklm {
namespace {

#define WHITE_SPACE "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
const char kWhiteSpace[] = WHITE_SPACE;
const char kGpt2Pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WHITE_SPACE "\\p{L}\\p{N}]+"
    "|[" WHITE_SPACE "]+(?![^" WHITE_SPACE "])|[" WHITE_SPACE "]+";
#undef WHITE_SPACE

// A Hugging Face pattern with \s and \S spelled out as White_Space (see the header). Inside a character class
// \s becomes the ranges; \S there has no such spelling and is refused.
std::string with_white_space_spelled_out(const std::string& pattern, const std::string& where) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[++i];
      if (next == 's') {
        out += in_class ? std::string(kWhiteSpace) : "[" + std::string(kWhiteSpace) + "]";
      } else if (next == 'S') {
        if (in_class) fail(where, ": the pattern uses \\S inside a character class, which sinklm cannot translate");
        out += "[^" + std::string(kWhiteSpace) + "]";
      } else {
        out += c;
        out += next;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];  // a literal ] first
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

// Stand-in for an invalid byte b while matching: U+10FF00 + b, a private-use character (category Co, so
// matched only by [^\s\p{L}\p{N}], like the lone surrogate Python makes of it).
constexpr uint32_t kInvalidByteBase = 0x10FF00;

bool is_ascii_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

// Per-thread PCRE2 state: match data and a JIT stack large enough for long runs.
struct ThreadMatchState {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  ThreadMatchState() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~ThreadMatchState() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

}  // namespace

struct RegexPreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
  // Compiles `pattern` (PCRE2 syntax); the error message, or "" when it compiled.
  std::string compile(const std::string& pattern) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP,
                         &error, &offset, nullptr);
    if (!code) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof(message));
      return str("does not compile at offset ", offset, ": ", reinterpret_cast<const char*>(message));
    }
    jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
    return "";
  }
};

RegexPreTokenizer::RegexPreTokenizer() : compiled_(new Compiled), gpt2_(true) {
  const std::string error = compiled_->compile(kGpt2Pattern);
  SINKLM_ASSERT(error.empty(), "GPT-2's pattern ", error);
}

RegexPreTokenizer::RegexPreTokenizer(const std::string& pattern, const std::string& where) : compiled_(new Compiled) {
  const std::string error = compiled_->compile(with_white_space_spelled_out(pattern, where));
  if (!error.empty()) {
    delete compiled_;
    fail(where, ": the pattern ", pattern, " ", error);
  }
}

RegexPreTokenizer::~RegexPreTokenizer() {
  pcre2_code_free(compiled_->code);
  delete compiled_;
}

void RegexPreTokenizer::split_valid_utf8(std::string_view text, std::vector<std::string_view>& pieces) const {
  thread_local ThreadMatchState state;
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  PCRE2_SIZE start = 0;
  while (start < text.size()) {
    int rc = compiled_->jit ? pcre2_jit_match(compiled_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK | PCRE2_NOTEMPTY,
                                              state.data, state.context)
                            : pcre2_match(compiled_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK | PCRE2_NOTEMPTY,
                                          state.data, state.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    // rc 0: a match whose capture groups do not fit the match data; only the whole match is used.
    SINKLM_ASSERT(rc >= 0, "the pre-tokenizer's pattern failed at byte ", start, " (pcre2 code ", rc, ")");
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
    if (ovector[0] > start) pieces.emplace_back(text.data() + start, ovector[0] - start);  // between matches
    pieces.emplace_back(text.data() + ovector[0], ovector[1] - ovector[0]);
    start = ovector[1];
  }
  if (start < text.size()) pieces.emplace_back(text.data() + start, text.size() - start);  // after the last match
}

std::vector<std::string_view> RegexPreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (is_valid_utf8(text)) {
    split_valid_utf8(text, pieces);
    return pieces;
  }
  // Rare path: match on a copy with stand-ins for invalid bytes, then map the pieces back.
  std::string stand_in;
  std::vector<size_t> origin;  // origin[i] = offset in `text` of stand_in byte i
  for (size_t pos = 0; pos < text.size();) {
    size_t len = valid_sequence_length(text, pos);
    size_t before = stand_in.size();
    if (len == 0) {
      append_utf8(stand_in, kInvalidByteBase + static_cast<unsigned char>(text[pos]));
      len = 1;
    } else {
      stand_in.append(text.substr(pos, len));
    }
    origin.insert(origin.end(), stand_in.size() - before, pos);
    pos += len;
  }
  origin.push_back(text.size());
  std::vector<std::string_view> stand_in_pieces;
  split_valid_utf8(stand_in, stand_in_pieces);
  for (std::string_view p : stand_in_pieces) {
    size_t begin = origin[p.data() - stand_in.data()], end = origin[p.data() + p.size() - stand_in.data()];
    pieces.emplace_back(text.data() + begin, end - begin);
  }
  return pieces;
}

bool RegexPreTokenizer::is_safe_cut(std::string_view text, size_t pos) const {
  if (!gpt2_ || pos == 0 || pos >= text.size()) return false;
  auto before = static_cast<unsigned char>(text[pos - 1]), at = static_cast<unsigned char>(text[pos]);
  return before < 0x80 && !is_ascii_space(before) && is_ascii_space(at);
}

}  // namespace sinklm
