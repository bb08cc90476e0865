#include "serve/generation_worker.h"

#include <torch/torch.h>

#include <chrono>
#include <cstdio>

#include "core/error.h"

namespace sinklm {

namespace {
const char* const kStopping = "the server stopped before this completion finished";
}

GenerationWorker::GenerationWorker(CachedDecoder& decoder, int64_t prefill_chunk, ServerMetrics& metrics)
    : engine_(decoder, prefill_chunk), metrics_(metrics), thread_([this] { run(); }) {}

GenerationWorker::~GenerationWorker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void GenerationWorker::submit(std::shared_ptr<Generation> generation) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(generation));
  }
  wake_.notify_all();
}

void GenerationWorker::stop_generating() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ending_ = true;
  }
  wake_.notify_all();
}

int64_t GenerationWorker::load() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(queue_.size()) + running_;
}

void GenerationWorker::run() {
  c10::InferenceMode inference;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || engine_.active() > 0; });
      while (!queue_.empty()) {
        if (stopping_ || ending_) queue_.front()->abort(GenerationFailure::ServerStopping, kStopping);
        else engine_.add(queue_.front());
        queue_.pop_front();
      }
      if (stopping_ && engine_.active() == 0) return;
    }
    const auto start = std::chrono::steady_clock::now();
    try {
      engine_.step();
    } catch (const StorageError& e) {  // a session log could not be appended (JobRunner::on_delta)
      std::fprintf(stderr, "sinklm serve: storage: %s\n", e.what());
      ++metrics_.storage_errors;
      engine_.abort_all(e.full() ? GenerationFailure::StorageFull : GenerationFailure::StorageFailed, e.what());
    } catch (const std::exception& e) {
      engine_.abort_all(GenerationFailure::StepFailed, e.what());
    }
    metrics_.step_seconds.observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || ending_) engine_.abort_all(GenerationFailure::ServerStopping, kStopping);
    running_ = engine_.active();
    metrics_.active_streams = running_;
    const KvUsage kv = engine_.kv_usage();
    metrics_.active_kv_entries = kv.entries;
    metrics_.active_kv_bytes = kv.bytes;
  }
}

}  // namespace sinklm
