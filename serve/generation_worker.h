// The server's one model thread: runs GenerationEngine steps while any generation is active and adds
// submitted generations between steps. Listeners are called on this thread.
#pragma once
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "decode/generation.h"
#include "serve/server_metrics.h"

namespace sinklm {

class GenerationWorker {
 public:
  GenerationWorker(CachedDecoder& decoder, int64_t prefill_chunk, ServerMetrics& metrics);
  ~GenerationWorker();  // finishes the running step, aborts the rest, joins
  void submit(std::shared_ptr<Generation> generation);
  // The server is stopping: every generation, running or queued, ends with ServerStopping at the step it is
  // in (its tokens so far delivered by its listener), and so does any submitted later.
  void stop_generating();
  int64_t load() const;  // queued + running generations

 private:
  void run();

  GenerationEngine engine_;
  ServerMetrics& metrics_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Generation>> queue_;
  int64_t running_ = 0;
  bool stopping_ = false;  // the destructor: abort everything, then the thread ends
  bool ending_ = false;    // stop_generating(): abort everything, the thread goes on
  std::thread thread_;
};

}  // namespace sinklm
