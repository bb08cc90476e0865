#include "train/trainer.h"

#include <signal.h>
#include <unistd.h>

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <thread>

#include "core/files/atomic_dir.h"
#include "core/error.h"
#include "model/autocast_guard.h"
#include "model/io/checkpoint.h"
#include "model/io/init_from_checkpoint.h"
#include "train/distributed/cuda_versions.h"
#include "train/run_vocabulary.h"
#include "model/analysis/kernel_trace.h"
#include "train/linear_cross_entropy.h"
#include "train/monitor/memory_report.h"
#include "train/monitor/sink_probe.h"
#include "train/monitor/tensorboard_events.h"
#include "train/stop_signal.h"
#include "train/training_checkpoint.h"

namespace fs = std::filesystem;

namespace sinklm {
namespace {

constexpr int64_t kIgnoreTarget = -100;

torch::Device pick_device(const TrainOptions& o, const DistributedContext& context) {
  const bool cuda = torch::cuda::is_available();
  if (!cuda && o.device != "cpu") {  // a driver too old for LibTorch's runtime looks like no GPU: say which
    const std::string mismatch = driver_mismatch(cuda_versions());
    if (o.device == "cuda") fail("train.device is cuda but no CUDA device is usable", mismatch.empty() ? "" : ": " + mismatch);
    if (!mismatch.empty() && context.is_root()) std::cerr << "sinklm train: training on the CPU: " << mismatch << "\n";
  }
  if (o.device == "cpu" || !cuda) return torch::kCPU;
  const int count = static_cast<int>(torch::cuda::device_count());
  if (context.local_size() > count)
    fail(context.local_size(), " ranks on this node share ", count, " GPU(s), but NCCL needs one GPU per rank; start at most ",
         count, " ranks per node (mpirun -np / --map-by ppr:", count, ":node), or set train.device=cpu");
  const torch::Device device(torch::kCUDA, static_cast<c10::DeviceIndex>(context.local_rank() % count));
  // cudaSetDevice before anything touches CUDA: otherwise every rank's stray "current device" work (library
  // handles, synchronize()) lands on GPU 0 and costs a context there per rank.
  c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->setDevice(device);
  return device;
}

// The model.* keys must match between a resumed run's config and its checkpoint.
void check_same_model(const Config& now, const Config& saved, const std::string& checkpoint) {
  for (const auto& spec : config_schema())
    if (spec.key.rfind("model.", 0) == 0 && spec.key != "model.attention" && now.text(spec.key) != saved.text(spec.key))
      fail(checkpoint, ": resuming with ", spec.key, " = ", now.text(spec.key), " but the checkpoint has ",
           saved.text(spec.key), "; resume with the run's original config");
}

}  // namespace

Trainer::Trainer(Config config, std::string run_dir, bool resume, const DistributedContext& context)
    : tokenizer_files_(run_tokenizer_files(config)),
      config_(with_run_vocabulary(std::move(config), tokenizer_files_)),  // sizes and special ids from the tokenizer
      run_dir_(std::move(run_dir)),
      options_(TrainOptions::from(config_, context.world_size())),
      model_config_(ModelConfig::from(config_)),
      device_(pick_device(options_, context)),
      faults_(options_, context.rank()) {
  // auto: bf16 on CUDA; on the CPU only when asked (its bf16 matmuls need AVX512-BF16 or AMX to pay).
  bf16_ = options_.precision == "bf16" || (device_.is_cuda() && options_.precision == "auto");
  if (options_.seq_len > model_config_.max_position_embeddings)
    fail(config_.source(), ": train.seq_len (", options_.seq_len, ") exceeds model.max_position_embeddings (",
         model_config_.max_position_embeddings, ")");
  int threads = options_.threads > 0 ? options_.threads
                                     : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / context.local_size());
  torch::set_num_threads(threads);

  model_ = GPTNeoXForCausalLM(model_config_);
  std::optional<std::string> checkpoint = resume ? newest_complete_checkpoint(run_dir_) : std::nullopt;
  const std::string checkpoints = run_dir_ + "/checkpoints";
  if (!resume && fs::is_directory(checkpoints) && !fs::is_empty(checkpoints))
    fail(run_dir_, ": already holds checkpoints of a run; pass --resume to continue it, or choose another --out");
  if (checkpoint) {
    check_same_model(config_, load_checkpoint_config(*checkpoint), *checkpoint);
    load_model_tensors(*checkpoint, model_);
  } else if (!options_.init_from.empty()) {
    init_from_note_ = "initialised from " + options_.init_from + ": " +
                      describe(init_from_checkpoint(options_.init_from, config_, model_));
  }
  model_->to(device_);
  model_->set_activation_checkpointing(options_.activation_checkpointing);
  flat_ = std::make_unique<FlatParameters>(*model_, context.world_size(), model_->sink_parameters(),
                                           options_.sink_lr_multiplier);
  for (const auto& slot : flat_->slots()) flat_numel_ += slot.numel;
  communicator_ = make_communicator(context, device_, options_.collective_timeout_s, options_.communicator);
  reduction_ = make_gradient_reduction(*flat_, *communicator_, options_.zero, options_.bucket_bytes, options_.adamw);

  open_loaders(context);
  // Targets are the next tokens; a target that is a sink id (positions 1..k-1) is never predicted.
  targets_per_sample_ = options_.seq_len - std::max<int64_t>(1, sink_prefix_length(model_config_));
  throughput_ = std::make_unique<ThroughputMeter>(model_config_, options_, device_, context.world_size());
  sink_probe_ = SinkProbe::from_config(config_, model_config_, context.is_root());

  if (checkpoint) restore(*checkpoint);
  profile_ = std::make_unique<StepProfile>(options_.profile_steps, first_step_, options_.steps, device_);
  if (context.is_root()) {
    open_run_directory();
    std::cerr << "sinklm train: " << context.world_size() << " rank(s) on " << device_ << (bf16_ ? " (bf16 autocast)" : " (fp32)")
              << ", " << count_parameters(model_config_).total << " parameters, " << options_.global_batch_samples
              << " x " << options_.seq_len << " tokens per step (" << options_.accumulation << " micro-steps of "
              << options_.micro_batch << " per rank), " << (reduction_->sharded() ? "ZeRO-1 sharded" : "replicated")
              << " optimizer" << (checkpoint ? ", resumed from " + *checkpoint : std::string()) << "\n";
    if (!init_from_note_.empty()) std::cerr << "sinklm train: " << init_from_note_ << "\n";
    if (bf16_ && device_.is_cpu())
      std::cerr << "sinklm train: bf16 on the CPU: projections and the LM head in bf16 with fp32 accumulation; "
                   "attention in the fused fp32 kernel on a widened q/k/v (ATen where the sink mode has no fused path)\n";
    const int64_t optimizer_numel = reduction_->sharded() ? flat_->padded_numel() / context.world_size() : flat_->padded_numel();
    std::cerr << "sinklm train: memory per rank: "
              << describe(plan_memory(model_config_, options_, flat_->padded_numel(), optimizer_numel, bf16_), options_)
              << "\n";
  }
}

Trainer::~Trainer() = default;

void Trainer::open_loaders(const DistributedContext& context) {
  LoaderOptions data;
  data.seq_len = options_.seq_len;
  data.global_batch = options_.global_batch_samples;
  data.rank = context.rank();
  data.world_size = context.world_size();
  data.seed = options_.data_seed;
  for (int64_t id : sink_prefix(model_config_)) data.sink_ids.push_back(static_cast<uint32_t>(id));
  loader_ = std::make_unique<MixtureLoader>(options_.sources, Split::Train, data);
  if (options_.validation_batches > 0) {
    // Validation batches are global batches in file order (of each source, drawn by the mixture's weights):
    // the same samples whatever the number of ranks.
    data.shuffle = false;
    validation_loader_ = std::make_unique<MixtureLoader>(options_.sources, Split::Validation, data);
    validation_start_ = validation_loader_->cursor();
  }
}

void Trainer::open_run_directory() {
  fs::create_directories(run_dir_);
  write_file_durable(run_dir_ + "/config.yaml", config_.to_yaml());
  // metrics.jsonl tells one history: records past the resumed step belong to the lost future.
  std::vector<std::string> kept;
  std::ifstream previous(run_dir_ + "/metrics.jsonl");
  for (std::string line; std::getline(previous, line);) {
    auto record = nlohmann::json::parse(line, nullptr, false);
    if (!record.is_discarded() && record.value("step", INT64_MAX) <= first_step_) kept.push_back(line);
  }
  metrics_.open(run_dir_ + "/metrics.jsonl", std::ios::trunc);
  for (const auto& line : kept) metrics_ << line << "\n";
  metrics_.flush();
  if (options_.tensorboard) tensorboard_ = std::make_unique<TensorBoardEvents>(run_dir_ + "/tensorboard", first_step_);
}

void Trainer::restore(const std::string& checkpoint_dir) {
  nlohmann::json state = read_trainer_state(checkpoint_dir);
  if (state["flat_numel"].get<int64_t>() != flat_numel_)
    fail(checkpoint_dir, "/trainer_state.json: flat_numel ", state["flat_numel"].dump(), " but this model has ", flat_numel_);
  reduction_->restore(read_optimizer_state(checkpoint_dir, flat_numel_), state["adam_steps"].get<int64_t>());
  first_step_ = state["step"].get<int64_t>();
  const nlohmann::json& cursor = state["loader"];
  if (cursor.contains("global_batch") && cursor["global_batch"] != options_.global_batch_samples)
    fail(checkpoint_dir, ": the checkpoint's global batch is ", cursor["global_batch"].dump(), " samples but the config gives ",
         options_.global_batch_samples, "; resume with the same train.global_batch_tokens and train.seq_len");
  loader_->restore(cursor, checkpoint_dir + "/trainer_state.json");
}

// What the loss is computed from: the final hidden states [micro, L-1, C] (fp32; the LM head and the loss
// fused in linear_cross_entropy_sum) or, under bf16 autocast, the logits [micro, L-1, V] bf16.
torch::Tensor Trainer::loss_features(const torch::Tensor& input) {
  if (!bf16_) return model_->hidden_states(input);
  AutocastGuard autocast(device_);
  return model_->forward(input);
}

// Summed NLL of `target` [micro, n] (kIgnoreTarget skipped) from loss_features [micro, n, *].
torch::Tensor Trainer::summed_loss(const torch::Tensor& features, const torch::Tensor& target) const {
  if (!bf16_)
    return linear_cross_entropy_sum(features.reshape({-1, features.size(-1)}), model_->embed_out->weight,
                                    target.reshape(-1), kIgnoreTarget);
  namespace F = torch::nn::functional;
  return F::cross_entropy(features.to(torch::kFloat32).reshape({-1, features.size(-1)}), target.reshape(-1),
                          F::CrossEntropyFuncOptions().ignore_index(kIgnoreTarget).reduction(torch::kSum));
}

// The next-token targets of [micro, L] rows: [micro, L-1], a target that is a sink id ignored.
torch::Tensor Trainer::targets(const torch::Tensor& rows) const {
  auto target = rows.narrow(1, 1, options_.seq_len - 1).clone();
  const int64_t sinks = sink_prefix_length(model_config_);
  if (sinks > 1) target.narrow(1, 0, sinks - 1).fill_(kIgnoreTarget);
  return target;
}

torch::Tensor Trainer::micro_batch_loss(const torch::Tensor& rows) {
  return summed_loss(loss_features(rows.narrow(1, 0, options_.seq_len - 1)), targets(rows));
}

Trainer::StepResult Trainer::train_step(int64_t step) {
  faults_.at_step_start(step + 1);
  profile_->begin_step(step);
  std::vector<uint32_t> batch = loader_->next_batch();
  auto ids = batch_tensor(batch);  // [accumulation * micro_batch, seq_len]
  profile_->lap(StepPhase::Data);
  // Every micro-batch loss is divided by the global target count, so summing gradients over micro-steps and
  // ranks yields exactly the mean gradient of the global batch, whatever the number of ranks.
  const double global_targets = static_cast<double>(options_.global_batch_samples * targets_per_sample_);
  torch::Tensor summed_loss = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(device_));
  for (int64_t m = 0; m < options_.accumulation; ++m) {
    reduction_->begin_backward(m == options_.accumulation - 1);
    auto loss = micro_batch_loss(ids.narrow(0, m * options_.micro_batch, options_.micro_batch));
    profile_->lap(StepPhase::Forward);
    (loss / global_targets).backward();
    summed_loss += loss.detach();  // stays on the device: one host sync per step, not per micro-step
    profile_->lap(StepPhase::Backward);
  }
  reduction_->synchronize();
  profile_->lap(StepPhase::AllReduce);
  double loss_sum = summed_loss.item<double>();
  if (faults_.poisons(step + 1)) {
    loss_sum = std::nan("");
    flat_->grads().fill_(std::nan(""));
  }
  // The step's one host collective also carries what each rank knows of a stop: a signal it received, a
  // wall-time checkpoint it finds due. Every rank then takes the same decision at the same step.
  std::vector<double> sums = {loss_sum};
  const StopVotes votes = stop_votes();
  sums.insert(sums.end(), votes.begin(), votes.end());
  communicator_->allreduce_sum_host(sums, "loss");
  profile_->lap(StepPhase::HostSync);
  StepResult r;
  r.grad_norm = reduction_->global_norm();
  r.loss = sums[0] / global_targets;
  r.stop = agreed_stop({sums[1], sums[2], sums[3]});
  r.lr = learning_rate_at(step, options_.steps, options_.warmup_steps, options_.lr, options_.min_lr_ratio);
  torch::NoGradGuard no_grad;
  if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm)) {
    if (!options_.skip_nonfinite)
      fail("non-finite loss (", r.loss, ") or gradient norm (", r.grad_norm, ") at step ", step + 1,
           "; the last checkpoint is untouched. Set train.nan_policy=skip to skip such batches");
    std::cerr << "sinklm train: step " << step + 1 << ": non-finite loss or gradient, update skipped\n";
    reduction_->discard();
    r.skipped = true;
  } else {
    reduction_->step(r.grad_norm, options_.grad_clip, r.lr);
  }
  profile_->lap(StepPhase::Optimizer);
  return r;
}

// This rank's vote on stopping: [SIGTERM received, SIGUSR1 received, train.checkpoint_minutes elapsed].
Trainer::StopVotes Trainer::stop_votes() const {
  const int signal = received_stop_signal();
  const double minutes = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_checkpoint_time_).count() / 60;
  return {signal == SIGTERM ? 1.0 : 0.0, signal == SIGUSR1 ? 1.0 : 0.0,
          options_.checkpoint_minutes > 0 && minutes >= options_.checkpoint_minutes ? 1.0 : 0.0};
}

// The votes summed over ranks: a signal on any rank stops every rank (SIGTERM named first when both came).
Trainer::Stop Trainer::agreed_stop(const StopVotes& summed) {
  Stop stop;
  if (summed[0] > 0) stop.signal = SIGTERM;
  else if (summed[1] > 0) stop.signal = SIGUSR1;
  stop.checkpoint_due = summed[2] > 0;
  return stop;
}

// This rank's share of a global batch as [rows, seq_len] int64 on the training device.
torch::Tensor Trainer::batch_tensor(std::vector<uint32_t>& batch) const {
  const int64_t rows = static_cast<int64_t>(batch.size()) / options_.seq_len;
  auto ids = torch::from_blob(batch.data(), {rows, options_.seq_len}, torch::kInt32).to(torch::kInt64);
  if (!device_.is_cuda()) return ids;
  // Pinned staging: the copy is a DMA queued on the compute stream (the caching host allocator keeps the
  // pinned block until it completes), not a synchronous pageable copy.
  return ids.pin_memory().to(device_, /*non_blocking=*/true);
}

// The column of targets() whose text context is outside 1 .. L-2 tokens: a sink token model's first text
// target (predicted from its sinks alone), a model without sink tokens' last (a context of L-1 text tokens,
// which no sink token model has). Without it every mode scores the same context lengths.
int64_t Trainer::unmatched_target_column() const {
  const int64_t sinks = sink_prefix_length(model_config_);
  return sinks > 0 ? sinks - 1 : options_.seq_len - 2;
}

ValidationLoss Trainer::validation_loss() {
  if (!validation_loader_) return {};
  torch::NoGradGuard no_grad;
  validation_loader_->restore(validation_start_, "validation");
  const int64_t u = unmatched_target_column();
  std::vector<double> sums = {0, 0, 0};  // NLL of the matched targets, of the unmatched ones, samples
  for (int64_t b = 0; b < options_.validation_batches; ++b) {
    std::vector<uint32_t> batch = validation_loader_->next_batch();
    auto ids = batch_tensor(batch);
    for (int64_t m = 0; m < options_.accumulation; ++m) {
      auto rows = ids.narrow(0, m * options_.micro_batch, options_.micro_batch);
      auto features = loss_features(rows.narrow(1, 0, options_.seq_len - 1));
      auto target = targets(rows), matched = target.clone();
      matched.select(1, u).fill_(kIgnoreTarget);
      sums[0] += summed_loss(features, matched).item<double>();
      sums[1] += summed_loss(features.narrow(1, u, 1), target.narrow(1, u, 1)).item<double>();
    }
    sums[2] += static_cast<double>(ids.size(0));
  }
  communicator_->allreduce_sum_host(sums, "validation loss");
  const double matched = targets_per_sample_ > 1 ? sums[0] / (sums[2] * (targets_per_sample_ - 1)) : std::nan("");
  return {(sums[0] + sums[1]) / (sums[2] * targets_per_sample_), matched};
}

// All ranks write into one staging directory (train/training_checkpoint.h); rank 0 commits it once every
// rank's files are durable.
void Trainer::save_checkpoint(int64_t steps_done) {
  const std::string dir = checkpoint_dir_for_step(run_dir_, steps_done);
  const std::string staging_suffix = ".partial";
  std::unique_ptr<CheckpointWriter> writer;
  if (communicator_->is_root()) writer = std::make_unique<CheckpointWriter>(dir, staging_suffix);
  communicator_->barrier("checkpoint staging");
  reduction_->write_optimizer_state(dir + staging_suffix);
  faults_.in_checkpoint(steps_done);
  communicator_->barrier("checkpoint files");
  if (communicator_->is_root()) {
    writer->add_model(config_, model_);
    nlohmann::json state = {{"format", "sinklm-train-state"},
                            {"version", 1},
                            {"step", steps_done},
                            {"adam_steps", reduction_->optimizer().steps_taken()},
                            {"world_size", communicator_->world_size()},
                            {"zero", reduction_->sharded()},
                            {"flat_numel", flat_numel_},
                            {"loader", loader_->cursor()}};
    writer->add_file("trainer_state.json",
                     [&](const std::string& path) { write_file_durable(path, state.dump(2) + "\n"); });
    if (!checkpoint_tokenizer_)  // once per run, on the rank that writes
      checkpoint_tokenizer_ = checkpoint_tokenizer(tokenizer_files_, config_, model_config_, HfView::Optional);
    add_tokenizer_files(*writer, *checkpoint_tokenizer_);
    for (const auto& file : reduction_->optimizer_files()) writer->adopt_file(file);
    writer->commit();
    prune_checkpoints(run_dir_, options_.keep_checkpoints);
  }
  communicator_->barrier("checkpoint commit");
}

void Trainer::log(const nlohmann::json& record) {
  if (!communicator_->is_root()) return;
  metrics_ << record.dump() << "\n";
  metrics_.flush();
  if (tensorboard_) tensorboard_->add_scalars(record);
}

void Trainer::evaluate_tasks(int64_t done) {
  torch::NoGradGuard no_grad;
  const nlohmann::json scores =
      evaluation_.score(model_, communicator_->rank(), communicator_->world_size(),
                        [&](std::vector<double>& values) { communicator_->allreduce_sum_host(values, "zero-shot scores"); });
  log({{"step", done}, {"zero_shot", scores}});
  if (!communicator_->is_root()) return;
  std::cerr << (::isatty(STDERR_FILENO) ? "\n" : "") << "step " << done << " zero-shot:";
  for (const auto& [name, value] : scores.items())
    if (name.size() < 2 || name.compare(name.size() - 2, 2, "/n") != 0) std::cerr << " " << name << " " << value.dump();
  std::cerr << "\n";
}

void Trainer::report_profile() {
  nlohmann::json report = profile_->report(*communicator_, throughput_->tokens_per_step());
  if (!communicator_->is_root()) return;
  write_file_durable(run_dir_ + "/profile.json", report.dump(2) + "\n");
  std::cerr << (::isatty(STDERR_FILENO) ? "\n" : "") << "step profile (" << report["steps"] << " steps from step "
            << report["first_step"] << ", " << report["ranks"] << " rank(s)), written to " << run_dir_
            << "/profile.json:\n" << profile_table(report);
}

void Trainer::report_progress(int64_t done, const StepResult& r, TrainSummary& summary) {
  const auto w = throughput_->take_window();
  const double tokens_per_step = throughput_->tokens_per_step();
  nlohmann::json record = {{"step", done}, {"loss", r.loss}, {"lr", r.lr}, {"grad_norm", r.grad_norm},
                           {"skipped", r.skipped}, {"tokens", done * tokens_per_step},
                           {"tokens_per_s", w.tokens_per_s}, {"mfu", w.mfu}};
  if (loader_->sources().size() > 1) {  // a mixture: text tokens drawn from each source so far
    const std::vector<uint64_t> drawn = loader_->tokens_drawn();
    for (size_t i = 0; i < drawn.size(); ++i) record["source_tokens"][loader_->sources()[i].name] = drawn[i];
  }
  log(record);
  summary.tokens_per_second = w.tokens_per_s;
  if (!communicator_->is_root()) return;
  const bool tty = ::isatty(STDERR_FILENO);
  char line[256];
  std::snprintf(line, sizeof line, "step %lld/%lld | loss %.4f | lr %.2e | %.0f tok/s | MFU %.1f%% | ETA %s",
                static_cast<long long>(done), static_cast<long long>(options_.steps), r.loss, r.lr, w.tokens_per_s,
                100 * w.mfu, duration_text(w.seconds_per_token * tokens_per_step * (options_.steps - done)).c_str());
  std::cerr << (tty ? "\r" : "") << line << (tty ? "   " : "\n") << std::flush;
}

// A stop signal that arrived while the run was starting (loading, opening shards) ends it before its first
// step: there is nothing new to save and the newest checkpoint stays the place to resume from.
bool Trainer::stopped_during_start_up(TrainSummary& summary) {
  const StopVotes own = stop_votes();
  std::vector<double> summed = {own[0], own[1], 0.0};
  communicator_->allreduce_sum_host(summed, "start-up stop signals");
  const int signal = agreed_stop({summed[0], summed[1], summed[2]}).signal;
  if (signal == 0) return false;
  summary.stopped_by = stop_signal_name(signal);
  if (communicator_->is_root())
    std::cerr << "sinklm train: " << summary.stopped_by << " during start-up, before step " << first_step_ + 1
              << "; nothing new to save, exiting with " << kPreemptedExitCode << " (resume with --resume)\n";
  return true;
}

TrainSummary Trainer::run() {
  TrainSummary summary;
  summary.steps = first_step_;
  summary.validation = {};
  const bool tty = ::isatty(STDERR_FILENO);
  auto run_start = std::chrono::steady_clock::now();
  last_checkpoint_time_ = run_start;
  if (stopped_during_start_up(summary)) return summary;
  if (sink_probe_ && first_step_ == 0) log(sink_probe_->measure(model_, 0));
  std::optional<KernelTrace> trace;
  if (options_.trace_steps > 0 && communicator_->is_root())
    trace.emplace(options_.trace_steps, first_step_, options_.steps, run_dir_, device_);
  for (int64_t step = first_step_; step < options_.steps; ++step) {
    if (trace) trace->before_step(step);
    auto start = std::chrono::steady_clock::now();
    StepResult r = train_step(step);
    throughput_->add_step(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (trace) trace->after_step(step);  // writing the trace is not the step's time
    if (step == first_step_ && communicator_->is_root())
      std::cerr << "sinklm train: memory measured after the first step: " << measured_peak_memory(device_) << "\n";
    const int64_t done = step + 1;
    const bool last = done == options_.steps;
    summary.steps = done;
    summary.last_loss = r.loss;
    if (done % options_.log_every == 0 || last) report_progress(done, r, summary);
    if (profile_->window_complete(step)) report_profile();
    if (sink_probe_ && (sink_probe_->due(done) || last)) log(sink_probe_->measure(model_, done));
    if ((options_.eval_every > 0 && done % options_.eval_every == 0) || last) {
      summary.validation = validation_loss();
      if (!std::isnan(summary.validation.all)) {
        log({{"step", done}, {"val_loss", summary.validation.all}, {"val_loss_matched", summary.validation.matched}});
        if (communicator_->is_root())
          std::cerr << (tty ? "\n" : "") << "step " << done << " validation loss " << summary.validation.all
                    << " (matched context: " << summary.validation.matched << ")\n";
      }
    }
    if (evaluation_.score && ((evaluation_.every > 0 && done % evaluation_.every == 0) || last)) evaluate_tasks(done);
    if ((options_.checkpoint_every > 0 && done % options_.checkpoint_every == 0) || last || r.stop.signal ||
        r.stop.checkpoint_due) {
      if (!last && (r.stop.signal || r.stop.checkpoint_due) && communicator_->is_root())
        std::cerr << (tty ? "\n" : "") << "sinklm train: step " << done << ": checkpoint "
                  << (r.stop.signal ? std::string("on ") + stop_signal_name(r.stop.signal)
                                    : "by wall time (train.checkpoint_minutes)") << "\n";
      save_checkpoint(done);
      last_checkpoint_time_ = std::chrono::steady_clock::now();
      summary.last_checkpoint = checkpoint_dir_for_step(run_dir_, done);
    }
    if (r.stop.signal && !last) {
      summary.stopped_by = stop_signal_name(r.stop.signal);
      if (communicator_->is_root())
        std::cerr << "sinklm train: stopped by " << summary.stopped_by << " after step " << done << " of "
                  << options_.steps << ", " << summary.last_checkpoint << " is durable; exiting with "
                  << kPreemptedExitCode << " (resume with --resume)\n";
      break;
    }
  }
  if (communicator_->is_root() && tty) std::cerr << "\n";
  // Against the first step's line: reserved memory that did not grow means an allocation-free steady state.
  if (communicator_->is_root()) std::cerr << "sinklm train: memory measured at the end: " << measured_peak_memory(device_) << "\n";
  double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
  if (summary.steps > first_step_)
    summary.tokens_per_second = throughput_->tokens_per_step() * (summary.steps - first_step_) / total;
  return summary;
}

}  // namespace sinklm
