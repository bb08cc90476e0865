// Sampling, incremental text and batched generation over token streams.
#include <gtest/gtest.h>

#include <map>

#include "decode/generation.h"
#include "tests/decode/decode_test_support.h"

namespace sinklm {
namespace {

using namespace testing_support;

TEST(TokenSampler, GreedyTopKAndTopPPickTheArgmaxAndNeverASink) {
  auto logits = torch::tensor({0.1f, 2.0f, 0.5f, 9.0f});  // id 3 lies outside the allowed vocabulary of 3
  EXPECT_EQ(TokenSampler({0.0}, 3).next(logits), 1);
  EXPECT_EQ(TokenSampler({1.0, 1}, 3).next(logits), 1);
  EXPECT_EQ(TokenSampler({1.0, 0, 1e-6}, 3).next(logits), 1);
  TokenSampler free_sampler({5.0, 0, 1.0, 3}, 3);
  for (int i = 0; i < 500; ++i) EXPECT_LT(free_sampler.next(logits), 3);
  EXPECT_NE(user_error_of([] { TokenSampler({1.0, 0, 0.0}, 3); }).find("top_p"), std::string::npos);
}

// Ties rank in id order, the greedy pick first: topk alone may order equal logits either way, and a float32
// log-softmax can round near-equal logits to one value.
TEST(TokenSampler, MostLikelyRanksTiesInIdOrderWithTheGreedyPickFirst) {
  auto logits = torch::tensor({1.0f, 3.0f, 0.5f, 3.0f, 2.0f, 3.0f, 9.0f});  // id 6 outside the allowed 6
  TokenSampler greedy({0.0}, 6);
  EXPECT_EQ(greedy.most_likely(logits, 2), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(greedy.most_likely(logits, 4), (std::vector<int64_t>{1, 3, 5, 4}));
  EXPECT_EQ(greedy.most_likely(logits, 20), (std::vector<int64_t>{1, 3, 5, 4, 0, 2}));
  EXPECT_TRUE(greedy.most_likely(logits, 0).empty());
  EXPECT_EQ(greedy.next(logits), 1);
  auto many_ties = torch::zeros({1000});  // all equal: the first ids, whatever topk's internal order
  EXPECT_EQ(TokenSampler({0.0}, 1000).most_likely(many_ties, 3), (std::vector<int64_t>{0, 1, 2}));
}

TEST(TokenSampler, TemperatureSamplingFollowsTheDistributionAndTheSeed) {
  auto logits = torch::tensor({0.0f, std::log(3.0f)});  // p = 0.25, 0.75
  TokenSampler a({1.0, 0, 1.0, 42}, 2), b({1.0, 0, 1.0, 42}, 2);
  int ones = 0;
  for (int i = 0; i < 4000; ++i) {
    const int64_t x = a.next(logits);
    EXPECT_EQ(x, b.next(logits));
    ones += x == 1;
  }
  EXPECT_NEAR(ones / 4000.0, 0.75, 0.03);
}

// OpenAI's adjustments: a bias moves one id's logit; penalties lower what the completion already picked, by
// count (frequency) and once (presence), and the pick still heads its own list of alternatives.
TEST(TokenSampler, LogitBiasAndPenaltiesAdjustTheLogitsBeforeThePick) {
  auto logits = torch::tensor({0.0f, 1.0f, 1.5f});
  SamplingParams biased{0.0};
  biased.logit_bias = {{0, 2.0}, {2, -100.0}, {9, 100.0}};  // id 9 is outside the allowed 3: no effect
  EXPECT_EQ(TokenSampler(biased, 3).next(logits), 0);       // 2.0 > 1.0 > -98.5
  SamplingParams frequency{0.0};
  frequency.frequency_penalty = 0.4;
  TokenSampler f(frequency, 3);
  // 1.5 (2), then 1.5 - 0.4 = 1.1 > 1.0 (2 again), then 1.5 - 0.8 = 0.7 < 1.0 (1).
  EXPECT_EQ(f.next(logits), 2);
  EXPECT_EQ(f.most_likely(logits, 1)[0], 2) << "alternatives rank as the pick did";
  EXPECT_EQ(f.next(logits), 2);
  EXPECT_EQ(f.next(logits), 1);
  SamplingParams presence{0.0};
  presence.presence_penalty = 0.6;
  TokenSampler p(presence, 3);
  EXPECT_EQ(p.next(logits), 2);
  EXPECT_EQ(p.next(logits), 1);  // 1.5 - 0.6 = 0.9 < 1.0
  EXPECT_EQ(p.next(logits), 2);  // 0.9 > 1.0 - 0.6 = 0.4
  EXPECT_EQ(p.next(logits), 2);  // presence is paid once, whatever the count: still 0.9
  EXPECT_FLOAT_EQ(logits[2].item<float>(), 1.5f) << "the caller's logits are never changed";
}

TEST(TextCodec, CompleteUtf8PrefixStopsBeforeAnUnfinishedCharacter) {
  const std::string euro = "\xE2\x82\xAC";  // U+20AC, 3 bytes
  EXPECT_EQ(complete_utf8_prefix("ab" + euro), 5u);
  EXPECT_EQ(complete_utf8_prefix("ab" + euro.substr(0, 2)), 2u);
  EXPECT_EQ(complete_utf8_prefix("ab" + euro.substr(0, 1)), 2u);
  EXPECT_EQ(complete_utf8_prefix("\xF0\x9F\x98"), 0u);
  EXPECT_EQ(complete_utf8_prefix("\xF0\x9F\x98\x80"), 4u);
}

struct ByteModel {  // a tiny random model with a byte vocabulary
  GPTNeoXForCausalLM model = random_tiny_model("token", {"model.vocab_size=264", "model.tokenizer_vocab_size=260",
                                                          "model.eos_token_id=259"});
  CachedDecoder decoder{model};
  std::unique_ptr<TextCodec> codec = load_text_codec("bytes", "", model->config().tokenizer_vocab_size);
  std::shared_ptr<const KvCachePolicy> policy = policy_of("sink_window", 16, -1, model->config());

  DecoderStream stream() {
    return DecoderStream(policy, PositionRule::Cache, KeyRotation::Relative, model->config(), torch::kCPU);
  }
  std::vector<int64_t> prompt(const std::string& text) {
    auto ids = codec->encode(text);
    ids.insert(ids.begin(), model->config().sink_token_id(0));
    return ids;
  }
};

struct Collected {
  std::string text, finish;
  int64_t completion_tokens = 0;
  Generation::Listener listener() {
    return [this](const GenerationDelta& d) {
      text += d.text;
      if (!d.finish_reason.empty()) finish = d.finish_reason;
      completion_tokens = d.completion_tokens;
    };
  }
};

// A request that echoes `text`'s log-probs (after the sink) with `logprobs` alternatives per token.
GenerationRequest echo_request(ByteModel& m, const std::string& text, int64_t max_tokens, int64_t logprobs) {
  GenerationRequest request;
  request.prompt = m.prompt(text);
  request.max_tokens = max_tokens;
  request.logprobs = logprobs;
  request.echo_from = 1;
  return request;
}

// Runs one generation through an engine taking prefill chunks of `chunk` tokens; returns every token log-prob
// it reported (its listener also feeds `out`).
std::vector<TokenLogprob> run_scored(ByteModel& m, DecoderStream& stream, const GenerationRequest& request, int64_t chunk,
                                     Collected& out, std::shared_ptr<Generation>* generation = nullptr) {
  std::vector<TokenLogprob> got;
  auto g = std::make_shared<Generation>(request, stream, *m.codec, m.model->config(), [&](const GenerationDelta& d) {
    got.insert(got.end(), d.logprobs.begin(), d.logprobs.end());
    out.listener()(d);
  });
  GenerationEngine engine(m.decoder, chunk);
  engine.add(g);
  while (engine.active()) engine.step();
  if (generation) *generation = g;
  return got;
}

std::string run_alone(ByteModel& m, GenerationRequest request, Collected& out) {
  auto stream = m.stream();
  auto g = std::make_shared<Generation>(std::move(request), stream, *m.codec, m.model->config(), out.listener());
  GenerationEngine engine(m.decoder, 8);
  engine.add(g);
  while (engine.active()) engine.step();
  EXPECT_LE(stream.entries(), 16);
  return g->text();
}

TEST(Generation, GreedyEqualsAHandWrittenLoopThroughTheCache) {
  ByteModel m;
  GenerationRequest request;
  request.prompt = m.prompt(std::string(100, 'a') + "streaming");  // longer than the cache: evicts while prefilling
  request.sampling.temperature = 0;
  request.max_tokens = 20;
  request.stop_at_end_of_text = false;
  Collected out;
  const std::string text = run_alone(m, request, out);
  EXPECT_EQ(out.text, text);
  EXPECT_EQ(out.finish, "length");
  EXPECT_EQ(out.completion_tokens, 20);

  auto stream = m.stream();
  auto logits = stream_logits(m.decoder, stream, request.prompt, 5);
  std::vector<int64_t> generated{logits[-1].narrow(0, 0, 260).argmax().item<int64_t>()};
  while (generated.size() < 20)
    generated.push_back(m.decoder.step({{&stream, {generated.back()}}})[0][0].narrow(0, 0, 260).argmax().item<int64_t>());
  EXPECT_EQ(m.codec->decode(generated), text);
}

TEST(Generation, StopStringEndsTheTextAndIsNeverEmitted) {
  ByteModel m;
  GenerationRequest request;
  request.prompt = m.prompt("hello");
  request.sampling = {0.8, 0, 1.0, 7};
  request.max_tokens = 40;
  request.stop_at_end_of_text = false;
  Collected free_run;
  const std::string full = run_alone(m, request, free_run);
  ASSERT_GE(full.size(), 12u);
  request.stop = {full.substr(8, 3)};
  Collected stopped;
  const std::string text = run_alone(m, request, stopped);
  EXPECT_EQ(stopped.finish, "stop");
  EXPECT_EQ(text, full.substr(0, full.find(request.stop[0])));
  EXPECT_EQ(stopped.text, text);
}

// Generations that join at different steps, batched, produce what each produces alone.
TEST(Generation, BatchedGenerationsJoiningLateMatchSoloRuns) {
  ByteModel m;
  std::vector<std::string> prompts{"one", "a much longer prompt that streams through the cache", "x"};
  auto request_for = [&](size_t i) {
    GenerationRequest r;
    r.prompt = m.prompt(prompts[i]);
    r.sampling = {1.0, 20, 0.9, 100 + i};
    r.max_tokens = 12 + 3 * i;
    r.stop_at_end_of_text = false;
    return r;
  };
  std::vector<std::string> solo;
  for (size_t i = 0; i < prompts.size(); ++i) {
    Collected c;
    solo.push_back(run_alone(m, request_for(i), c));
  }
  std::vector<DecoderStream> streams;
  for (size_t i = 0; i < prompts.size(); ++i) streams.push_back(m.stream());
  std::vector<Collected> collected(prompts.size());
  GenerationEngine engine(m.decoder, 8);
  for (size_t i = 0; i < prompts.size(); ++i) {
    engine.add(std::make_shared<Generation>(request_for(i), streams[i], *m.codec, m.model->config(), collected[i].listener()));
    engine.step();  // the next one joins a step later
  }
  while (engine.active()) engine.step();
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(collected[i].text, solo[i]) << i;
}

TEST(Generation, AFullCacheAtItsLimitEndsOnlyThatGeneration) {
  ByteModel m;
  DecoderStream small(policy_of("full", 12, -1, m.model->config()), PositionRule::Cache, KeyRotation::Relative,
                      m.model->config(), torch::kCPU);
  auto ok = m.stream();
  GenerationRequest r;
  r.prompt = m.prompt("abc");
  r.max_tokens = 20;
  r.stop_at_end_of_text = false;
  Collected a, b;
  GenerationEngine engine(m.decoder, 8);
  engine.add(std::make_shared<Generation>(r, small, *m.codec, m.model->config(), a.listener()));
  engine.add(std::make_shared<Generation>(r, ok, *m.codec, m.model->config(), b.listener()));
  while (engine.active()) engine.step();
  EXPECT_EQ(a.finish, "error");
  EXPECT_EQ(b.finish, "length");
  EXPECT_EQ(b.completion_tokens, 20);
}

// echo + logprobs: each prompt token's log-prob equals the full forward's, across prefill chunk boundaries
// (the first echoed token is unscored, as OpenAI reports it), then the sampled tokens', with top-k alternatives.
TEST(Generation, EchoedPromptLogprobsEqualTheForwardAcrossChunks) {
  ByteModel m;
  GenerationRequest request = echo_request(m, "the prompt spans several prefill chunks", 3, 2);
  request.sampling.temperature = 0;
  request.stop_at_end_of_text = false;
  Collected out;
  auto stream = m.stream();
  const auto got = run_scored(m, stream, request, 5, out);  // 40 prompt tokens in chunks of 5

  auto reference = m.stream();
  auto logprobs = torch::log_softmax(stream_logits(m.decoder, reference, request.prompt, 64), -1);  // [P, V]
  const size_t P = request.prompt.size();
  ASSERT_EQ(got.size(), P - 1 + 3);
  EXPECT_FALSE(got[0].scored);
  EXPECT_EQ(got[0].id, request.prompt[1]);
  for (size_t j = 2; j < P; ++j) {
    EXPECT_EQ(got[j - 1].id, request.prompt[j]);
    EXPECT_NEAR(got[j - 1].logprob, logprobs[j - 1][request.prompt[j]].item<double>(), 1e-5) << j;
    ASSERT_EQ(got[j - 1].top.size(), 2u);
    EXPECT_EQ(got[j - 1].top[0].first, logprobs[j - 1].narrow(0, 0, 260).argmax().item<int64_t>());  // sampleable ids
  }
  EXPECT_NEAR(got[P - 1].logprob, logprobs[P - 1][got[P - 1].id].item<double>(), 1e-5);  // the first sampled token
  EXPECT_EQ(out.completion_tokens, 3);
}

// The alternatives are tokens a client can receive: never a sink token or vocabulary padding (ids >= 260
// here, 4 of 264), which a random model ranks among its top 20 somewhere in 40 positions.
TEST(Generation, TopLogprobsListOnlySampleableTokens) {
  ByteModel m;
  const GenerationRequest request = echo_request(m, "the prompt spans several prefill chunks", 4, 20);
  Collected out;
  auto stream = m.stream();
  const auto got = run_scored(m, stream, request, 8, out);
  ASSERT_GT(got.size(), 30u);
  for (const auto& token : got) {
    if (!token.scored) continue;
    ASSERT_EQ(token.top.size(), 20u);
    for (size_t i = 0; i < token.top.size(); ++i) {
      EXPECT_LT(token.top[i].first, 260) << "alternative " << i;
      if (i > 0) EXPECT_LE(token.top[i].second, token.top[i - 1].second);
    }
  }
}

// Greedy: each sampled token is the first of its own alternatives, with its own log-prob.
TEST(Generation, AGreedyTokenHeadsItsOwnAlternatives) {
  ByteModel m;
  GenerationRequest request = echo_request(m, "naïve café", 8, 3);
  request.sampling.temperature = 0;
  Collected out;
  auto stream = m.stream();
  const auto got = run_scored(m, stream, request, 4, out);
  const size_t first_sampled = request.prompt.size() - 1;  // the echo covers prompt[1..], its first unscored
  ASSERT_GT(got.size(), first_sampled);
  for (size_t i = first_sampled; i < got.size(); ++i) {
    ASSERT_EQ(got[i].top.size(), 3u) << i;
    EXPECT_EQ(got[i].top[0].first, got[i].id) << i;
    EXPECT_EQ(got[i].top[0].second, got[i].logprob) << i;
  }
}

// max_tokens 0 with echo: the prompt is scored and nothing is sampled.
TEST(Generation, MaxTokensZeroOnlyScoresThePrompt) {
  ByteModel m;
  const GenerationRequest request = echo_request(m, "abc", 0, 0);
  Collected out;
  auto stream = m.stream();
  std::shared_ptr<Generation> g;
  const auto got = run_scored(m, stream, request, 8, out, &g);
  EXPECT_EQ(out.finish, "length");
  EXPECT_EQ(out.completion_tokens, 0);
  EXPECT_EQ(got.size(), 3u);
  EXPECT_EQ(stream.length(), 4);
  EXPECT_TRUE(g->unfed().empty());
}

}  // namespace
}  // namespace sinklm
