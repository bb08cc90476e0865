#include "data/prepare/document_record.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/tokenizers/utf8.h"

namespace sinklm {

DocumentRecord decode_record(const InputFile& file, const std::string& text_field, RawRecord& record) {
  DocumentRecord doc;
  if (size_t bad = first_invalid_utf8(record.text); bad != std::string::npos) {
    doc.problem = str("invalid UTF-8 at byte ", bad + 1, " of the ", file.kind == InputKind::Jsonl ? "line" : "document");
    return doc;
  }
  if (file.kind != InputKind::Jsonl) {
    doc.text = std::move(record.text);
    return doc;
  }
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(record.text);
  } catch (const nlohmann::json::exception& e) {
    std::string why = e.what();
    doc.problem = "not JSON: " + why.substr(why.find(']') == std::string::npos ? 0 : why.find(']') + 2);
    return doc;
  }
  if (!value.is_object()) {
    doc.problem = str("a JSON ", value.type_name(), ", not an object with a \"", text_field, "\" field");
    return doc;
  }
  auto field = value.find(text_field);
  if (field == value.end()) {
    doc.problem = str("no \"", text_field, "\" field (see --text-field)");
    return doc;
  }
  if (!field->is_string()) {
    doc.problem = str("field \"", text_field, "\" is a JSON ", field->type_name(), ", not a string");
    return doc;
  }
  doc.text = field->get<std::string>();
  if (file.has_ids) {
    auto id = value.find("id");
    if (id == value.end() || !id->is_string()) {
      doc.problem = "no string \"id\" field (corpus directory files have one per line)";
      return doc;
    }
    doc.id = id->get<std::string>();
  }
  return doc;
}

}  // namespace sinklm
