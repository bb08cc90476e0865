// The cached decoding path against the model's own forward pass and the literal StreamingLLM reference.
#include <gtest/gtest.h>

#include <fstream>

#include "decode/cached_decoder.h"
#include "tests/decode/decode_test_support.h"

namespace sinklm {
namespace {

using namespace testing_support;

std::vector<int64_t> with_sink_tokens(const ModelConfig& c, const std::vector<int64_t>& ids) {
  return with_sink_prefix(c, ids);
}


TEST(CachedDecoder, FullCacheEqualsWholeSequenceForwardForEverySinkMode) {
  for (const std::string& mode : testing_support::sink_mode_names()) {
    auto model = random_tiny_model(mode);
    const auto& c = model->config();
    auto ids = with_sink_tokens(c, random_token_ids(45, c.tokenizer_vocab_size, 3));
    torch::Tensor expected;
    {
      c10::InferenceMode guard;
      expected = model->forward(torch::tensor(ids).unsqueeze(0))[0];  // [T, V]
    }
    CachedDecoder decoder(model);
    DecoderStream stream(policy_of("full", 64, -1, c), PositionRule::Cache, KeyRotation::Relative, c, torch::kCPU);
    auto logits = stream_logits(decoder, stream, ids, 7);
    EXPECT_LE(relative_error(logits, expected), 1e-5) << mode;
    EXPECT_EQ(stream.entries(), static_cast<int64_t>(ids.size()));
  }
}

// The equivalence proof: 5,000 tokens, W = 64, fast path token by token and in chunks, against the
// literal reference (keys re-rotated at 0..n-1 every step), fp32, relative error <= 1e-4 at every token.
TEST(StreamCache, RelativeRotationEqualsLiteralReferenceOver5000Tokens) {
  auto model = random_tiny_model("none", {"model.rotary_pct=1.0", "model.rotary_base=500"});
  const auto& c = model->config();
  CachedDecoder decoder(model);
  auto policy = policy_of("sink_window", 64, 4, c);
  DecoderStream fast(policy, PositionRule::Cache, KeyRotation::Relative, c, torch::kCPU);
  DecoderStream literal(policy, PositionRule::Cache, KeyRotation::Literal, c, torch::kCPU);
  DecoderStream chunked(policy, PositionRule::Cache, KeyRotation::Relative, c, torch::kCPU);
  const auto ids = random_token_ids(5000, c.tokenizer_vocab_size, 7);
  double worst = 0;
  for (size_t t = 0; t < ids.size(); ++t) {
    auto logits = decoder.step({{&fast, {ids[t]}}, {&literal, {ids[t]}}});
    worst = std::max(worst, relative_error(logits[0], logits[1]));
    ASSERT_EQ(fast.entries(), policy->entries_after(t + 1));
    ASSERT_EQ(literal.entries(), policy->entries_after(t + 1));
    ASSERT_LE(fast.entries(), 64);
    ASSERT_LE(fast.cache_allocated_entries(), 64);
  }
  EXPECT_LE(worst, 1e-4);
  EXPECT_EQ(fast.entries(), 64);
  // Chunked prefill (chunks of 100 cross the eviction boundary) against the same reference, replayed.
  DecoderStream replay(policy, PositionRule::Cache, KeyRotation::Literal, c, torch::kCPU);
  auto reference = stream_logits(decoder, replay, std::vector<int64_t>(ids.begin(), ids.begin() + 1000), 1);
  auto prefilled = stream_logits(decoder, chunked, std::vector<int64_t>(ids.begin(), ids.begin() + 1000), 100);
  EXPECT_LE(relative_error(prefilled, reference), 1e-4);
}

// Every sink variant, both position rules, window and sink_window: fast chunked (prefill) and token by token
// (the decode kernel) == literal.
TEST(StreamCache, RelativeEqualsLiteralForEveryModeAndPositionRule) {
  for (const std::string& mode : testing_support::sink_mode_names()) {
    auto model = random_tiny_model(mode, {"model.rotary_base=300"});
    const auto& c = model->config();
    CachedDecoder decoder(model);
    auto ids = with_sink_tokens(c, random_token_ids(300, c.tokenizer_vocab_size, 9));
    for (auto rule : {PositionRule::Cache, PositionRule::Stream}) {
      for (int64_t sinks : {0, 2}) {
        auto policy = policy_of("sink_window", 24, sinks, c);
        DecoderStream fast(policy, rule, KeyRotation::Relative, c, torch::kCPU);
        DecoderStream decoding(policy, rule, KeyRotation::Relative, c, torch::kCPU);
        DecoderStream literal(policy, rule, KeyRotation::Literal, c, torch::kCPU);
        auto a = stream_logits(decoder, fast, ids, 33);
        auto b = stream_logits(decoder, literal, ids, 1);
        auto d = stream_logits(decoder, decoding, ids, 1);
        EXPECT_LE(relative_error(a, b), 1e-4) << mode << " " << position_rule_name(rule) << " sinks " << sinks;
        EXPECT_LE(relative_error(d, b), 1e-4) << mode << " " << position_rule_name(rule) << " sinks " << sinks
                                              << ", token by token";
        EXPECT_EQ(fast.entries(), 24);
        EXPECT_EQ(literal.entries(), 24);
      }
    }
  }
}

// Batched decoding across streams (one attention call per layer and pool page) equals stream-by-stream
// attention: every sink mode, both position rules, sink_window and window, mixed prefill + decode steps.
TEST(CachedDecoder, BatchedDecodeEqualsStreamByStreamForEveryModeAndRule) {
  for (const std::string& mode : testing_support::sink_mode_names()) {
    auto model = random_tiny_model(mode, {"model.rotary_base=300"});
    for (auto rule : {PositionRule::Cache, PositionRule::Stream}) {
      for (const std::string policy : {"sink_window", "window"}) {
        int64_t batched_tokens = 0;
        const double error =
            batched_against_alone(model, policy_of(policy, 16, -1, model->config()), rule, 5, 30, &batched_tokens);
        EXPECT_LE(error, 1e-5) << mode << " " << position_rule_name(rule) << " " << policy;
        EXPECT_GE(batched_tokens, 30 * 3) << "the batched path was not taken";  // >= 4 of 5 streams decode per step
      }
    }
  }
}

// bf16 K/V storage: half the bytes, logits close to float32 storage, and batched == stream by stream.
TEST(CachedDecoder, Bf16KvStorageIsCloseToFloat32AndBatchesTheSame) {
  auto model = random_tiny_model("token", {"model.rotary_base=300"});
  const auto& c = model->config();
  CacheOptions o;
  o.window = 16;
  std::shared_ptr<const KvCachePolicy> fp32 = make_cache_policy(o, c);
  o.kv_format = KvFormat::Bf16;
  std::shared_ptr<const KvCachePolicy> bf16 = make_cache_policy(o, c);
  CachedDecoder decoder(model);
  DecoderStream a(fp32, PositionRule::Cache, KeyRotation::Relative, c, torch::kCPU);
  DecoderStream b(bf16, PositionRule::Cache, KeyRotation::Relative, c, torch::kCPU);
  auto ids = with_sink_tokens(c, random_token_ids(60, c.tokenizer_vocab_size, 5));
  auto la = stream_logits(decoder, a, ids, 7), lb = stream_logits(decoder, b, ids, 7);
  const double error = relative_error(lb, la);
  EXPECT_GT(error, 0) << "bf16 storage changed nothing: is it stored in bf16?";
  EXPECT_LE(error, 0.05);
  EXPECT_EQ(b.snapshot().keys[0].scalar_type(), torch::kFloat32);  // snapshots stay float32 on disk
  int64_t batched_tokens = 0;
  EXPECT_LE(batched_against_alone(model, bf16, PositionRule::Cache, 4, 20, &batched_tokens), 1e-2);
  EXPECT_GT(batched_tokens, 0);
}

// int8 K/V (decode/cache/kv_format.h) on a sink-token model whose heads are wide enough (D = 16) for the decode
// kernels: logits close to float32 storage; the sink slot bit-exact (the float32 cache's own entry) through
// eviction, a snapshot and a restore, where int8-all quantises it; a restored cache holds the same bytes and
// decodes the same logits; batched decode equals stream by stream.
TEST(CachedDecoder, Int8KvKeepsTheSinkExactThroughEvictionSnapshotAndRestore) {
  auto model = random_tiny_model("token", {"model.rotary_base=300", "model.hidden_size=64", "model.num_heads=4"});
  const auto& c = model->config();
  ASSERT_EQ(c.head_dim(), 16);
  CachedDecoder decoder(model);
  const auto policy = [&](KvFormat format) {
    CacheOptions o;
    o.window = 16;
    o.kv_format = format;
    return std::shared_ptr<const KvCachePolicy>(make_cache_policy(o, c));
  };
  const auto fp32 = policy(KvFormat::Fp32), int8 = policy(KvFormat::Int8), int8_all = policy(KvFormat::Int8All);
  ASSERT_EQ(int8->sinks(), 1);
  const auto ids = with_sink_tokens(c, random_token_ids(60, c.tokenizer_vocab_size, 5));
  DecoderStream a(fp32, PositionRule::Cache, KeyRotation::Relative, c, torch::kCPU);
  DecoderStream b(int8, PositionRule::Cache, KeyRotation::Relative, c, torch::kCPU);
  DecoderStream d(int8_all, PositionRule::Cache, KeyRotation::Relative, c, torch::kCPU);
  const auto la = stream_logits(decoder, a, ids, 7), lb = stream_logits(decoder, b, ids, 7);
  const double error = relative_error(lb, la), error_all = relative_error(stream_logits(decoder, d, ids, 7), la);
  EXPECT_GT(error, 0) << "int8 storage changed nothing: is it stored in int8?";
  EXPECT_LE(error, 0.05);
  EXPECT_LE(error_all, 0.05);
  // Keys and values of every layer and head: 16 entries of 64 bytes (float32, D = 16), or 18 (int8 and the
  // float16 scale) and the sink's exact 64 beside them.
  const int64_t heads = 2 * c.num_layers * c.num_heads;
  EXPECT_EQ(a.kv_bytes(), heads * 16 * 64);
  EXPECT_EQ(b.kv_bytes(), heads * (16 * 18 + 64));
  EXPECT_EQ(d.kv_bytes(), heads * 16 * 18);

  const auto sa = a.snapshot(), sb = b.snapshot(), sd = d.snapshot();
  EXPECT_EQ(sb.format, KvFormat::Int8);
  bool all_exact = true;
  for (int64_t l = 0; l < c.num_layers; ++l) {  // entry 0 is the sink, at position 0 (no rotation to undo)
    EXPECT_TRUE(torch::equal(sb.keys[l].narrow(1, 0, 1), sa.keys[l].narrow(1, 0, 1))) << "layer " << l;
    EXPECT_TRUE(torch::equal(sb.values[l].narrow(1, 0, 1), sa.values[l].narrow(1, 0, 1))) << "layer " << l;
    all_exact = all_exact && torch::equal(sd.values[l].narrow(1, 0, 1), sa.values[l].narrow(1, 0, 1));
  }
  EXPECT_FALSE(all_exact) << "int8-all left the sink exact: the ablation would measure nothing";

  std::vector<int64_t> held(b.held_tokens().begin(), b.held_tokens().end());
  DecoderStream restored(int8, PositionRule::Cache, KeyRotation::Relative, c, torch::kCPU, sb, held);
  const auto again = restored.snapshot();
  for (size_t i = 0; i < sb.keys.size(); ++i) {
    EXPECT_TRUE(torch::equal(again.keys[i], sb.keys[i])) << "layer " << i;
    EXPECT_TRUE(torch::equal(again.values[i], sb.values[i])) << "layer " << i;
  }
  const auto next = random_token_ids(20, c.tokenizer_vocab_size, 9);
  EXPECT_TRUE(torch::equal(stream_logits(decoder, restored, next, 1), stream_logits(decoder, b, next, 1)));

  int64_t batched_tokens = 0;
  EXPECT_LE(batched_against_alone(model, int8, PositionRule::Cache, 4, 20, &batched_tokens), 1e-2);
  EXPECT_GT(batched_tokens, 0);
}

// What int8 K/V refuses, naming it: a cache with no sink slot to keep exact, recompute (no K/V), and a
// snapshot of another format.
TEST(CachedDecoder, Int8KvRefusesCachesWithoutSinksAndSnapshotsOfAnotherFormat) {
  auto model = random_tiny_model("token");
  const auto& c = model->config();
  CacheOptions o;
  o.window = 16;
  o.kv_format = KvFormat::Int8;
  for (const std::string name : {"window", "full"}) {
    o.policy = name;
    const auto error = user_error_of([&] { make_cache_policy(o, c, "--cache"); });
    EXPECT_NE(error.find("keeps the sink slots exact"), std::string::npos) << name << ": " << error;
    EXPECT_NE(error.find("int8-all"), std::string::npos) << error;
  }
  o.policy = "recompute";
  EXPECT_NE(user_error_of([&] { make_cache_policy(o, c); }).find("recompute keeps no K/V"), std::string::npos);
  o.policy = "window";
  o.kv_format = KvFormat::Int8All;
  EXPECT_NO_THROW(make_cache_policy(o, c));

  o.policy = "sink_window";
  o.kv_format = KvFormat::Fp32;
  std::shared_ptr<const KvCachePolicy> fp32 = make_cache_policy(o, c);
  o.kv_format = KvFormat::Int8;
  std::shared_ptr<const KvCachePolicy> int8 = make_cache_policy(o, c);
  CachedDecoder decoder(model);
  DecoderStream stream(fp32, PositionRule::Cache, KeyRotation::Relative, c, torch::kCPU);
  stream_logits(decoder, stream, random_token_ids(20, c.tokenizer_vocab_size, 3), 8);
  const auto snapshot = stream.snapshot();
  const auto error = user_error_of([&] { make_stream_cache(int8, PositionRule::Cache, KeyRotation::Relative, c, torch::kCPU, &snapshot); });
  EXPECT_NE(error.find("holds fp32 K/V entries, this cache stores int8"), std::string::npos) << error;
}

// Control: once tokens are evicted the two position rules give different logits, so the tests above would
// notice a cache that applied the wrong rule.
TEST(StreamCache, PositionRuleChangesLogitsAfterEviction) {
  auto model = random_tiny_model("none", {"model.rotary_pct=1.0", "model.rotary_base=100"});
  const auto& c = model->config();
  CachedDecoder decoder(model);
  auto policy = policy_of("sink_window", 16, 4, c);
  DecoderStream by_cache(policy, PositionRule::Cache, KeyRotation::Relative, c, torch::kCPU);
  DecoderStream by_stream(policy, PositionRule::Stream, KeyRotation::Relative, c, torch::kCPU);
  auto ids = random_token_ids(64, c.tokenizer_vocab_size, 2);
  auto a = stream_logits(decoder, by_cache, ids, 8), b = stream_logits(decoder, by_stream, ids, 8);
  EXPECT_LE(relative_error(a.narrow(0, 0, 16), b.narrow(0, 0, 16)), 1e-5);  // identical before eviction
  EXPECT_GE(relative_error(a.narrow(0, 32, 32), b.narrow(0, 32, 32)), 1e-3);
}

// The same cache contents decode to the same logits at stream position 10,000,000 as at 10,000.
TEST(StreamCache, LogitsAtPositionTenMillionEqualThoseAtTenThousand) {
  auto model = random_tiny_model("none", {"model.rotary_pct=1.0"});
  const auto& c = model->config();
  CachedDecoder decoder(model);
  auto policy = policy_of("sink_window", 64, 4, c);
  DecoderStream near(policy, PositionRule::Cache, KeyRotation::Relative, c, torch::kCPU);
  stream_logits(decoder, near, random_token_ids(10000, c.tokenizer_vocab_size, 4), 256);
  CacheSnapshot contents = near.snapshot();
  contents.stream_length = 10000000;
  std::vector<int64_t> held(near.held_tokens().begin(), near.held_tokens().end());
  DecoderStream far(policy, PositionRule::Cache, KeyRotation::Relative, c, torch::kCPU, contents, held);
  DecoderStream far_literal(policy, PositionRule::Cache, KeyRotation::Literal, c, torch::kCPU, contents, held);
  auto next = random_token_ids(200, c.tokenizer_vocab_size, 5);
  auto at_near = stream_logits(decoder, near, next, 1);
  auto at_far = stream_logits(decoder, far, next, 1);
  auto at_far_literal = stream_logits(decoder, far_literal, next, 1);
  EXPECT_LE(relative_error(at_far, at_near), 1e-5);
  EXPECT_LE(relative_error(at_far_literal, at_near), 1e-5);
  EXPECT_EQ(far.length(), 10000200);
  EXPECT_EQ(far.entries(), 64);
}

int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * 4096;
}

// One million tokens through a very small model: the cache stays at its budget and memory stays flat.
TEST(StreamCache, MillionTokenStreamKeepsMemoryFlat) {
  auto model = random_tiny_model("none", {"model.num_layers=1", "model.hidden_size=16", "model.num_heads=2",
                                          "model.intermediate_size=16"});
  const auto& c = model->config();
  CachedDecoder decoder(model);
  auto policy = policy_of("sink_window", 16, 4, c);
  DecoderStream stream(policy, PositionRule::Cache, KeyRotation::Relative, c, torch::kCPU);
  const auto ids = random_token_ids(128, c.tokenizer_vocab_size, 13);
  int64_t rss_early = 0;
  torch::Tensor logits;
  while (stream.length() < 1000000) {
    const int64_t take = std::min<int64_t>(stream.max_chunk(128), 1000000 - stream.length());
    logits = decoder.step({{&stream, std::vector<int64_t>(ids.begin(), ids.begin() + take)}})[0];
    ASSERT_EQ(stream.entries(), std::min<int64_t>(stream.length(), 16));
    if (rss_early == 0 && stream.length() >= 100000) rss_early = resident_bytes();
  }
  EXPECT_EQ(stream.length(), 1000000);
  EXPECT_EQ(stream.cache_allocated_entries(), 16);
  EXPECT_TRUE(torch::isfinite(logits).all().item<bool>());
  EXPECT_LT(resident_bytes() - rss_early, 16 << 20) << "resident memory grew between token 100k and 1M";
}

TEST(StreamCache, SnapshotMovesBetweenImplementations) {
  auto model = random_tiny_model("logit");
  const auto& c = model->config();
  CachedDecoder decoder(model);
  auto policy = policy_of("sink_window", 20, 3, c);
  DecoderStream fast(policy, PositionRule::Stream, KeyRotation::Relative, c, torch::kCPU);
  stream_logits(decoder, fast, random_token_ids(77, c.tokenizer_vocab_size, 6), 10);
  std::vector<int64_t> held(fast.held_tokens().begin(), fast.held_tokens().end());
  DecoderStream literal(policy, PositionRule::Stream, KeyRotation::Literal, c, torch::kCPU, fast.snapshot(), held);
  DecoderStream fast_again(policy, PositionRule::Stream, KeyRotation::Relative, c, torch::kCPU, literal.snapshot(),
                           held);
  auto next = random_token_ids(30, c.tokenizer_vocab_size, 8);
  auto a = stream_logits(decoder, fast, next, 1), b = stream_logits(decoder, literal, next, 1),
       d = stream_logits(decoder, fast_again, next, 4);
  EXPECT_LE(relative_error(b, a), 1e-5);
  EXPECT_LE(relative_error(d, a), 1e-5);
  // A snapshot that does not fit the policy is refused with a message naming the mismatch.
  auto wrong = fast.snapshot();
  wrong.stream_length = 5;
  EXPECT_NE(user_error_of([&] { make_stream_cache(policy, PositionRule::Stream, KeyRotation::Relative, c, torch::kCPU, &wrong); })
                .find("expected"),
            std::string::npos);
}

TEST(CachedDecoder, RecomputeHoldsTheSameTokensAndMatchesFullBeforeEviction) {
  auto model = random_tiny_model("none");
  const auto& c = model->config();
  CachedDecoder decoder(model);
  auto ids = random_token_ids(40, c.tokenizer_vocab_size, 12);
  DecoderStream recompute(policy_of("recompute", 16, 2, c), PositionRule::Cache, KeyRotation::Relative, c, torch::kCPU);
  DecoderStream full(policy_of("full", 64, -1, c), PositionRule::Cache, KeyRotation::Relative, c, torch::kCPU);
  auto a = stream_logits(decoder, recompute, ids, 5), b = stream_logits(decoder, full, ids, 5);
  EXPECT_LE(relative_error(a.narrow(0, 0, 16), b.narrow(0, 0, 16)), 1e-5);
  EXPECT_EQ(recompute.entries(), 16);
  auto held = SinkWindowCache(2, 16).held_positions(40);
  for (size_t i = 0; i < held.size(); ++i) EXPECT_EQ(recompute.held_tokens()[i], ids[held[i]]);
  // Full refuses past its limit, naming it.
  DecoderStream small(policy_of("full", 8, -1, c), PositionRule::Cache, KeyRotation::Relative, c, torch::kCPU);
  EXPECT_NE(user_error_of([&] { stream_logits(decoder, small, ids, 4); }).find("at most 8"), std::string::npos);
}

// The paper's sliding window with re-computation, for a model pretrained with a sink token: each prediction
// re-encodes the sink then the W - 1 most recent tokens, as the model saw every sample in training. With the
// cache's default sinks every row equals a dense forward of exactly that window (left out, the window would be
// the W most recent tokens alone and differ once the sink leaves it).
TEST(CachedDecoder, RecomputeOfATokenModelStartsEveryWindowWithTheSink) {
  auto model = random_tiny_model("token");
  const auto& c = model->config();
  const int64_t W = 12;
  CachedDecoder decoder(model);
  const auto ids = with_sink_prefix(c, random_token_ids(40, c.tokenizer_vocab_size, 21));
  DecoderStream recompute(policy_of("recompute", W, -1, c), PositionRule::Cache, KeyRotation::Relative, c, torch::kCPU);
  const auto streamed = stream_logits(decoder, recompute, ids, 1);  // [41, V]
  torch::NoGradGuard no_grad;
  for (int64_t t = W; t < static_cast<int64_t>(ids.size()); t += 7) {
    std::vector<int64_t> window = {ids[0]};
    window.insert(window.end(), ids.begin() + t - (W - 2), ids.begin() + t + 1);  // the sink + W - 1 recent
    const auto dense = model->forward(torch::tensor(window, torch::kInt64).unsqueeze(0))[0];  // [W, V]
    EXPECT_LE(relative_error(streamed[t], dense[W - 1]), 1e-5) << "token " << t;
  }
}

// Several streams of different lengths and policies in one batched step give each stream's solo logits.
TEST(CachedDecoder, BatchedStreamsEqualSoloStreams) {
  auto model = random_tiny_model("softmax1");
  const auto& c = model->config();
  CachedDecoder decoder(model);
  auto a_ids = random_token_ids(50, c.tokenizer_vocab_size, 1), b_ids = random_token_ids(50, c.tokenizer_vocab_size, 2);
  auto policy = policy_of("sink_window", 12, 4, c);
  DecoderStream a(policy, PositionRule::Cache, KeyRotation::Relative, c, torch::kCPU);
  DecoderStream b(policy_of("window", 9, -1, c), PositionRule::Stream, KeyRotation::Relative, c, torch::kCPU);
  DecoderStream a_solo(policy, PositionRule::Cache, KeyRotation::Relative, c, torch::kCPU);
  DecoderStream b_solo(policy_of("window", 9, -1, c), PositionRule::Stream, KeyRotation::Relative, c, torch::kCPU);
  // b joins late: a prefills 20 alone, then both decode one token per step.
  stream_logits(decoder, a, std::vector<int64_t>(a_ids.begin(), a_ids.begin() + 20), 20);
  auto a_expected = stream_logits(decoder, a_solo, a_ids, 1), b_expected = stream_logits(decoder, b_solo, b_ids, 1);
  for (int64_t t = 0; t < 30; ++t) {
    auto out = decoder.step({{&b, {b_ids[t]}}, {&a, {a_ids[20 + t]}}});
    EXPECT_LE(relative_error(out[1], a_expected[20 + t].unsqueeze(0)), 1e-5);
    EXPECT_LE(relative_error(out[0], b_expected[t].unsqueeze(0)), 1e-5);
  }
}

// A prompt's chunks before its last want no logits: step() skips their LM-head rows, returns undefined for
// them, and the others in the same step (cached and recomputed) keep their own rows and values.
TEST(CachedDecoder, ChunksWantingNoLogitsSkipTheHeadAndLeaveTheStreamsAsTheyWere) {
  auto model = random_tiny_model("softmax1");
  const auto& c = model->config();
  CachedDecoder decoder(model);
  auto ids = random_token_ids(24, c.tokenizer_vocab_size, 5), other = random_token_ids(24, c.tokenizer_vocab_size, 6);
  auto policy = policy_of("sink_window", 12, 4, c);
  DecoderStream quiet(policy, PositionRule::Cache, KeyRotation::Relative, c, torch::kCPU);
  DecoderStream loud(policy, PositionRule::Cache, KeyRotation::Relative, c, torch::kCPU);
  DecoderStream recomputed(policy_of("recompute", 12, 4, c), PositionRule::Cache, KeyRotation::Relative, c, torch::kCPU);
  DecoderStream solo(policy, PositionRule::Cache, KeyRotation::Relative, c, torch::kCPU);
  DecoderStream other_solo(policy, PositionRule::Cache, KeyRotation::Relative, c, torch::kCPU);
  auto expected = stream_logits(decoder, solo, ids, 6), other_expected = stream_logits(decoder, other_solo, other, 6);
  for (int64_t at = 0; at < 24;) {
    const int64_t take = std::min<int64_t>(quiet.max_chunk(6), 24 - at);  // chunks never straddle the sinks
    const std::vector<int64_t> part(ids.begin() + at, ids.begin() + at + take), o(other.begin() + at, other.begin() + at + take);
    const bool last = at + take == 24;
    auto out = decoder.step({{&quiet, part, last}, {&loud, o}, {&recomputed, part, last}}, LogitsWanted::All);
    EXPECT_EQ(out[0].defined(), last);
    EXPECT_EQ(out[2].defined(), last);
    EXPECT_LE(relative_error(out[1], other_expected.narrow(0, at, take)), 1e-5);
    if (last) EXPECT_LE(relative_error(out[0], expected.narrow(0, at, take)), 1e-5);
    at += take;
  }
  EXPECT_EQ(quiet.length(), 24);
}

}  // namespace
}  // namespace sinklm
