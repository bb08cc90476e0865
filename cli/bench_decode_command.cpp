// sinklm bench-decode: per-token decode latency and throughput of K streams decoding together through one
// cache policy, starting at stream position P (the cache is filled, then moved to P without streaming
// P tokens, unless --stream-all). Prints one JSON object. scripts/bench/bench_serve runs the matrix.
//
// The bounds printed beside the figure are the roofline of model/analysis/roofline.h.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>

#include "core/config/args.h"
#include "core/system/cpu_features.h"
#include "core/error.h"
#include "core/system/process_memory.h"
#include "model/io/checkpoint.h"
#include "model/analysis/roofline.h"
#include "decode/cached_decoder.h"
#include "model/analysis/kernel_trace.h"
#include "model/kernels/token_scores.h"
#include "cli/commands.h"
#include "cli/inference_model.h"

namespace sinklm {
namespace {

// --trace DIR, created if missing; a user error naming the flag where it cannot be.
std::string trace_directory(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error || !std::filesystem::is_directory(dir))
    fail("--trace ", dir, ": cannot use it as the trace directory (", error ? error.message() : "not a directory",
         "); give a writable directory");
  return dir;
}

std::vector<int64_t> random_text(int64_t count, int64_t vocab) {
  auto t = torch::randint(0, vocab, {count}, torch::TensorOptions().dtype(torch::kInt64));
  return {t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + count};
}

// A stream of the policy positioned at `start`: its cache filled with real entries (streamed through the
// model), then placed at `start` through a snapshot (the entries the policy holds are the same either way).
std::unique_ptr<DecoderStream> positioned_stream(CachedDecoder& decoder, std::shared_ptr<const KvCachePolicy> policy,
                                                 PositionRule rule, int64_t start, bool stream_all, int64_t chunk) {
  const auto& model = decoder.config();
  const int64_t fill = stream_all ? start : std::min(start, policy->budget());
  auto ids = random_text(fill, model.tokenizer_vocab_size);
  if (policy->recomputes()) {  // no KV: the held tokens are the whole state
    CacheSnapshot snapshot;
    snapshot.stream_length = start;
    auto held = random_text(policy->entries_after(start), model.tokenizer_vocab_size);
    return std::make_unique<DecoderStream>(policy, rule, KeyRotation::Relative, model, decoder.device(),
                                           snapshot, held);
  }
  auto stream = std::make_unique<DecoderStream>(policy, rule, KeyRotation::Relative, model, decoder.device());
  for (int64_t at = 0; at < fill;) {
    const int64_t take = std::min(stream->max_chunk(chunk), fill - at);
    decoder.step({{stream.get(), std::vector<int64_t>(ids.begin() + at, ids.begin() + at + take)}});
    at += take;
  }
  if (fill == start) return stream;
  CacheSnapshot snapshot = stream->snapshot();
  snapshot.stream_length = start;
  std::vector<int64_t> held(stream->held_tokens().begin(), stream->held_tokens().end());
  return std::make_unique<DecoderStream>(policy, rule, KeyRotation::Relative, model, decoder.device(),
                                         snapshot, held);
}

// A second stream holding what `from` holds (its cache copied through a snapshot).
std::unique_ptr<DecoderStream> copied_stream(CachedDecoder& decoder, std::shared_ptr<const KvCachePolicy> policy,
                                             PositionRule rule, const DecoderStream& from) {
  std::vector<int64_t> held(from.held_tokens().begin(), from.held_tokens().end());
  return std::make_unique<DecoderStream>(policy, rule, KeyRotation::Relative, decoder.config(), decoder.device(),
                                         from.snapshot(), held);
}

// Every flag of `bench-decode`, bound to what it sets.
struct BenchDecodeFlags {
  ModelFlags model;
  CacheFlags cache;
  int64_t streams = 1, start_position = 0, decode = 64, warmup = 4, chunk = 256;
  bool stream_all = false, no_batch = false;
  std::string trace;
};

std::vector<FlagSpec> bench_decode_flags(BenchDecodeFlags& f) {
  constexpr Range kCount{1, 1e12};
  return with_flags(
      {flag(&f.streams, "streams", "K", "streams decoding together in one batch", kCount),
       flag(&f.start_position, "start-position", "P", "stream position decoding starts at (0: the window; heads: its retrieval budget)", Range{0, 1e12}),
       flag(&f.stream_all, "stream-all", "stream all P tokens through the cache first (for memory vs stream length)"),
       flag(&f.decode, "decode", "N", "tokens decoded per stream", kCount),
       flag(&f.warmup, "warmup", "N", "untimed decode steps first", Range{0, 1e12}),
       flag(&f.chunk, "chunk", "N", "prefill chunk", kCount),
       flag(&f.no_batch, "no-batch", "attend stream by stream (the baseline of batched decoding)"),
       flag(&f.trace, "trace", "DIR", "profile the timed steps into DIR/trace.json and DIR/trace_top.txt (slows them)")},
      {model_flags(f.model), cache_flags(f.cache)});
}

}  // namespace

int run_bench_decode_command(const std::vector<std::string>& argv) {
  BenchDecodeFlags f;
  Args args("bench-decode", "--checkpoint DIR [--cache sink_window] [--window W] [--streams K] [--start-position P]",
            bench_decode_flags(f), argv);
  if (args.print_help_if_requested()) return 0;
  torch::manual_seed(0);
  InferenceModel m = open_inference_model(f.model, NeedsText::No);
  const torch::Device device = m.device;
  CachedDecoder decoder(m.loaded.model);
  decoder.set_batched_decode(!f.no_batch);
  const auto& model = decoder.config();
  c10::InferenceMode inference;

  CacheOptions cache = cache_options(f.cache, m);
  const int64_t streams = f.streams, decode = f.decode, warmup = f.warmup;
  // By default every budget is full: W, or for heads the retrieval budget R.
  const int64_t start = f.start_position > 0 ? f.start_position
                        : cache.policy == "heads" ? make_cache_policy(cache, model)->budget() : cache.window;
  const int64_t cache_size = cache.window;
  if (cache.policy == "full") cache.window = start + warmup + decode;
  std::shared_ptr<const KvCachePolicy> policy = make_cache_policy(cache, model, "--cache/--window/--sinks");

  // One stream is filled; the others start from its snapshot (speed does not depend on what they hold, and
  // filling K caches of pythia-160m at W = 4096 would take minutes).
  std::vector<std::unique_ptr<DecoderStream>> owned;
  owned.push_back(positioned_stream(decoder, policy, cache.positions, start, f.stream_all, f.chunk));
  for (int64_t i = 1; i < streams; ++i) owned.push_back(copied_stream(decoder, policy, cache.positions, *owned[0]));
  std::vector<int64_t> next(streams, 1);
  std::vector<double> step_ms;
  auto sync = [&] {
    if (device.is_cuda()) torch::cuda::synchronize();
  };
  std::optional<KernelTrace> trace;
  if (!f.trace.empty()) trace.emplace(decode, warmup - 1, warmup + decode, trace_directory(f.trace), device);
  for (int64_t s = 0; s < warmup + decode; ++s) {
    if (trace) trace->before_step(s);
    std::vector<StreamChunk> chunks;
    for (int64_t i = 0; i < streams; ++i) chunks.push_back({owned[i].get(), {next[i]}});
    sync();
    const auto t0 = std::chrono::steady_clock::now();
    auto logits = decoder.step(chunks);
    for (int64_t i = 0; i < streams; ++i) next[i] = top_token(logits[i][0].narrow(0, 0, model.tokenizer_vocab_size));
    sync();
    if (trace) trace->after_step(s);
    if (s >= warmup) step_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::vector<double> sorted = step_ms;
  std::sort(sorted.begin(), sorted.end());
  double total_ms = 0;
  for (double ms : step_ms) total_ms += ms;
  const auto percentile = [&](double p) { return sorted[std::min(sorted.size() - 1, size_t(p * sorted.size()))]; };
  const double weight_bytes = decode_weight_bytes(m.loaded.model);
  const auto formats = weights_per_format(m.loaded.model);
  const double kv_bytes = static_cast<double>(owned[0]->kv_bytes());  // from storage: heads may keep different budgets
  // Entries per head, averaged over layers and heads: what each head's attention reads (less the exact copies
  // of the sinks an int8 cache keeps beside them).
  const KvFormat format = policy->kv_format();
  const double per_head = kv_bytes / (2.0 * model.num_layers * model.num_heads) -
                          std::min(policy->sinks(), owned[0]->entries()) * kv_sink_extra_bytes(format, model.head_dim());
  const double mean_entries = per_head / kv_entry_bytes(format, model.head_dim());
  const double peak_rss = peak_rss_mib();  // before the probes below allocate 512 MiB of their own
  const double bandwidth = measured_read_bandwidth(device), matmul_rate = measured_matmul_rate(device, main_format(formats));
  const double flops_per_token = decode_flops_per_token(m.loaded.model, mean_entries);
  const DecodeBounds bounds = decode_bounds(streams, weight_bytes, kv_bytes, bandwidth, flops_per_token, matmul_rate);
  nlohmann::json out = {{"cache", policy->name()}, {"config", policy->label()}, {"cache_size", cache_size},
                        {"streams", streams}, {"start_position", start}, {"decoded_per_stream", decode},
                        {"median_step_ms", sorted[sorted.size() / 2]}, {"mean_step_ms", total_ms / step_ms.size()},
                        {"p99_step_ms", percentile(0.99)}, {"batched", !f.no_batch},
                        {"kv_dtype", kv_format_name(format)}, {"weights", format_names(formats)},
                        {"weight_bytes", weight_bytes}, {"kv_bytes_per_stream", kv_bytes},
                        {"streams_per_gib", kv_memory_json(*policy, model)["streams_per_gib"]},
                        {"read_bandwidth_gbs", bandwidth / 1e9}, {"bound_tokens_per_second", bounds.memory},
                        {"flops_per_token", flops_per_token}, {"matmul_gflops", matmul_rate / 1e9},
                        {"compute_bound_tokens_per_second", bounds.compute},
                        {"roofline_tokens_per_second", bounds.roofline()},
                        {"tokens_per_second", streams * decode / (total_ms / 1000.0)},
                        {"kv_entries", owned[0]->entries()}, {"kv_entries_per_head", mean_entries},
                        {"kv_bytes_per_layer", kv_memory_json(*policy, model)["kv_bytes_per_layer"]}, {"peak_rss_mib", peak_rss},
                        {"threads", torch::get_num_threads()}, {"device", device.str()}};
  std::cout << out.dump() << "\n";
  return 0;
}

}  // namespace sinklm
