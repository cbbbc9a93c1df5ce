#pragma once
// Text from a damaged or hostile file, fit to quote in a one-line error: control characters
// (a newline would split the line, an ESC rewrite the user's terminal) shown as \xNN.
#include <string>

namespace gt {

std::string printable(const std::string& text);  // defined in common/error.cpp

}  // namespace gt
