// From a raw record (document_reader.h) to a document's text, or to the reason it is malformed: a JSONL line
// must be valid UTF-8 and a JSON object whose text field is a string; a text record must be valid UTF-8.
#pragma once
#include <string>

#include "data/prepare/document_reader.h"
#include "data/prepare/input_files.h"

namespace sinklm {

struct DocumentRecord {
  std::string text;
  std::string id;       // corpus directory files only
  std::string problem;  // empty when the record is a document; else why it was skipped (for the report)
};

// Consumes record.text.
DocumentRecord decode_record(const InputFile& file, const std::string& text_field, RawRecord& record);

}  // namespace sinklm
