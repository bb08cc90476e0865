// allreduce_gradients, overlapped with backward: the flat gradient buffer is cut into buckets; a
// post-accumulation hook on every parameter counts down its bucket, and the moment a bucket's last gradient
// has landed (on the final micro-step of an accumulation) its all-reduce starts while backward goes on.
#pragma once
#include <memory>
#include <vector>

#include "train/distributed/communicator.h"
#include "train/distributed/flat_parameters.h"

namespace sinklm {

class GradientSynchronizer {
 public:
  GradientSynchronizer(const FlatParameters& flat, Communicator& communicator, int64_t bucket_bytes);

  // Call before each backward: only the last micro-step of an accumulation communicates.
  void begin_backward(bool final_micro_step);
  // After the final backward: starts any bucket not started yet (parameters without gradient) and waits.
  void finish();

  size_t bucket_count() const { return buckets_.size(); }

 private:
  struct Bucket {
    int64_t offset = 0, numel = 0;
    int parameters = 0, pending = 0;
    bool started = false;
  };
  void parameter_ready(size_t bucket);
  void start(Bucket& bucket);

  const FlatParameters& flat_;
  Communicator& communicator_;
  std::vector<Bucket> buckets_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;  // kept alive: hooks live on them
  bool communicating_ = false;
};

}  // namespace sinklm
