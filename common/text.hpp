#pragma once
// String helpers that readers' messages and answers share. No libtorch.
#include <cstdint>
#include <string>
#include <vector>

namespace gt {

// `s` without the spaces, tabs and line breaks at its ends.
std::string trim_whitespace(const std::string& s);

// "[4, 6]": how messages print shapes and boxes.
std::string shape_text(const std::vector<int64_t>& shape);

}  // namespace gt
