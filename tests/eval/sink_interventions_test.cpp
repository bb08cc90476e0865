// The sink interventions of eval/sinks/sink_interventions.h against computations that reach the same numbers
// another way: masking a model's first tokens is evicting them (rotary positions are relative); masking a column is the
// same weights without the column (a vanilla model); substituting the sink token by itself changes nothing;
// the class losses average back to the overall one.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "eval/sinks/sink_interventions.h"
#include "model/sink.h"
#include "tests/model/model_test_support.h"

namespace sinklm {
namespace {

// Two segments of 24 ids with the model's sink prefix first.
std::vector<std::vector<int64_t>> segments_for(const ModelConfig& c) {
  const auto ids = testing_support::random_ids(2, 24 - sink_prefix_length(c), c.tokenizer_vocab_size);
  std::vector<std::vector<int64_t>> segments;
  for (int64_t s = 0; s < 2; ++s)
    segments.push_back(with_sink_prefix(c, {ids[s].data_ptr<int64_t>(), ids[s].data_ptr<int64_t>() + ids.size(1)}));
  return segments;
}

TEST(SinkInterventions, MaskingTheSinkTokensIsEvictingThemUnderRelativePositions) {
  // Hiding keys 0 .. S-1 from every later query computes the sequence without them: without rotary nothing
  // tells a token where it is, and rotary sees only distances, which the shift keeps. Hiding other keys, or
  // none, does not.
  for (const char* rotary : {"0", "0.5"}) {
    for (int64_t sinks : {1, 3}) {
      const ModelConfig c = ModelConfig::from(testing_support::tiny_config("token", {std::string("model.rotary_pct=") + rotary}));
      GPTNeoXForCausalLM model(c);
      const SinkInterventions r = intervene_on_sink(model, segments_for(c), sinks, 7);
      EXPECT_EQ(r.targets, 2 * 11);
      EXPECT_GT(std::abs(r.masked.all - r.intact.all), 1e-4) << "masking should change the loss";
      EXPECT_NEAR(r.masked.all, r.evicted.all, 1e-5 * r.evicted.all) << rotary << " " << sinks;
      if (sinks == 3) {
        const SinkInterventions one = intervene_on_sink(model, segments_for(c), 1, 7);
        EXPECT_GT(std::abs(one.masked.all - r.masked.all), 1e-4) << "hiding 1 or 3 keys should differ";
      }
    }
  }
}

TEST(SinkInterventions, MaskingAColumnIsTheModelWithoutIt) {
  for (const char* mode : {"softmax1", "logit", "kv"}) {
    const ModelConfig c = ModelConfig::from(testing_support::tiny_config(mode));
    GPTNeoXForCausalLM model(c);
    testing_support::randomize_sink_parameters(model);
    const ModelConfig vanilla_config = ModelConfig::from(testing_support::tiny_config("none"));
    GPTNeoXForCausalLM vanilla(vanilla_config);
    {
      torch::NoGradGuard no_grad;
      auto params = model->named_parameters();
      for (auto& item : vanilla->named_parameters()) item.value().copy_(params[item.key()]);
    }
    const auto segments = segments_for(c);
    const SinkInterventions with_column = intervene_on_sink(model, segments, 1, 7);
    const SinkInterventions without = intervene_on_sink(vanilla, segments, 1, 7);
    EXPECT_NEAR(with_column.masked.all, without.intact.all, 1e-5 * without.intact.all) << mode;
    EXPECT_GT(std::abs(with_column.intact.all - without.intact.all), 1e-4) << mode << ": the column should matter";
    EXPECT_TRUE(std::isnan(with_column.evicted.all) && std::isnan(with_column.substituted.all)) << mode;
  }
}

TEST(SinkInterventions, SubstitutingTheSinkTokenByItselfChangesNothing) {
  const ModelConfig c = ModelConfig::from(testing_support::tiny_config("token"));
  GPTNeoXForCausalLM model(c);
  const auto segments = segments_for(c);
  const int64_t sink_id = sink_prefix(c)[0];
  const SinkInterventions same = intervene_on_sink(model, segments, 1, sink_id);
  EXPECT_EQ(same.substituted.all, same.intact.all);
  const SinkInterventions other = intervene_on_sink(model, segments, 1, 7);
  EXPECT_GT(std::abs(other.substituted.all - other.intact.all), 1e-4);
}

TEST(SinkInterventions, ClassLossesAverageToTheOverallLoss) {
  const ModelConfig c = ModelConfig::from(testing_support::tiny_config("none"));
  GPTNeoXForCausalLM model(c);
  const auto segments = segments_for(c);
  std::vector<std::vector<bool>> trigger(2, std::vector<bool>(24, false));
  for (int64_t q = 0; q < 24; q += 3) trigger[0][q] = trigger[1][q + 1] = true;  // a third of the queries
  const SinkInterventions r = intervene_on_sink(model, segments, 4, 7, trigger);
  ASSERT_GT(r.trigger_targets, 0);
  ASSERT_LT(r.trigger_targets, r.targets);
  for (const InterventionLoss* loss : {&r.intact, &r.evicted, &r.masked, &r.substituted}) {
    const double mixed = (loss->trigger * r.trigger_targets + loss->other * (r.targets - r.trigger_targets)) / r.targets;
    EXPECT_NEAR(mixed, loss->all, 1e-12);
    EXPECT_NE(loss->trigger, loss->other);
  }
  const SinkInterventions unsplit = intervene_on_sink(model, segments, 4, 7);
  EXPECT_TRUE(std::isnan(unsplit.intact.trigger));
  EXPECT_EQ(unsplit.intact.all, r.intact.all);
}

}  // namespace
}  // namespace sinklm
