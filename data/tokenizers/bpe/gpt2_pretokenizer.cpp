#define PCRE2_CODE_UNIT_WIDTH 8
#include "data/tokenizers/bpe/gpt2_pretokenizer.h"

#include <pcre2.h>

#include <string>

#include "core/error.h"
#include "data/tokenizers/utf8.h"

namespace sinklm {
namespace {

#define WHITE_SPACE "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
const char kPattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WHITE_SPACE "\\p{L}\\p{N}]+"
    "|[" WHITE_SPACE "]+(?![^" WHITE_SPACE "])|[" WHITE_SPACE "]+";
#undef WHITE_SPACE

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

struct Gpt2PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
};

Gpt2PreTokenizer::Gpt2PreTokenizer() : compiled_(new Compiled) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED,
                                  PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (!compiled_->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    delete compiled_;
    SINKLM_ASSERT(false, "GPT-2 pattern does not compile at offset ", offset, ": ",
                  reinterpret_cast<const char*>(message));
  }
  compiled_->jit = pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE) == 0;
}

Gpt2PreTokenizer::~Gpt2PreTokenizer() {
  pcre2_code_free(compiled_->code);
  delete compiled_;
}

void Gpt2PreTokenizer::split_valid_utf8(std::string_view text, std::vector<std::string_view>& pieces) const {
  thread_local ThreadMatchState state;
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  PCRE2_SIZE start = 0;
  while (start < text.size()) {
    int rc = compiled_->jit ? pcre2_jit_match(compiled_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK,
                                              state.data, state.context)
                            : pcre2_match(compiled_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK,
                                          state.data, state.context);
    SINKLM_ASSERT(rc > 0, "GPT-2 pattern failed to match at byte ", start, " (pcre2 code ", rc, ")");
    PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
    // The alternatives cover every character, so each match starts where the previous one ended.
    SINKLM_ASSERT(ovector[0] == start && ovector[1] > start, "GPT-2 pattern skipped text at byte ", start);
    pieces.emplace_back(text.data() + start, ovector[1] - start);
    start = ovector[1];
  }
}

std::vector<std::string_view> Gpt2PreTokenizer::split(std::string_view text) const {
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

bool Gpt2PreTokenizer::is_safe_cut(std::string_view text, size_t pos) {
  if (pos == 0 || pos >= text.size()) return false;
  auto before = static_cast<unsigned char>(text[pos - 1]), at = static_cast<unsigned char>(text[pos]);
  return before < 0x80 && !is_ascii_space(before) && is_ascii_space(at);
}

}  // namespace sinklm
