// How tokens are named in logprobs responses. A token may be any bytes (byte-level and BPE vocabularies split
// UTF-8 characters), but a name must be JSON text; and in /v1/completions the alternatives at one position
// are the keys of one object, so two of them must never share a name (a JSON parser keeps only the last).
//
// A token whose bytes are valid UTF-8 is named by that text. Any other is "bytes:" then \xNN (lower-case hex)
// for every byte, e.g. bytes:\xe2\x80 for the first two bytes of "’": the spelling of OpenAI's legacy
// completions, as evaluation tools parse it (HELM, stanford-crfm/helm src/helm/benchmark/metrics/
// basic_metrics.py, convert_tokens_to_text: strip "bytes:", turn each \x into %, URL-unquote). Valid text
// that itself starts with "bytes:" or "token_id:" is spelled out in bytes too, so that no text name looks like
// another form: a name then stands for exactly one byte string.
//
// Two distinct ids with the same bytes at one position (vocabulary entries that decode alike) get distinct
// names, deterministically: the first in likelihood order keeps the name of its bytes, each later one is
// token_id:<id>, vLLM's spelling for a token named by its id (--return-tokens-as-token-ids).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sinklm {

// The name of a token with these bytes.
std::string token_name(std::string_view bytes);

// The names of the tokens at one position, `tokens` (id, bytes) most likely first: no two ids share a name, and
// an id listed twice (the chosen token, also among the alternatives) gets the same name both times.
std::vector<std::string> position_names(const std::vector<std::pair<int64_t, std::string>>& tokens);

}  // namespace sinklm
