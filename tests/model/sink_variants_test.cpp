// The sink variants: the zero sink is exactly softmax-off-by-one and attending to an all-zero key and
// value; a sink logit of -inf is vanilla; a kv sink at zero is the zero sink; an open gate is vanilla and an
// elementwise gate that repeats a headwise one is that one; every sink parameter learns; softpick is the
// rectified softmax of its paper, gives nothing where every score is below 0, and keeps no sink.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "model/attention/attention.h"
#include "model/gpt_neox.h"
#include "model/model_config.h"
#include "model_test_support.h"

namespace sinklm {
namespace {

using testing_support::random_ids;
using testing_support::tiny_config;

constexpr float kInf = std::numeric_limits<float>::infinity();

struct Qkv {
  torch::Tensor q, k, v;
};
Qkv random_qkv(int64_t T = 7) {
  torch::manual_seed(21);
  return {torch::randn({2, 3, T, 8}), torch::randn({2, 3, T, 8}), torch::randn({2, 3, T, 8})};
}

torch::Tensor causal_scores(const Qkv& x) {
  auto s = torch::matmul(x.q, x.k.transpose(2, 3)) / std::sqrt(8.0);
  auto T = x.q.size(2);
  return s.masked_fill(torch::ones({T, T}, torch::kBool).triu(1), -kInf);
}

TEST(ZeroSink, EqualsSoftmaxOffByOneFormula) {
  Qkv x = random_qkv();
  auto e = causal_scores(x).exp();                       // exp(-inf) = 0 for masked keys
  auto p = e / (1 + e.sum(-1, /*keepdim=*/true));        // exp(x_i) / (1 + sum_j exp(x_j))
  auto expected = torch::matmul(p, x.v);
  auto zeros = torch::zeros({3});
  for (auto impl : {AttentionImpl::Fast, AttentionImpl::Reference}) {
    auto out = causal_attention(x.q, x.k, x.v, SinkColumn{zeros}, impl);
    EXPECT_TRUE(torch::allclose(out, expected, 1e-5, 1e-6)) << (out - expected).abs().max();
  }
}

TEST(ZeroSink, EqualsAttendingToAnAllZeroKeyAndValue) {
  Qkv x = random_qkv();
  const int64_t T = x.q.size(2);
  auto zero = torch::zeros({2, 3, 1, 8});
  auto k = torch::cat({zero, x.k}, 2), v = torch::cat({zero, x.v}, 2);  // the zero entry is key/value 0
  auto scores = torch::matmul(x.q, k.transpose(2, 3)) / std::sqrt(8.0);  // [B, H, T, T+1]
  auto hidden = torch::cat({torch::zeros({T, 1}, torch::kBool), torch::ones({T, T}, torch::kBool).triu(1)}, 1);
  auto expected = torch::matmul(torch::softmax(scores.masked_fill(hidden, -kInf), -1), v);
  auto out = causal_attention(x.q, x.k, x.v, SinkColumn{torch::zeros({3})}, AttentionImpl::Fast);
  EXPECT_TRUE(torch::allclose(out, expected, 1e-5, 1e-6)) << (out - expected).abs().max();
}

TEST(LogitSink, MinusInfinityIsVanilla) {
  Qkv x = random_qkv();
  auto minus_inf = torch::full({3}, -kInf);
  auto vanilla_ref = causal_attention(x.q, x.k, x.v, {}, AttentionImpl::Reference);
  EXPECT_TRUE(torch::equal(causal_attention(x.q, x.k, x.v, SinkColumn{minus_inf}, AttentionImpl::Reference), vanilla_ref));
  auto vanilla_fast = causal_attention(x.q, x.k, x.v, {}, AttentionImpl::Fast);
  auto out = causal_attention(x.q, x.k, x.v, SinkColumn{minus_inf}, AttentionImpl::Fast);
  EXPECT_TRUE(torch::allclose(out, vanilla_fast, 1e-6, 1e-6)) << (out - vanilla_fast).abs().max();
}

// The column's general form (model/sink.h: SinkColumn with a key and a value): the same as one more entry
// every query sees, whose score is q . key / sqrt(D) + logit and whose value is `value`.
TEST(SinkColumnKeyValue, EqualsAttendingToOneMoreEntryInBothImplementations) {
  Qkv x = random_qkv();
  torch::manual_seed(23);
  SinkColumn column{torch::randn({3}), torch::randn({3, 8}), torch::randn({3, 8})};
  auto key = column.key.view({1, 3, 1, 8}).expand({2, 3, 1, 8}), value = column.value.view({1, 3, 1, 8}).expand({2, 3, 1, 8});
  auto extra = torch::matmul(x.q, key.transpose(2, 3)) / std::sqrt(8.0) + column.logit.view({1, 3, 1, 1});  // [B, H, T, 1]
  auto probs = torch::softmax(torch::cat({extra, causal_scores(x)}, -1), -1);
  auto expected = torch::matmul(probs, torch::cat({value, x.v}, 2));
  for (auto impl : {AttentionImpl::Fast, AttentionImpl::Reference}) {
    auto out = causal_attention(x.q, x.k, x.v, column, impl);
    EXPECT_TRUE(torch::allclose(out, expected, 1e-5, 1e-6)) << (out - expected).abs().max();
  }
}

TEST(SinkColumnKeyValue, FastPathGradientsEqualTheReference) {
  auto grads = [](AttentionImpl impl) {
    Qkv x = random_qkv();
    torch::manual_seed(29);
    SinkColumn column{torch::randn({3}).requires_grad_(), torch::randn({3, 8}).requires_grad_(),
                      torch::randn({3, 8}).requires_grad_()};
    x.q.requires_grad_();
    causal_attention(x.q, x.k, x.v, column, impl).pow(2).sum().backward();
    return std::vector<torch::Tensor>{x.q.grad(), column.logit.grad(), column.key.grad(), column.value.grad()};
  };
  auto fast = grads(AttentionImpl::Fast), reference = grads(AttentionImpl::Reference);
  const char* what[] = {"q", "logit", "key", "value"};
  for (size_t i = 0; i < fast.size(); ++i)
    EXPECT_TRUE(torch::allclose(fast[i], reference[i], 1e-4, 1e-5)) << what[i] << " " << (fast[i] - reference[i]).abs().max();
}

TEST(LogitSink, WholeModelWithMinusInfinityLogitsEqualsVanillaModel) {
  for (const char* impl : {"reference", "fast"}) {
    GPTNeoXForCausalLM vanilla(ModelConfig::from(tiny_config("none", {std::string("model.attention=") + impl})));
    GPTNeoXForCausalLM logit(ModelConfig::from(tiny_config("logit", {std::string("model.attention=") + impl})));
    torch::NoGradGuard no_grad;
    auto logit_params = logit->named_parameters();
    for (const auto& p : vanilla->named_parameters()) logit_params[p.key()].copy_(p.value());
    for (auto& p : logit_params)
      if (p.key().find("sink_logit") != std::string::npos) p.value().fill_(-kInf);
    auto ids = random_ids(2, 12, 60);
    auto a = vanilla->forward(ids), b = logit->forward(ids);
    if (std::string(impl) == "reference") EXPECT_TRUE(torch::equal(a, b)) << impl;
    else EXPECT_TRUE(torch::allclose(a, b, 1e-5, 1e-5)) << impl << " " << (a - b).abs().max();
  }
}

TEST(LogitSink, EverySinkLogitReceivesGradient) {
  GPTNeoXForCausalLM model(ModelConfig::from(tiny_config("logit")));
  auto ids = random_ids(2, 10, 60);
  auto logits = model->forward(ids);
  torch::nn::functional::cross_entropy(logits.narrow(1, 0, 9).reshape({-1, 64}), ids.narrow(1, 1, 9).reshape(-1)).backward();
  int found = 0;
  for (const auto& p : model->named_parameters()) {
    if (p.key().find("sink_logit") == std::string::npos) continue;
    ++found;
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_GT(p.value().grad().abs().min().item<float>(), 0.0f) << p.key() << " has a head with zero gradient";
  }
  EXPECT_EQ(found, 2);  // one [H] tensor per layer
}

// Copies every parameter `from` has into `to` (same names), leaving `to`'s own (mode-specific) ones.
void copy_shared_parameters(GPTNeoXForCausalLM& from, GPTNeoXForCausalLM& to) {
  torch::NoGradGuard no_grad;
  auto params = to->named_parameters();
  for (const auto& p : from->named_parameters())
    if (params.contains(p.key())) params[p.key()].copy_(p.value());
}

TEST(KeyValueSink, ZeroInitIsTheZeroSinkAndNormalInitIsNot) {
  for (const char* impl : {"reference", "fast"}) {
    const std::string attention = std::string("model.attention=") + impl;
    GPTNeoXForCausalLM softmax1(ModelConfig::from(tiny_config("softmax1", {attention})));
    GPTNeoXForCausalLM kv(ModelConfig::from(tiny_config("kv", {attention})));
    GPTNeoXForCausalLM kv_normal(ModelConfig::from(tiny_config("kv", {attention, "model.sink.kv_init=normal"})));
    copy_shared_parameters(softmax1, kv);
    copy_shared_parameters(softmax1, kv_normal);
    torch::NoGradGuard no_grad;
    auto ids = random_ids(2, 12, 60);
    auto expected = softmax1->forward(ids);
    EXPECT_TRUE(torch::allclose(kv->forward(ids), expected, 1e-5, 1e-5)) << impl;
    EXPECT_GT((kv_normal->forward(ids) - expected).abs().max().item<float>(), 1e-4) << impl;
  }
}

TEST(KeyValueSink, EverySinkKeyAndValueReceivesGradient) {
  GPTNeoXForCausalLM model(ModelConfig::from(tiny_config("kv", {"model.sink.kv_init=normal"})));
  auto ids = random_ids(2, 10, 60);
  auto logits = model->forward(ids);
  torch::nn::functional::cross_entropy(logits.narrow(1, 0, 9).reshape({-1, 64}), ids.narrow(1, 1, 9).reshape(-1)).backward();
  int found = 0;
  for (const auto& p : model->named_parameters()) {
    if (!model->sink_parameter_spec(p.value())) continue;
    ++found;
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_GT(p.value().grad().abs().amax(1).min().item<float>(), 0.0f) << p.key() << " has a head with zero gradient";
  }
  EXPECT_EQ(found, 4);  // a key and a value [H, D] per layer
}

TEST(GatedAttention, AnOpenGateIsVanilla) {
  for (const char* gate : {"headwise", "elementwise"}) {
    GPTNeoXForCausalLM vanilla(ModelConfig::from(tiny_config("none")));
    GPTNeoXForCausalLM gated(ModelConfig::from(tiny_config("gated", {std::string("model.sink.gate=") + gate})));
    copy_shared_parameters(vanilla, gated);
    torch::NoGradGuard no_grad;
    for (size_t l = 0; l < gated->gpt_neox->layers->size(); ++l) {
      const auto& g = gated->gpt_neox->layers->ptr<GPTNeoXLayerImpl>(l)->attention->gate;
      g->weight.fill_(0);
      g->bias.fill_(1e4);
    }
    auto ids = random_ids(2, 12, 60);
    EXPECT_TRUE(torch::allclose(gated->forward(ids), vanilla->forward(ids), 1e-6, 1e-6)) << gate;
  }
}

TEST(GatedAttention, ElementwiseGateRepeatingAHeadwiseOneIsThatOne) {
  ModelConfig headwise_config = ModelConfig::from(tiny_config("gated"));
  GPTNeoXForCausalLM headwise(headwise_config);
  GPTNeoXForCausalLM elementwise(ModelConfig::from(tiny_config("gated", {"model.sink.gate=elementwise"})));
  testing_support::randomize_sink_parameters(headwise);
  const int64_t D = headwise_config.head_dim();
  torch::NoGradGuard no_grad;
  auto params = elementwise->named_parameters();
  for (const auto& p : headwise->named_parameters()) {
    if (p.key().find(".attention.gate.") == std::string::npos) params[p.key()].copy_(p.value());
    else params[p.key()].copy_(p.value().repeat_interleave(D, 0));  // [H, C] -> [H * D, C]: head h's rows
  }
  EXPECT_EQ(output_gate_width(headwise_config), 4);
  auto ids = random_ids(2, 12, 60);
  auto a = headwise->forward(ids), b = elementwise->forward(ids);
  EXPECT_TRUE(torch::allclose(a, b, 1e-5, 1e-5)) << (a - b).abs().max();
  EXPECT_GT((a - GPTNeoXForCausalLM(headwise_config)->forward(ids)).abs().max().item<float>(), 1e-3);  // the gates matter
}

TEST(GatedAttention, GateStartsNearOneHalfAndLearns) {
  GPTNeoXForCausalLM model(ModelConfig::from(tiny_config("gated")));
  auto params = model->named_parameters();
  const auto bias = params["gpt_neox.layers.0.attention.gate.bias"], weight = params["gpt_neox.layers.0.attention.gate.weight"];
  EXPECT_EQ(bias.abs().max().item<float>(), 0.0f);  // sigmoid(0) = 0.5 plus the input's small-init spread
  EXPECT_GT(weight.std().item<float>(), 0.0f);
  auto ids = random_ids(2, 10, 60);
  torch::nn::functional::cross_entropy(model->forward(ids).narrow(1, 0, 9).reshape({-1, 64}), ids.narrow(1, 1, 9).reshape(-1))
      .backward();
  EXPECT_GT(weight.grad().abs().amax(1).min().item<float>(), 0.0f) << "a head's gate gets no gradient";
}

TEST(TokenSink, SinkRowsLiveInsideThePaddedVocabularyAndLearn) {
  Config config = tiny_config("token", {"model.sink.count=2"});
  ModelConfig mc = ModelConfig::from(config);
  EXPECT_EQ(mc.sink_token_id(0), 60);
  EXPECT_EQ(mc.sink_token_id(1), 61);
  EXPECT_EQ(count_parameters(mc).total, count_parameters(ModelConfig::from(tiny_config("none"))).total);
  GPTNeoXForCausalLM model(mc);
  auto text = random_ids(1, 8, 60);
  auto ids = torch::cat({torch::tensor({{60, 61}}, torch::kInt64), text}, 1);
  auto logits = model->forward(ids);
  // Loss only on text targets: predictions from the last sink onwards.
  torch::nn::functional::cross_entropy(logits[0].narrow(0, 1, 8), ids[0].narrow(0, 2, 8)).backward();
  auto grad = model->gpt_neox->embed_in->weight.grad();
  EXPECT_GT(grad[60].abs().sum().item<float>(), 0.0f);
  EXPECT_GT(grad[61].abs().sum().item<float>(), 0.0f);
  EXPECT_EQ(grad[63].abs().sum().item<float>(), 0.0f);  // an unused padding row
}

TEST(TokenSink, SinkCountMustFitInThePaddedVocabulary) {
  auto msg = testing_support::user_error_of(
      [] { ModelConfig::from(tiny_config("token", {"model.tokenizer_vocab_size=63", "model.sink.count=2"})); });
  EXPECT_NE(msg.find("exceeds model.vocab_size"), std::string::npos) << msg;
}

// Softpick from its definition, in float64: ReLU(e^s - 1) / (sum over visible keys of |e^s - 1| + 1e-6).
torch::Tensor softpick_by_definition(const torch::Tensor& scores) {
  auto s = scores.to(torch::kFloat64);
  auto visible = s.isneginf().logical_not();
  auto e = torch::where(visible, s.exp() - 1, torch::zeros_like(s));
  return e.clamp_min(0) / (e.abs().sum(-1, /*keepdim=*/true) + 1e-6);
}

TEST(Softpick, EqualsTheRectifiedSoftmaxOfItsDefinitionInEveryImplementation) {
  Qkv x = random_qkv();
  const ModelConfig c = ModelConfig::from(tiny_config("softpick"));
  const SinkColumn column = sink_column(c, {}, x.q);
  ASSERT_FALSE(column.softmax());
  auto expected = torch::matmul(softpick_by_definition(causal_scores(x)), x.v.to(torch::kFloat64));
  for (auto impl : {AttentionImpl::Fast, AttentionImpl::Reference}) {
    auto out = causal_attention(x.q, x.k, x.v, column, impl);
    EXPECT_TRUE(torch::allclose(out.to(torch::kFloat64), expected, 1e-5, 1e-6)) << (out - expected).abs().max();
  }
}

TEST(Softpick, LargeScoresStayFiniteAndNegativeRowsGiveNothing) {
  Qkv x = random_qkv();
  auto scores = causal_scores(x) * 40;  // e^s overflows float32 above 88
  auto got = softpick(scores);
  EXPECT_TRUE(torch::isfinite(got).all().item<bool>());
  EXPECT_TRUE(torch::allclose(got.to(torch::kFloat64), softpick_by_definition(scores), 1e-5, 1e-6));
  auto negative = torch::full({1, 4}, -2.0).masked_fill(torch::tensor({false, false, false, true}).view({1, 4}), -kInf);
  EXPECT_EQ(softpick(negative).abs().sum().item<float>(), 0.0f) << "every score below 0: no key gets anything";
  EXPECT_LT(softpick(scores).sum(-1).max().item<float>(), 1.0f + 1e-5f) << "rows sum to at most 1";
}

TEST(Softpick, ModelAttendsBySoftpickTrainsItAndHasNoSinkColumn) {
  GPTNeoXForCausalLM model(ModelConfig::from(tiny_config("softpick")));
  EXPECT_TRUE(model->sink_parameters().empty());
  auto ids = random_ids(2, 10, 60);
  auto logits = model->forward(ids);
  ASSERT_TRUE(torch::isfinite(logits).all().item<bool>());
  {  // the same weights under softmax (a vanilla model) predict otherwise: the mode changes the attention
    GPTNeoXForCausalLM vanilla(ModelConfig::from(tiny_config("none")));
    torch::NoGradGuard no_grad;
    const auto weights = model->named_parameters();
    for (auto& p : vanilla->named_parameters()) p.value().copy_(weights[p.key()]);
    EXPECT_GT((vanilla->forward(ids) - logits).abs().max().item<float>(), 1e-3f) << "softpick attends as softmax";
  }
  torch::nn::functional::cross_entropy(logits.narrow(1, 0, 9).reshape({-1, 64}), ids.narrow(1, 1, 9).reshape(-1)).backward();
  auto grad = model->gpt_neox->layers->ptr<GPTNeoXLayerImpl>(0)->attention->query_key_value->weight.grad();
  ASSERT_TRUE(grad.defined());
  EXPECT_GT(grad.abs().sum().item<float>(), 0.0f);
}

}  // namespace
}  // namespace sinklm
