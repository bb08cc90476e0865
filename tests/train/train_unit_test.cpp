// Trainer building blocks against references: the flat AdamW against torch::optim::AdamW, the schedule's
// shape, weight-decay grouping, gradients landing in the flat buffer, the chunked projection + cross-entropy
// against the plain one, and batch arithmetic errors.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "../model/model_test_support.h"
#include "model/gpt_neox.h"
#include "train/adamw.h"
#include "train/distributed/cuda_versions.h"
#include "train/distributed/flat_parameters.h"
#include "train/linear_cross_entropy.h"
#include "model/kernels/softmax_cross_entropy.h"
#include "train/train_options.h"

namespace sinklm {
namespace {

TEST(CudaVersions, ADriverOlderThanTheRuntimesMajorIsNamedWithBoth) {
  EXPECT_EQ(cuda_version_text(12040), "12.4");
  EXPECT_EQ(nccl_version_text(22809), "2.28.9");
  EXPECT_EQ(nccl_version_text(2804), "2.8.4");  // before 2.9: 1000 * major + 100 * minor + patch
  const std::string why = driver_mismatch(CudaVersions{13000, 12040, "550.54.14", 0});
  for (const char* said : {"release 550.54.14", "supports CUDA up to 12.4", "runtime is 13.0", "driver >= 580",
                           "LibTorch for CUDA 12.x", "SINKLM_LIBTORCH"})
    EXPECT_NE(why.find(said), std::string::npos) << said << " in: " << why;
  EXPECT_EQ(driver_mismatch(CudaVersions{13000, 13020, "", 0}), "");
  EXPECT_EQ(driver_mismatch(CudaVersions{12060, 12020, "", 0}), "") << "minor versions are compatible";
  EXPECT_EQ(driver_mismatch(CudaVersions{13000, 0, "", 0}), "") << "no driver: a CPU machine, nothing to refuse";
  EXPECT_EQ(driver_mismatch(CudaVersions{0, 12040, "", 0}), "") << "a CPU-only build";
}

TEST(LearningRate, WarmupThenCosineToTheFloor) {
  const double peak = 6e-4;
  EXPECT_DOUBLE_EQ(learning_rate_at(0, 1000, 10, peak, 0.1), peak / 10);
  EXPECT_DOUBLE_EQ(learning_rate_at(9, 1000, 10, peak, 0.1), peak);
  EXPECT_DOUBLE_EQ(learning_rate_at(10, 1000, 10, peak, 0.1), peak);  // cosine starts at the peak
  EXPECT_NEAR(learning_rate_at(505, 1000, 10, peak, 0.1), (peak + 0.1 * peak) / 2, 1e-6 * peak);
  EXPECT_NEAR(learning_rate_at(1000, 1000, 10, peak, 0.1), 0.1 * peak, 1e-15);
  for (int64_t s = 11; s < 1000; ++s) EXPECT_LE(learning_rate_at(s, 1000, 10, peak, 0.1), learning_rate_at(s - 1, 1000, 10, peak, 0.1));
  EXPECT_DOUBLE_EQ(learning_rate_at(0, 10, 0, peak, 0.1), peak);  // no warmup
}

TEST(WeightDecay, NotOnNormsBiasesOrSinkLogits) {
  EXPECT_TRUE(takes_weight_decay("gpt_neox.layers.0.attention.query_key_value.weight"));
  EXPECT_TRUE(takes_weight_decay("gpt_neox.embed_in.weight"));
  EXPECT_TRUE(takes_weight_decay("embed_out.weight"));
  EXPECT_FALSE(takes_weight_decay("gpt_neox.layers.0.attention.query_key_value.bias"));
  EXPECT_FALSE(takes_weight_decay("gpt_neox.layers.3.input_layernorm.weight"));
  EXPECT_FALSE(takes_weight_decay("gpt_neox.final_layer_norm.weight"));
  // Sink logits: by their spec (model/sink.h), handed over with the tensor, not matched by name.
  GPTNeoXForCausalLM model(ModelConfig::from(testing_support::tiny_config("logit")));
  FlatParameters flat(*model, 1, model->sink_parameters());
  int64_t sink_logits = 0;
  for (const auto& slot : flat.slots())
    if (slot.name == "gpt_neox.layers.1.attention.sink_logit") {
      EXPECT_FALSE(slot.decay);
      ++sink_logits;
    }
  EXPECT_EQ(sink_logits, 1);
}

TEST(FlatParameters, ParametersAndGradientsAliasTheFlatBuffers) {
  GPTNeoXForCausalLM model(ModelConfig::from(testing_support::tiny_config("logit")));
  auto ids = testing_support::random_ids(2, 8, 60);
  auto expected_logits = model->forward(ids).detach();
  FlatParameters flat(*model, 7, model->sink_parameters());
  EXPECT_EQ(flat.padded_numel() % 7, 0);
  EXPECT_TRUE(torch::equal(model->forward(ids).detach(), expected_logits)) << "flattening changed the model";
  int64_t decayed = 0;
  for (const auto& slot : flat.slots()) {
    EXPECT_EQ(slot.param.data_ptr<float>(), flat.values().data_ptr<float>() + slot.offset) << slot.name;
    if (slot.decay) decayed += slot.numel;
  }
  EXPECT_EQ(flat.decay_mask().sum().item<double>(), decayed);
  EXPECT_EQ(flat.slots().front().name, "embed_out.weight");  // reverse registration order
  model->forward(ids).sum().backward();
  for (const auto& slot : flat.slots())
    EXPECT_EQ(slot.param.grad().data_ptr<float>(), flat.grads().data_ptr<float>() + slot.offset) << slot.name;
  EXPECT_GT(flat.grads().abs().sum().item<double>(), 0);
}

// train.sink_lr_multiplier scales the sink parameters' learning rate, and only theirs: Adam's first step moves
// every element with a non-zero gradient by lr * scale (m_hat / sqrt(v_hat) = sign(g)), so a sink key moves
// 30x as far as a LayerNorm bias (neither decays).
TEST(FlatParameters, SinkLearningRateMultiplierScalesOnlySinkParameters) {
  GPTNeoXForCausalLM model(ModelConfig::from(testing_support::tiny_config("kv")));
  FlatParameters flat(*model, 1, model->sink_parameters(), 30.0);
  int64_t sink_elements = 0;
  for (const auto& slot : flat.slots()) {
    const bool sink = slot.name.find(".attention.sink_") != std::string::npos;
    EXPECT_EQ(slot.lr_multiplier, sink ? 30.0 : 1.0) << slot.name;
    if (sink) sink_elements += slot.numel;
  }
  EXPECT_GT(sink_elements, 0);
  EXPECT_EQ((flat.lr_scale() == 30.0).sum().item<int64_t>(), sink_elements);
  auto ids = testing_support::random_ids(2, 8, 60);
  model->forward(ids).pow(2).mean().backward();
  const torch::Tensor before = flat.values().clone();
  FlatAdamW adam(flat.decay_mask(), flat.lr_scale(), {0.9, 0.95, 1e-12, 0.0});
  const double lr = 1e-4;
  adam.step(flat.values(), flat.grads(), lr);
  for (const auto& slot : flat.slots()) {
    const bool sink = slot.name.find(".attention.sink_") != std::string::npos;
    if (!sink && slot.name.find("input_layernorm.bias") == std::string::npos) continue;
    const torch::Tensor moved = (flat.values() - before).narrow(0, slot.offset, slot.numel).abs();
    const torch::Tensor moving = flat.grads().narrow(0, slot.offset, slot.numel).abs() > 1e-6;
    ASSERT_GT(moving.sum().item<int64_t>(), 0) << slot.name;
    EXPECT_NEAR(moved.masked_select(moving).mean().item<double>(), lr * (sink ? 30.0 : 1.0), 1e-3 * lr * 30.0)
        << slot.name;
  }
}

TEST(LinearCrossEntropy, MatchesProjectionThenCrossEntropyWithIgnoredRows) {
  torch::manual_seed(5);
  const int64_t N = 700, C = 16, V = 40000;  // more rows than one chunk of a 40000-wide vocabulary
  auto hidden = torch::randn({N, C}), weight = torch::randn({V, C}) * 0.1;
  auto target = torch::randint(0, V, {N}, torch::kInt64);
  target.narrow(0, 0, 3).fill_(-100);  // sink positions
  target.narrow(0, 400, 2).fill_(-100);
  auto h1 = hidden.clone().requires_grad_(true), w1 = weight.clone().requires_grad_(true);
  namespace F = torch::nn::functional;
  auto expected = F::cross_entropy(torch::mm(h1, w1.t()), target,
                                   F::CrossEntropyFuncOptions().ignore_index(-100).reduction(torch::kSum));
  (expected * 0.25).backward();
  auto h2 = hidden.clone().requires_grad_(true), w2 = weight.clone().requires_grad_(true);
  auto loss = linear_cross_entropy_sum(h2, w2, target, -100);
  (loss * 0.25).backward();
  EXPECT_NEAR(loss.item<double>(), expected.item<double>(), 1e-6 * expected.item<double>());
  EXPECT_TRUE(torch::allclose(h2.grad(), h1.grad(), 1e-5, 1e-7)) << (h2.grad() - h1.grad()).abs().max();
  EXPECT_TRUE(torch::allclose(w2.grad(), w1.grad(), 1e-5, 1e-7)) << (w2.grad() - w1.grad()).abs().max();
  EXPECT_EQ(h2.grad().narrow(0, 400, 2).abs().sum().item<double>(), 0.0) << "ignored rows get no gradient";
  torch::NoGradGuard no_grad;  // validation: the loss alone
  EXPECT_NEAR(linear_cross_entropy_sum(hidden, weight, target, -100).item<double>(), expected.item<double>(),
              1e-6 * expected.item<double>());
}

TEST(SoftmaxCrossEntropy, KernelMatchesLogSoftmaxOnRaggedRowsAndThreads) {
  if (!softmax_cross_entropy_applies(torch::zeros({1, 16}))) GTEST_SKIP() << "the kernel needs AVX-512";
  torch::manual_seed(6);
  const int64_t rows = 37, V = 1001;  // V not a multiple of 16: the masked tail
  auto logits = torch::randn({rows, V}) * 4;
  auto target = torch::randint(0, V, {rows}, torch::kInt64);
  auto keep = torch::ones({rows});
  keep[5] = 0;
  auto log_probs = torch::log_softmax(logits, 1);
  const double expected = -(log_probs.gather(1, target.unsqueeze(1)).squeeze(1) * keep).sum().item<double>();
  auto expected_grad = log_probs.exp().scatter_add(1, target.unsqueeze(1), -keep.unsqueeze(1));
  std::vector<torch::Tensor> grads;
  const int threads_before = at::get_num_threads();
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    auto g = logits.clone();
    EXPECT_NEAR(softmax_cross_entropy(g, target, keep, true), expected, 1e-6 * expected);
    EXPECT_TRUE(torch::allclose(g, expected_grad, 1e-5, 1e-7)) << (g - expected_grad).abs().max();
    grads.push_back(g);
  }
  at::set_num_threads(threads_before);
  EXPECT_TRUE(torch::equal(grads[0], grads[1])) << "same bits on 1 and 2 threads";
  auto untouched = logits.clone();
  EXPECT_NEAR(softmax_cross_entropy(untouched, target, keep, false), expected, 1e-6 * expected);
  EXPECT_TRUE(torch::equal(untouched, logits)) << "no gradient wanted: logits left as they were";
}

TEST(FlatAdamW, MatchesTorchAdamWWithDecayGroups) {
  torch::manual_seed(4);
  auto decayed = torch::randn({5}), plain = torch::randn({3});
  std::vector<torch::Tensor> reference = {decayed.clone().requires_grad_(true), plain.clone().requires_grad_(true)};
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<torch::Tensor>{reference[0]},
                      std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(1e-2).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.1)));
  groups.emplace_back(std::vector<torch::Tensor>{reference[1]},
                      std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(1e-2).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.0)));
  torch::optim::AdamW torch_adamw(std::move(groups));

  auto params = torch::cat({decayed, plain});
  auto mask = torch::cat({torch::ones({5}), torch::zeros({3})});
  FlatAdamW ours(mask, torch::ones_like(mask), {0.9, 0.95, 1e-8, 0.1});
  for (int step = 0; step < 5; ++step) {
    auto grads = torch::randn({8});
    reference[0].mutable_grad() = grads.narrow(0, 0, 5).clone();
    reference[1].mutable_grad() = grads.narrow(0, 5, 3).clone();
    torch_adamw.step();
    ours.step(params, grads, 1e-2);
  }
  auto expected = torch::cat({reference[0].detach(), reference[1].detach()});
  EXPECT_TRUE(torch::allclose(params, expected, 1e-6, 1e-7)) << (params - expected).abs().max();
  EXPECT_EQ(ours.steps_taken(), 5);
}

TEST(TrainOptions, BatchArithmeticErrorsNameTheKeys) {
  Config c;
  c.apply_overrides({"data.shards=/x", "train.seq_len=64", "train.global_batch_tokens=1000"});
  auto msg = testing_support::user_error_of([&] { TrainOptions::from(c, 1); });
  EXPECT_NE(msg.find("train.global_batch_tokens (1000) must be a multiple of train.seq_len (64)"), std::string::npos) << msg;
  c.apply_overrides({"train.global_batch_tokens=1024", "train.micro_batch=4"});
  msg = testing_support::user_error_of([&] { TrainOptions::from(c, 3); });
  EXPECT_NE(msg.find("must be a multiple of train.micro_batch (4) x ranks (3)"), std::string::npos) << msg;
  TrainOptions ok = TrainOptions::from(c, 2);
  EXPECT_EQ(ok.global_batch_samples, 16);
  EXPECT_EQ(ok.accumulation, 2);
  Config no_data;
  msg = testing_support::user_error_of([&] { TrainOptions::from(no_data, 1); });
  EXPECT_NE(msg.find("data.shards is not set"), std::string::npos) << msg;
}

}  // namespace
}  // namespace sinklm
