// Whole-file reads with errors that name the file.
#pragma once
#include <string>

namespace sinklm {

// UserError "<path>: cannot read: <reason>" when the file cannot be opened or read.
std::string read_file(const std::string& path);

}  // namespace sinklm
