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

// A field that would change the answer if it were ignored is a 400 unsupported_parameter naming it; its no-op
// value (what clients send by default) passes silently.
TEST(CompletionRequest, FieldsItCannotHonourAre400sUnlessTheyAskForNothing) {
  using R = std::pair<int, std::string>;
  for (const char* field : {R"("tools": [{"type": "function", "function": {"name": "f"}}])", R"("tool_choice": "auto")",
                            R"("functions": [{"name": "f"}])", R"("function_call": "auto")",
                            R"("response_format": {"type": "json_object"})", R"("suffix": "end")", R"("best_of": 3)"}) {
    const std::string name = std::string(field).substr(1, std::string(field).find('"', 1) - 1);
    EXPECT_EQ(refusal(std::string(R"({"prompt": "x", )") + field + "}"), R(400, name)) << field;
  }
  auto r = parse(R"({"prompt": "x", "tools": [], "tool_choice": "none", "response_format": {"type": "text"}, "suffix": "",
                     "best_of": 1, "functions": null})");
  EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
  auto sampling = parse(R"({"prompt": "x", "logit_bias": {"65": 100, "7": -2.5}, "presence_penalty": 0.5,
                            "frequency_penalty": -1})").generation.sampling;
  EXPECT_EQ(sampling.logit_bias, (std::vector<std::pair<int64_t, double>>{{65, 100.0}, {7, -2.5}}));
  EXPECT_DOUBLE_EQ(sampling.presence_penalty, 0.5);
  EXPECT_DOUBLE_EQ(sampling.frequency_penalty, -1);
  EXPECT_EQ(refusal(R"({"prompt": "x", "logit_bias": {"a": 1}})"), R(400, "logit_bias.a"));
  EXPECT_EQ(refusal(R"({"prompt": "x", "logit_bias": {"5": 101}})"), R(400, "logit_bias.5"));
  EXPECT_EQ(refusal(R"({"prompt": "x", "logit_bias": {"5": "up"}})"), R(400, "logit_bias.5"));
  EXPECT_EQ(refusal(R"({"prompt": "x", "logit_bias": [5]})"), R(400, "logit_bias"));
  EXPECT_EQ(refusal(R"({"prompt": "x", "presence_penalty": 2.5})"), R(400, "presence_penalty"));
  try {
    parse(R"({"prompt": "x", "response_format": {"type": "json_schema"}})");
  } catch (const RequestError& e) {
    EXPECT_EQ(e.code, "unsupported_parameter");
    EXPECT_NE(std::string(e.what()).find("'response_format' is not supported"), std::string::npos) << e.what();
  }
}

TEST(CompletionRequest, PromptsContentPartsLogprobsAndWarnings) {
  auto r = parse(R"({"prompt": [[1, 2], [3]], "n": 2, "echo": true, "logprobs": 1, "max_tokens": 0, "service_tier": "x"})");
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_TRUE(r.prompts[0].is_ids);
  EXPECT_EQ(r.prompts[1].ids, std::vector<int64_t>{3});
  EXPECT_EQ(r.n, 2);
  EXPECT_TRUE(r.echo);
  EXPECT_EQ(r.logprobs, 1);
  EXPECT_EQ(r.generation.max_tokens, 0);
  EXPECT_EQ(r.warnings, std::vector<std::string>{"unsupported field 'service_tier' ignored"});
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
