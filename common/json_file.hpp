#pragma once
// A JSON file that must hold an object (config.json and its kind): read whole, parsed, checked.
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace gt {

// InputError naming the file when it cannot be read, is not valid JSON, or is not an object.
nlohmann::json read_json_object(const std::string& path);

}  // namespace gt
