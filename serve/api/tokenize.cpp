#include "serve/api/tokenize.h"

#include <algorithm>

#include "core/error.h"
#include "model/sink.h"
#include "serve/api/completion_request.h"
#include "serve/api/token_names.h"
#include "serve/http/request_error.h"

namespace sinklm {
namespace {

using json = nlohmann::json;

bool flag(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return false;
  if (!it->is_boolean()) throw RequestError(400, "invalid_type", str("'", name, "' must be true or false"), name);
  return it->get<bool>();
}

}  // namespace

int64_t text_vocabulary(const TextCodec& codec, const ModelConfig& model) {
  return std::min(model.tokenizer_vocab_size, codec.vocab_size());
}

json tokenize_response(const std::string& text, const TextCodec& codec, const ModelConfig& model) {
  const json body = parse_request_body(text);
  auto content = body.find("content");
  if (content == body.end() || !content->is_string())
    throw RequestError(400, "invalid_type", "'content' must be a string (the text to tokenize)", "content");
  std::vector<int64_t> ids = codec.encode(content->get<std::string>());
  if (flag(body, "add_special")) ids = with_sink_prefix(model, ids);
  if (!flag(body, "with_pieces")) return {{"tokens", ids}};
  json tokens = json::array();
  for (int64_t id : ids) {
    const bool sink = id >= text_vocabulary(codec, model);
    tokens.push_back({{"id", id}, {"piece", sink ? str("<sink ", id - model.tokenizer_vocab_size, ">")
                                                 : token_name(codec.decode({id}))}});
  }
  return {{"tokens", tokens}};
}

json detokenize_response(const std::string& text, const TextCodec& codec, const ModelConfig& model) {
  const json body = parse_request_body(text);
  auto tokens = body.find("tokens");
  if (tokens == body.end() || !tokens->is_array())
    throw RequestError(400, "invalid_type", "'tokens' must be an array of token ids", "tokens");
  const int64_t vocab = text_vocabulary(codec, model);
  std::vector<int64_t> ids;
  for (size_t i = 0; i < tokens->size(); ++i) {
    const json& id = (*tokens)[i];
    const std::string field = str("tokens[", i, "]");
    if (!id.is_number_integer()) throw RequestError(400, "invalid_type", str("'", field, "' must be an integer"), field);
    if (id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab)
      throw RequestError(400, "invalid_value", str("'", field, "': token id ", id.dump(), " is outside the vocabulary [0, ",
                                                   vocab, ") of text tokens"), field);
    ids.push_back(id.get<int64_t>());
  }
  return {{"content", codec.decode(ids)}};
}

}  // namespace sinklm
