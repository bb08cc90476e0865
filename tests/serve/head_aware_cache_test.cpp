// The head-aware cache (--cache heads): each head group attends exactly as the literal reference of its own
// policy, the fast path equals the literal one through the model, batched decoding equals stream by stream,
// snapshots restore through session files, and memory is counted per head from storage.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "decode/cache/head_roles.h"
#include "serve/sessions/session_snapshot.h"
#include "tests/decode/decode_test_support.h"

namespace sinklm {
namespace {

using namespace testing_support;
namespace fs = std::filesystem;

constexpr int64_t kWindow = 12, kRetrieval = 30, kSinks = 2;
// The tiny model has 2 layers x 4 heads: layer 0 keeps heads 1 and 3 at R, layer 1 head 0.
const std::vector<std::vector<int64_t>> kRetrievalHeads = {{1, 3}, {0}};

CacheOptions heads_options(std::vector<std::vector<int64_t>> retrieval = kRetrievalHeads) {
  CacheOptions o;
  o.policy = "heads";
  o.window = kWindow;
  o.sinks = kSinks;
  o.retrieval_window = kRetrieval;
  o.head_roles = std::make_shared<HeadRoles>(HeadRoles{2, 4, std::move(retrieval)});
  return o;
}

std::shared_ptr<const KvCachePolicy> heads_policy(const ModelConfig& c) { return make_cache_policy(heads_options(), c); }

TEST(HeadAwareCache, EachHeadGroupAttendsAsTheLiteralReferenceOfItsPolicy) {
  const ModelConfig c = ModelConfig::from(tiny_config("kv", {"model.rotary_base=300"}));
  const int64_t H = c.num_heads, D = c.head_dim();
  torch::manual_seed(3);
  const SinkColumn column{torch::randn({H}), torch::randn({H, D}), torch::randn({H, D})};  // every part of a column
  for (auto rule : {PositionRule::Cache, PositionRule::Stream}) {
    for (int64_t chunk : {1, 5}) {
      auto policy = heads_policy(c);
      auto grouped = make_stream_cache(policy, rule, KeyRotation::Relative, c, torch::kCPU);
      auto streaming = make_stream_cache(policy_of("sink_window", kWindow, kSinks, c), rule, KeyRotation::Literal, c, torch::kCPU);
      auto retrieval = make_stream_cache(policy_of("sink_window", kRetrieval, kSinks, c), rule, KeyRotation::Literal, c, torch::kCPU);
      double worst = 0, retrieval_vs_streaming = 0;
      for (int64_t t = 0; t < 70;) {
        const int64_t T = grouped->max_chunk(chunk);
        for (int64_t layer = 0; layer < c.num_layers; ++layer) {
          auto q = torch::randn({H, T, D}), k = torch::randn({H, T, D}), v = torch::randn({H, T, D});
          auto out = grouped->attend(layer, q, k, v, column);
          auto a = streaming->attend(layer, q, k, v, column), b = retrieval->attend(layer, q, k, v, column);
          for (int64_t h = 0; h < H; ++h) {
            const bool retrieves = policy->head_aware()->roles().is_retrieval(layer, h);
            worst = std::max(worst, relative_error(out[h], (retrieves ? b : a)[h]));
            if (retrieves) retrieval_vs_streaming = relative_error(out[h], a[h]);
          }
        }
        grouped->advance(T);
        streaming->advance(T);
        retrieval->advance(T);
        t += T;
      }
      EXPECT_LE(worst, 1e-5) << position_rule_name(rule) << " chunk " << chunk;
      // Control: past W a retrieval head sees what a streaming cache has evicted.
      EXPECT_GT(retrieval_vs_streaming, 1e-3);
      EXPECT_EQ(grouped->entries(), kRetrieval);  // the union of what the heads hold
    }
  }
}

// Through the whole model, every sink mode and both position rules: chunked prefill (fast path), token by
// token (the decode kernel) and the literal reference agree; and the result is neither uniform policy's.
TEST(HeadAwareCache, FastPathEqualsLiteralThroughTheModelForEveryMode) {
  for (const std::string& mode : sink_mode_names()) {
    auto model = random_tiny_model(mode, {"model.rotary_base=300"});
    const auto& c = model->config();
    CachedDecoder decoder(model);
    const auto ids = with_sink_prefix(c, random_token_ids(90, c.tokenizer_vocab_size, 9));
    for (auto rule : {PositionRule::Cache, PositionRule::Stream}) {
      auto policy = heads_policy(c);
      DecoderStream fast(policy, rule, KeyRotation::Relative, c, torch::kCPU);
      DecoderStream decoding(policy, rule, KeyRotation::Relative, c, torch::kCPU);
      DecoderStream literal(policy, rule, KeyRotation::Literal, c, torch::kCPU);
      auto a = stream_logits(decoder, fast, ids, 7), b = stream_logits(decoder, literal, ids, 1),
           d = stream_logits(decoder, decoding, ids, 1);
      EXPECT_LE(relative_error(a, b), 1e-4) << mode << " " << position_rule_name(rule);
      EXPECT_LE(relative_error(d, b), 1e-4) << mode << " " << position_rule_name(rule) << ", token by token";
      for (int64_t window : {kWindow, kRetrieval}) {
        DecoderStream uniform(policy_of("sink_window", window, kSinks, c), rule, KeyRotation::Relative, c, torch::kCPU);
        auto u = stream_logits(decoder, uniform, ids, 7);
        EXPECT_GT(relative_error(a.narrow(0, 60, 30), u.narrow(0, 60, 30)), 1e-4) << mode << ": equals sink_window " << window;
      }
    }
  }
}

TEST(HeadAwareCache, BatchedDecodeEqualsStreamByStream) {
  for (const std::string mode : {"token", "kv", "gated"}) {
    auto model = random_tiny_model(mode, {"model.rotary_base=300"});
    for (auto rule : {PositionRule::Cache, PositionRule::Stream}) {
      int64_t batched_tokens = 0;
      EXPECT_LE(batched_against_alone(model, heads_policy(model->config()), rule, 5, 40, &batched_tokens), 1e-5)
          << mode << " " << position_rule_name(rule);
      EXPECT_GE(batched_tokens, 40 * 3) << "the batched path was not taken";
    }
  }
}

TEST(HeadAwareCache, SnapshotRestoresThroughSessionFilesAndMovesBetweenImplementations) {
  auto model = random_tiny_model("logit");
  const auto& c = model->config();
  CachedDecoder decoder(model);
  auto policy = heads_policy(c);
  DecoderStream fast(policy, PositionRule::Cache, KeyRotation::Relative, c, torch::kCPU);
  stream_logits(decoder, fast, random_token_ids(57, c.tokenizer_vocab_size, 6), 10);
  const std::string dir = (fs::temp_directory_path() / ("sinklm-heads-" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_session_snapshot(dir, fast, 2);
  auto restored = read_session_snapshot(dir, "s", 1000, KeyRotation::Relative, c, torch::kCPU);
  ASSERT_TRUE(restored);
  EXPECT_EQ(restored->policy().label(), policy->label());
  std::vector<int64_t> held(fast.held_tokens().begin(), fast.held_tokens().end());
  DecoderStream literal(policy, PositionRule::Cache, KeyRotation::Literal, c, torch::kCPU, fast.snapshot(), held);
  const auto next = random_token_ids(40, c.tokenizer_vocab_size, 8);
  auto a = stream_logits(decoder, fast, next, 1), b = stream_logits(decoder, *restored, next, 3),
       d = stream_logits(decoder, literal, next, 1);
  EXPECT_LE(relative_error(b, a), 1e-5);
  EXPECT_LE(relative_error(d, a), 1e-5);
  // The head policy travels in state.json; a snapshot of other heads does not fit another policy.
  std::ifstream state(dir + "/snapshot-000000000057/state.json");
  EXPECT_NE(std::string(std::istreambuf_iterator<char>(state), {}).find("\"head_policy\""), std::string::npos);
  std::shared_ptr<const KvCachePolicy> other = make_cache_policy(heads_options({{0, 1, 2}, {1}}), c);
  auto snapshot = fast.snapshot();
  EXPECT_NE(user_error_of([&] { make_stream_cache(other, PositionRule::Cache, KeyRotation::Relative, c, torch::kCPU, &snapshot); })
                .find("expected"),
            std::string::npos);
  fs::remove_all(dir);
}

// Memory: K/V bytes counted from storage equal the policy's count per head, in both dtypes.
TEST(HeadAwareCache, MemoryIsCountedPerHeadFromStorage) {
  auto model = random_tiny_model("none");
  const auto& c = model->config();
  CachedDecoder decoder(model);
  for (auto format : {KvFormat::Fp32, KvFormat::Bf16, KvFormat::Int8}) {
    CacheOptions o = heads_options();
    o.kv_format = format;
    std::shared_ptr<const KvCachePolicy> policy = make_cache_policy(o, c);
    DecoderStream stream(policy, PositionRule::Cache, KeyRotation::Relative, c, torch::kCPU);
    stream_logits(decoder, stream, random_token_ids(80, c.tokenizer_vocab_size, 4), 16);
    // Layer 0: 2 heads x 30 + 2 x 12 entries; layer 1: 1 x 30 + 3 x 12; keys and values, D = 8. int8: 8
    // bytes and a 2-byte scale an entry, and each of the 4 heads' 2 sinks kept exact beside it (32 bytes).
    const int64_t entry = format == KvFormat::Fp32 ? 32 : format == KvFormat::Bf16 ? 16 : 10;
    const int64_t sinks = format == KvFormat::Int8 ? 4 * kSinks * 32 : 0;
    const int64_t layer0 = 2 * (84 * entry + sinks), layer1 = 2 * (66 * entry + sinks);
    EXPECT_EQ(stream.kv_bytes(), layer0 + layer1) << kv_format_name(format);
    EXPECT_EQ(kv_bytes_per_stream(*policy, c, 80), layer0 + layer1);
    EXPECT_EQ(kv_memory_json(*policy, c)["kv_bytes_per_layer"], nlohmann::json({layer0, layer1}));
    EXPECT_EQ(stream.entries(), kRetrieval);
  }
}

TEST(HeadAwareCache, BadHeadPoliciesNameTheField) {
  const ModelConfig c = ModelConfig::from(tiny_config("none"));
  auto error_of_json = [](const std::string& text) {
    return user_error_of([&] { head_roles_from_json(nlohmann::json::parse(text), "f.json"); });
  };
  EXPECT_NE(error_of_json(R"({"layers": 2})").find("not a head-policy file"), std::string::npos);
  const std::string head = R"({"format": "sinklm-head-policy", "layers": 2, "heads": 4, )";
  EXPECT_NE(error_of_json(head + R"("retrieval": [[1]]})").find("\"retrieval\" must be a list of 2 lists"), std::string::npos);
  EXPECT_NE(error_of_json(head + R"("retrieval": [[1], [4]]})").find("\"retrieval\"[1] has 4"), std::string::npos);
  EXPECT_NE(error_of_json(head + R"("retrieval": [[1, 1], []]})").find("twice"), std::string::npos);
  const HeadRoles roles = head_roles_from_json(nlohmann::json::parse(head + R"("retrieval": [[3, 1], []]})"), "f.json");
  EXPECT_EQ(roles.retrieval, (std::vector<std::vector<int64_t>>{{1, 3}, {}}));
  EXPECT_EQ(head_roles_from_json(head_roles_json(roles), "again"), roles);

  CacheOptions o = heads_options({{0}, {0}, {0}});
  o.head_roles = std::make_shared<HeadRoles>(HeadRoles{3, 4, {{0}, {0}, {0}}});
  EXPECT_NE(user_error_of([&] { make_cache_policy(o, c); }).find("3 layers x 4 heads, the model has 2 x 4"), std::string::npos);
  o = heads_options();
  o.retrieval_window = kWindow;
  EXPECT_NE(user_error_of([&] { make_cache_policy(o, c); }).find("must be larger than the window"), std::string::npos);
  o = heads_options();
  o.head_roles = nullptr;
  EXPECT_NE(user_error_of([&] { make_cache_policy(o, c); }).find("--head-policy FILE"), std::string::npos);
  o = heads_options();
  o.policy = "sink_window";
  EXPECT_NE(user_error_of([&] { make_cache_policy(o, c); }).find("apply to the heads cache only"), std::string::npos);
  EXPECT_EQ(make_cache_policy(heads_options(), c)->label(), "2+10/2+28");
  EXPECT_EQ(make_cache_policy(heads_options(), c)->snapshot_shapes(100, c),
            (std::vector<std::vector<int64_t>>{{2, 12, 8}, {2, 30, 8}, {3, 12, 8}, {1, 30, 8}}));
}

}  // namespace
}  // namespace sinklm
