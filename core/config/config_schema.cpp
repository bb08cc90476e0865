// The one list of configuration keys sinklm understands. Each module reads its section through
// sinklm::Config; adding a key here is what makes it valid in YAML files and in --set.
#include "core/config/config.h"

#include "core/error.h"

namespace sinklm {
namespace {

KeySpec integer(std::string key, int64_t value, double min, double max, std::string help) {
  return {std::move(key), ValueType::Int, std::to_string(value), std::move(help), min, max, {}};
}
KeySpec number(std::string key, std::string value, double min, double max, std::string help) {
  return {std::move(key), ValueType::Float, std::move(value), std::move(help), min, max, {}};
}
KeySpec boolean(std::string key, bool value, std::string help) {
  return {std::move(key), ValueType::Bool, value ? "true" : "false", std::move(help)};
}
KeySpec text(std::string key, std::string value, std::string help) {
  return {std::move(key), ValueType::String, std::move(value), std::move(help)};
}
// Its choices and help come from a library above core (provide_choices).
KeySpec provided_choice(std::string key) { return {std::move(key), ValueType::Choice, "", "", 0, 0, {}}; }
KeySpec choice(std::string key, std::vector<std::string> choices, std::string help) {
  std::string first = choices.front();
  return {std::move(key), ValueType::Choice, first, std::move(help), 0, 0, std::move(choices)};
}

std::vector<KeySpec> build_schema() {
  return {
      // model: a GPT-NeoX decoder (defaults are Pythia-160M)
      integer("model.vocab_size", -1, -1, 1 << 24,
              "embedding rows, the padded vocabulary; -1 = tokenizer_vocab_size + the sink tokens, rounded up to a "
              "multiple of 128"),
      integer("model.tokenizer_vocab_size", -1, -1, 1 << 24,
              "ids of the tokenizer; sink ids follow them; -1 = the run's tokenizer's size (sinklm train), else "
              "vocab_size - sink.count"),
      integer("model.hidden_size", 768, 8, 65536, "model width"),
      integer("model.num_layers", 12, 1, 1024, "decoder layers"),
      integer("model.num_heads", 12, 1, 1024, "attention heads; hidden_size must divide evenly"),
      integer("model.intermediate_size", 3072, 1, 1 << 20, "MLP width"),
      number("model.rotary_pct", "0.25", 0, 1, "fraction of each head's dims that get rotary embedding"),
      number("model.rotary_base", "10000", 1, 1e12, "rotary base (theta)"),
      integer("model.max_position_embeddings", 2048, 1, 1 << 24, "trained context length"),
      number("model.layer_norm_eps", "1e-5", 1e-12, 1, "LayerNorm epsilon"),
      boolean("model.parallel_residual", true, "x + attn(ln1(x)) + mlp(ln2(x)) instead of sequential"),
      integer("model.bos_token_id", -1, -1, 1 << 24,
              "beginning-of-text id (config.json); -1 = the tokenizer's (its end-of-text where it has none)"),
      integer("model.eos_token_id", -1, -1, 1 << 24,
              "end-of-text id (config.json; generation stops there); -1 = the tokenizer's"),
      integer("model.pad_token_id", -1, -1, 1 << 24,
              "padding id (config.json); -1 = the tokenizer's, none where it has none"),
      integer("model.init_seed", 1234, 0, 1e15, "seed for the GPT-NeoX initialisation"),
      choice("model.attention", {"fast", "reference"},
             "fast = sinklm's fused kernel on an AVX-512 CPU in float32, else scaled_dot_product_attention; "
             "reference = plain softmax(QK^T)V"),
      provided_choice("model.sink.mode"),  // model/sink.cpp: one row per mode
      integer("model.sink.count", 1, 1, 64, "number of learnable sink tokens (mode token)"),
      choice("model.sink.gate", {"headwise", "elementwise"},
             "mode gated: one gate per (token, head), W_g [hidden, H]; or one per output element, [hidden, H*D]"),
      choice("model.sink.kv_init", {"zero", "normal"},
             "mode kv: initial sink key and value; zero = starts as softmax1 (the zero sink), normal = the "
             "model's small normal init, as the q/k/v projection"),
      // data: token shards and the loader that reads them (data/shards/token_loader.h)
      text("data.tokenizer", "", "tokenizer.json, vocab.json (+ merges.txt), *.tiktoken or SentencePiece *.model"),
      text("data.shards", "", "directory written by `sinklm prepare shards` (or data.mixture)"),
      text("data.mixture", "",
           "several shard directories with weights, \"DIR=WEIGHT, DIR=WEIGHT\" (weights > 0, normalised): each "
           "sample drawn from one by the weights, deterministic from data.seed; instead of data.shards"),
      integer("data.seed", 1234, 0, 1e15, "seed of the training sample order (each epoch is reshuffled from it)"),
      integer("data.validation_batches", 8, 0, 1 << 20, "fixed validation batches (same samples on every run)"),
      // train: the pretraining loop (defaults follow the Pythia-160M recipe)
      integer("train.steps", 1000, 1, 1e12, "optimizer steps"),
      integer("train.seq_len", 2048, 2, 1 << 20, "positions per sample, sink tokens included"),
      integer("train.global_batch_tokens", 2097152, 1, 1e15,
              "tokens per optimizer step over all ranks (seq_len * samples); reached by gradient accumulation"),
      integer("train.micro_batch", 8, 1, 1 << 20, "samples per rank per forward/backward"),
      number("train.lr", "6e-4", 0, 10, "peak learning rate"),
      number("train.min_lr_ratio", "0.1", 0, 1, "cosine decay ends at lr * min_lr_ratio"),
      number("train.warmup_fraction", "0.01", 0, 1, "linear warmup over this fraction of the steps"),
      number("train.beta1", "0.9", 0, 0.999999, "AdamW beta1"),
      number("train.beta2", "0.95", 0, 0.999999, "AdamW beta2"),
      number("train.eps", "1e-8", 0, 1, "AdamW epsilon"),
      number("train.weight_decay", "0.1", 0, 10, "decoupled weight decay (not on LayerNorms, biases, sink logits)"),
      number("train.sink_lr_multiplier", "1", 0, 1e6,
             "learning rate of the sink parameters (sink_logit; sink_key, sink_value) as a multiple of train.lr; "
             "the sink token's embedding rows are rows of embed_in and take train.lr"),
      number("train.grad_clip", "1.0", 0, 1e9, "clip the global gradient norm to this (0 = off)"),
      choice("train.device", {"auto", "cpu", "cuda"}, "auto = the GPU of this rank's local rank if CUDA is there"),
      choice("train.precision", {"auto", "fp32", "bf16"}, "auto = bf16 autocast on CUDA, fp32 on CPU; bf16 = bf16 autocast on either"),
      choice("train.zero", {"0", "1"}, "1 = ZeRO stage 1: optimizer state sharded across ranks"),
      integer("train.trace_steps", 0, 0, 1e6,
              "LibTorch profiler over N steps after the first: <run>/trace.json and trace_top.txt (0 = off)"),
      boolean("train.activation_checkpointing", false,
              "keep only each layer's input for backward and recompute the layer (less memory, ~1/3 more compute)"),
      choice("train.communicator", {"auto", "mpi", "nccl"},
             "tensor collectives: auto = NCCL for CUDA tensors of several ranks, else MPI; nccl = NCCL even for one "
             "rank (a one-GPU check of the NCCL path)"),
      integer("train.bucket_mb", 25, 1, 1 << 16, "gradient all-reduce bucket size (MiB)"),
      integer("train.eval_every", 100, 0, 1e12, "validation loss every N steps (0 = only at the end)"),
      integer("train.checkpoint_every", 500, 0, 1e12, "checkpoint every N steps (0 = only at the end)"),
      number("train.checkpoint_minutes", "0", 0, 1e9,
             "also checkpoint when this many minutes of wall time passed since the last checkpoint (0 = off); "
             "SIGTERM or SIGUSR1 checkpoint at the next step and exit 75"),
      text("train.init_from", "",
           "start a fresh run from this checkpoint's weights (sinklm or Hugging Face GPT-NeoX, same architecture; "
           "a vanilla one into any sink mode) with a new optimizer and schedule; a resumed run ignores it"),
      text("train.eval_tasks", "",
           "zero-shot sets scored during training, spread over the ranks: comma-separated official set names "
           "(arc_easy, piqa, ...) or all; logged as zero_shot/<task>/<metric> (empty = off)"),
      integer("train.eval_tasks_every", 0, 0, 1e12, "score train.eval_tasks every N steps (0 = after the last step only)"),
      integer("train.eval_tasks_limit", 200, 1, 1e12, "the first N documents of each train.eval_tasks set"),
      integer("train.keep_checkpoints", 3, 1, 1 << 20, "keep the newest K complete checkpoints"),
      integer("train.sink_probe_every", 0, 0, 1e12,
              "attention-sink probe every N steps on fixed validation sequences, to metrics.jsonl (0 = off)"),
      integer("train.log_every", 1, 1, 1e12, "progress line and metrics.jsonl record every N steps"),
      boolean("train.tensorboard", true,
              "write every metrics.jsonl number as TensorBoard scalars to <run>/tensorboard/ (tensorboard --logdir)"),
      integer("train.threads", 0, 0, 1024, "CPU intra-op threads per rank (0 = cores / ranks on this node)"),
      choice("train.nan_policy", {"stop", "skip"}, "non-finite loss or gradient: stop, or skip the update"),
      integer("train.collective_timeout_s", 300, 1, 1e7, "a collective waiting longer aborts the job"),
      integer("train.profile_steps", 0, 0, 1e12,
              "time the phases of N steps after the first into <run>/profile.json (train/monitor/step_profile.h; 0 = off)"),
      number("train.peak_tflops", "0", 0, 1e6, "peak of one rank's device for MFU (0 = H100/H200 table on CUDA, measured on CPU)"),
      // train.fault: testing aids that make real failures happen on purpose (tests/train)
      integer("train.fault.step", -1, -1, 1e12, "inject train.fault.action at this step (-1 = never)"),
      integer("train.fault.rank", 0, 0, 1 << 20, "the rank the fault happens on"),
      choice("train.fault.action", {"kill", "kill_in_checkpoint", "hang", "nan", "sigusr1", "sigterm"},
             "SIGKILL at the step's start / halfway through its checkpoint, hang forever, a NaN loss, SIGUSR1 at the "
             "step's start, or SIGTERM at the step's start and again halfway through the checkpoint it causes"),
  };
}

std::vector<KeySpec>& schema_storage() {
  static std::vector<KeySpec> schema = build_schema();
  return schema;
}

}  // namespace

const std::vector<KeySpec>& config_schema() { return schema_storage(); }

void provide_choices(const std::string& key, const std::vector<std::pair<std::string, std::string>>& choices) {
  for (KeySpec& spec : schema_storage()) {
    if (spec.key != key) continue;
    SINKLM_ASSERT(spec.type == ValueType::Choice && !choices.empty(), key, ": not a choice key, or no choices");
    spec.choices.clear();
    spec.help.clear();
    for (const auto& [name, summary] : choices) {
      spec.choices.push_back(name);
      spec.help += (spec.help.empty() ? "" : "; ") + name + " = " + summary;
    }
    spec.default_value = spec.choices.front();
    return;
  }
  SINKLM_ASSERT(false, key, ": no such key in the schema (core/config/config_schema.cpp)");
}

}  // namespace sinklm
