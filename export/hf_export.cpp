#include "export/hf_export.h"

#include "core/error.h"
#include "export/hf_tokenizer_files.h"
#include "model/sink.h"

namespace sinklm {

void export_hf(LoadedModel& loaded, const std::vector<std::string>& tokenizer_files, const std::string& out,
               torch::ScalarType dtype) {
  const ModelConfig& model = loaded.model->config();
  if (!loads_in_transformers(model.sink_mode))
    fail("model.sink.mode ", sink_mode_name(model.sink_mode), ": transformers' GPTNeoXForCausalLM has no such "
         "attention and would compute another function; export hf covers the modes none and token (`sinklm "
         "serve` serves every mode)");
  // A tokenizer Hugging Face cannot express fails here, naming it, before anything is written.
  const CheckpointTokenizer tokenizer = checkpoint_tokenizer(tokenizer_files, loaded.config, model, HfView::Required);
  CheckpointWriter writer(out);
  writer.add_model(loaded.config, loaded.model, dtype);
  add_tokenizer_files(writer, tokenizer);
  writer.commit();
}

}  // namespace sinklm
