// K/V formats (decode/cache/kv_format.h): the int8 quantisation's error bound and its stability under a round
// trip, and decode attention over an int8 run (decode/attention/stored_run_attention.h) against attention over
// the dequantised entries, with the sink columns taken from their exact copies.
#include "decode/cache/kv_format.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "decode/attention/stored_run_attention.h"
#include "decode/cache/kv_pool.h"
#include "../model/model_test_support.h"

namespace sinklm {
namespace {

TEST(KvFormat, NamesParseBackAndOthersAreRefusedWithTheChoices) {
  for (auto format : {KvFormat::Fp32, KvFormat::Bf16, KvFormat::Int8, KvFormat::Int8All})
    EXPECT_EQ(parse_kv_format(kv_format_name(format)), format);
  const auto error = testing_support::user_error_of([] { parse_kv_format("int4", "--kv-dtype"); });
  EXPECT_NE(error.find("--kv-dtype: unknown K/V format 'int4'"), std::string::npos) << error;
  EXPECT_NE(error.find("int8-all"), std::string::npos) << error;
  EXPECT_EQ(kv_entry_bytes(KvFormat::Int8, 64), 66);  // 64 int8 values and a float16 scale
  EXPECT_EQ(kv_entry_bytes(KvFormat::Bf16, 64), 128);
  EXPECT_EQ(kv_sink_extra_bytes(KvFormat::Int8, 64), 256);
  EXPECT_EQ(kv_sink_extra_bytes(KvFormat::Int8All, 64), 0);
}

// Each value is within half a step (its row's scale) of what it read back, and quantising what was read back
// (rotated and rotated back in float32, as a snapshot does) gives the same bytes.
TEST(KvFormat, Int8IsWithinHalfAScaleAndRequantisesToTheSameBytes) {
  torch::manual_seed(3);
  auto x = torch::randn({4, 50, 64}) * torch::rand({4, 50, 1}) * 20;  // [H, N, D], rows of many magnitudes
  x[1][7].zero_();
  auto [q, scales] = quantize_kv(x);
  ASSERT_EQ(q.scalar_type(), torch::kChar);
  ASSERT_EQ(scales.sizes(), (std::vector<int64_t>{4, 50}));
  EXPECT_EQ(scales[1][7].item<float>(), 0.0f);
  const auto back = dequantize_kv(q, scales);
  const auto bound = scales.to(torch::kFloat32).unsqueeze(-1) * 0.5 * (1 + 1e-3);
  EXPECT_TRUE(((back - x).abs() <= bound).all().item<bool>());
  EXPECT_GT((back - x).abs().max().item<float>(), 0) << "int8 changed nothing";
  const double angle = 0.7;  // a rotation of each (d, d + 32) pair and back, as RoPE and its inverse
  const auto rotate = [](const torch::Tensor& t, double a) {
    auto lo = t.narrow(-1, 0, 32), hi = t.narrow(-1, 32, 32);
    return torch::cat({lo * std::cos(a) - hi * std::sin(a), hi * std::cos(a) + lo * std::sin(a)}, -1);
  };
  auto [q2, scales2] = quantize_kv(rotate(rotate(back, angle), -angle));
  EXPECT_TRUE(torch::equal(q2, q));
  EXPECT_TRUE(torch::equal(scales2, scales));
  EXPECT_TRUE(torch::equal(kv_round_trip(KvFormat::Int8, x, /*sinks=*/true), x));  // sinks exact
  EXPECT_TRUE(torch::equal(kv_round_trip(KvFormat::Int8All, x, true), back));
}

// A run of m slots of a page of m + 2 in an int8 format, every entry stored through store_decode_entries.
KvLayer stored_run(KvFormat format, int64_t m, int64_t H, int64_t S, int64_t width, int64_t D) {
  auto page = KvLayer::zeros(format, {m + 2}, H, S, width, D, torch::kCPU);
  auto run = page.narrow(1, m);
  std::vector<int64_t> rows, columns;
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < width; ++c) rows.push_back(r), columns.push_back(c);
  const auto n = static_cast<int64_t>(rows.size());
  store_decode_entries(format, run, torch::tensor(rows), torch::tensor(columns), S, torch::randn({n, H, D}) * 3,
                       torch::randn({n, H, D}));
  return run;
}

TEST(StoredRunAttention, Int8ScoresAndMixEqualAttentionOverTheDequantisedEntries) {
  torch::manual_seed(4);
  for (auto format : {KvFormat::Int8, KvFormat::Int8All})
    for (int64_t D : {8, 16, 64})  // 8: LibTorch's products (the kernels take multiples of 16)
      for (int64_t width : {2, 17, 300})
        for (int64_t S : {1, 2}) {
          if (S > width) continue;
          const int64_t m = 3, H = 2;
          const std::string what = std::string(kv_format_name(format)) + " D " + std::to_string(D) + " width " +
                                   std::to_string(width) + " sinks " + std::to_string(S);
          const auto run = stored_run(format, m, H, S, width, D);
          auto keys = dequantize_kv(run.keys, run.key_scales), values = dequantize_kv(run.values, run.value_scales);
          if (kv_sinks_exact(format)) {  // the reference reads the sink column from its exact copy
            keys.narrow(2, 0, S).copy_(run.sink_keys);
            values.narrow(2, 0, S).copy_(run.sink_values);
          }
          auto queries = torch::randn({m, H, 2, D});  // row 1 against the sinks, row 0 against the rest
          const auto keys_t = keys.transpose(2, 3);
          auto expected = torch::cat({torch::matmul(queries.narrow(2, 1, 1), keys_t.narrow(3, 0, S)),
                                      torch::matmul(queries.narrow(2, 0, 1), keys_t.narrow(3, S, width - S))}, -1);
          auto scores = stored_key_scores(format, run, queries, S);
          EXPECT_LE(testing_support::scaled_max_error(scores, expected), 1e-5) << what;
          const auto one = queries.narrow(2, 0, 1);  // one query row for every column
          EXPECT_LE(testing_support::scaled_max_error(stored_key_scores(format, run, one, S), torch::matmul(one, keys_t)),
                    1e-5) << what << " one query";
          auto probs = torch::softmax(scores, -1);
          EXPECT_LE(testing_support::scaled_max_error(stored_value_mix(format, run, probs, S), torch::matmul(probs, values)),
                    1e-5) << what;
        }
}

}  // namespace
}  // namespace sinklm
