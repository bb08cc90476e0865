// Request parsing: every malformed field is a 400 naming the field; OpenAI's forms of prompt and content.
#include <gtest/gtest.h>

#include "serve/api/completion_request.h"
#include "serve/http/request_error.h"

namespace sinklm {
namespace {

CompletionRequest parse(const std::string& body, bool chat = false) { return parse_completion_request(body, chat, "", {}); }

// The RequestError of parsing `body`: status and param (the field named).
std::pair<int, std::string> refusal(const std::string& body, bool chat = false) {
  try {
    parse(body, chat);
  } catch (const RequestError& e) {
    return {e.status, e.param};
  }
  return {0, ""};
}

TEST(CompletionRequest, NumbersOutOfRangeAndBadValuesAre400sNamingTheField) {
  using R = std::pair<int, std::string>;
  EXPECT_EQ(refusal(R"({"prompt": "x", "temperature": 1e999})"), R(400, "temperature"));
  EXPECT_EQ(refusal(R"({"prompt": "x", "top_p": -1e999})"), R(400, "top_p"));
  EXPECT_EQ(refusal(R"({"prompt": "x", "stop": ["a", 1e400]})"), R(400, "stop[1]"));
  EXPECT_EQ(refusal(R"({"prompt": "x", "max_tokens": 100000000000000000000})"), R(400, "max_tokens"));
  EXPECT_EQ(refusal(R"({"prompt": "x", "seed": 18446744073709551615})"), R(400, "seed"));
  EXPECT_EQ(refusal(R"({"prompt": "x", "logprobs": 21})"), R(400, "logprobs"));
  EXPECT_EQ(refusal(R"({"prompt": "x", "max_tokens": 0})"), R(400, "max_tokens"));
  EXPECT_EQ(refusal(R"({"prompt": "x", "n": 0})"), R(400, "n"));
  EXPECT_EQ(refusal(R"({"prompt": "x", "n": 2, "session": "s"})"), R(400, "n"));
  EXPECT_EQ(refusal(R"({"prompt": "x", "stream_options": {"include_usage": true}})"), R(400, "stream_options"));
  EXPECT_EQ(refusal(R"({"prompt": []})"), R(400, "prompt"));
  EXPECT_EQ(refusal(R"({"prompt": [1, "a"]})"), R(400, "prompt"));
  EXPECT_EQ(refusal(R"({"messages": [{"role": "robot", "content": "x"}]})", true), R(400, "messages[0].role"));
  EXPECT_EQ(refusal(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", true),
            R(400, "messages[0].content[0].type"));
  EXPECT_EQ(refusal(R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", true), R(400, "top_logprobs"));
  EXPECT_EQ(refusal(R"({"prompt": "x", "temperature": })"), R(400, ""));  // not JSON at all
}

TEST(CompletionRequest, PromptsContentPartsLogprobsAndWarnings) {
  auto r = parse(R"({"prompt": [[1, 2], [3]], "n": 2, "echo": true, "logprobs": 1, "max_tokens": 0, "best_of": 3})");
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_TRUE(r.prompts[0].is_ids);
  EXPECT_EQ(r.prompts[1].ids, std::vector<int64_t>{3});
  EXPECT_EQ(r.n, 2);
  EXPECT_TRUE(r.echo);
  EXPECT_EQ(r.logprobs, 1);
  EXPECT_EQ(r.generation.max_tokens, 0);
  EXPECT_EQ(r.warnings, std::vector<std::string>{"unsupported field 'best_of' ignored"});
  EXPECT_EQ(parse(R"({"prompt": [5, 6]})").prompts[0].ids, (std::vector<int64_t>{5, 6}));

  auto chat = parse(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
                        "logprobs": true, "top_logprobs": 3, "stream": true, "stream_options": {"include_usage": true}})", true);
  EXPECT_EQ(chat.prompts[0].text, "User: ab\nAssistant:");
  EXPECT_EQ(chat.logprobs, 3);
  EXPECT_TRUE(chat.include_usage);
  EXPECT_TRUE(chat.warnings.empty());
}

}  // namespace
}  // namespace sinklm
