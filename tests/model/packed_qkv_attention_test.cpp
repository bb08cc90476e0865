// The fused CPU attention kernel (rotary + causal attention + head merge, forward and backward) against the
// split path it replaces: apply_rotary and model/attention/attention.h's reference on q, k, v views of the same qkv.
#include "model/kernels/packed_qkv_attention.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/system/cpu_features.h"
#include "model/attention/attention.h"
#include "model/attention/rotary.h"
#include "tests/model/model_test_support.h"

namespace sinklm {
namespace {

using testing_support::scaled_max_error;

struct Case {
  const char* name;
  int64_t B, T, H, D, rotary_dims;
  bool per_row_positions;  // cos/sin [B, T, R] (rows at different offsets) instead of [T, R]
  int sink;                // 0 none, 1 zero logit (softmax1), 2 learned logit, 3 learned logit, key and value
};

struct Inputs {
  torch::Tensor qkv, cos, sin, upstream;
  SinkColumn sink;
};

Inputs make_inputs(const Case& c) {
  torch::manual_seed(3);
  Inputs in;
  in.qkv = (torch::randn({c.B, c.T, c.H, 3 * c.D}) * 2).requires_grad_(true);
  auto positions = torch::arange(c.T, torch::kInt64);
  if (c.per_row_positions) positions = positions.unsqueeze(0) + torch::arange(c.B, torch::kInt64).unsqueeze(1) * 1000;
  std::tie(in.cos, in.sin) = RotaryEmbedding(c.rotary_dims, 10000).cos_sin(positions);
  if (c.sink == 1) in.sink.logit = torch::zeros({c.H});
  if (c.sink >= 2) in.sink.logit = (torch::randn({c.H}) * 2).requires_grad_(true);
  if (c.sink == 3) {
    in.sink.key = (torch::randn({c.H, c.D}) * 1.5).requires_grad_(true);
    in.sink.value = torch::randn({c.H, c.D}).requires_grad_(true);
  }
  in.upstream = torch::randn({c.B, c.T, c.H * c.D});
  return in;
}

// Output and the gradients of qkv (and of the learned parts of the sink column) under `upstream`.
std::vector<torch::Tensor> run(const Inputs& in, const std::function<torch::Tensor(const Inputs&)>& attention) {
  auto out = attention(in);
  std::vector<torch::Tensor> wrt{in.qkv};
  for (const auto* t : {&in.sink.logit, &in.sink.key, &in.sink.value})
    if (t->defined() && t->requires_grad()) wrt.push_back(*t);
  auto grads = torch::autograd::grad({(out * in.upstream).sum()}, wrt);
  grads.insert(grads.begin(), out.detach());
  return grads;
}

torch::Tensor fused(const Inputs& in) { return packed_qkv_attention(in.qkv, in.cos, in.sin, in.sink); }

torch::Tensor split_reference(const Inputs& in) {
  const int64_t B = in.qkv.size(0), T = in.qkv.size(1), H = in.qkv.size(2), D = in.qkv.size(3) / 3;
  auto heads = in.qkv.permute({0, 2, 1, 3});  // [B, H, T, 3D]
  auto q = apply_rotary(heads.narrow(-1, 0, D), in.cos, in.sin);
  auto k = apply_rotary(heads.narrow(-1, D, D), in.cos, in.sin);
  auto out = causal_attention(q, k, heads.narrow(-1, 2 * D, D), in.sink, AttentionImpl::Reference);
  return out.transpose(1, 2).reshape({B, T, H * D});
}

class PackedQkvAttention : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (!cpu_has_avx512f()) GTEST_SKIP() << "the kernel needs AVX-512";
  }
};

TEST_P(PackedQkvAttention, MatchesSplitReferenceForwardAndBackward) {
  const Inputs in = make_inputs(GetParam());
  ASSERT_TRUE(packed_qkv_attention_applies(in.qkv));
  auto got = run(in, fused), expected = run(in, split_reference);
  ASSERT_EQ(got.size(), expected.size());
  const char* what[] = {"output", "d qkv", "d sink logit", "d sink key", "d sink value"};
  for (size_t i = 0; i < got.size(); ++i) EXPECT_LT(scaled_max_error(got[i], expected[i]), 2e-6) << what[i];
}

TEST_P(PackedQkvAttention, SameBitsOnOneAndTwoThreads) {
  const Inputs in = make_inputs(GetParam());
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  auto one = run(in, fused);
  at::set_num_threads(2);
  auto two = run(in, fused);
  at::set_num_threads(threads);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(torch::equal(one[i], two[i])) << i;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PackedQkvAttention,
    ::testing::Values(Case{"head32_tails", 2, 37, 3, 32, 8, false, 0}, Case{"one_token", 1, 1, 2, 16, 16, false, 0},
                      Case{"head48_no_rotary_softmax1", 2, 21, 2, 48, 0, false, 1},
                      Case{"head64_logit_row_positions", 2, 70, 2, 64, 16, true, 2},
                      Case{"long_rows_logit", 1, 300, 2, 32, 8, false, 2},
                      Case{"head32_key_value_row_positions", 2, 45, 3, 32, 8, true, 3},
                      Case{"long_rows_key_value", 1, 300, 2, 64, 16, false, 3}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

TEST(PackedQkvAttentionApplies, OnlyToContiguousFloat32WithHeadSizeMultipleOf16) {
  if (!cpu_has_avx512f()) GTEST_SKIP() << "the kernel needs AVX-512";
  EXPECT_TRUE(packed_qkv_attention_applies(torch::zeros({1, 4, 2, 96})));
  EXPECT_FALSE(packed_qkv_attention_applies(torch::zeros({1, 4, 2, 24})));                      // D = 8
  EXPECT_FALSE(packed_qkv_attention_applies(torch::zeros({1, 4, 2, 96}, torch::kFloat64)));     // float64
  EXPECT_FALSE(packed_qkv_attention_applies(torch::zeros({1, 2, 4, 96}).transpose(1, 2)));      // strided
}

TEST(PackedQkvAttentionApplies, InferenceModeGivesTheSameOutput) {
  if (!cpu_has_avx512f()) GTEST_SKIP() << "the kernel needs AVX-512";
  const Inputs in = make_inputs(Case{"x", 2, 19, 2, 32, 8, false, 2});
  auto with_grad = fused(in).detach();
  c10::InferenceMode inference;
  EXPECT_TRUE(torch::equal(fused(in), with_grad));
}

}  // namespace
}  // namespace sinklm
