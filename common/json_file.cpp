#include "common/json_file.hpp"

#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "common/error.hpp"

namespace gt {

nlohmann::json read_json_object(const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    fail(path, std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) fail(path, "not a JSON object");
  return j;
}

}  // namespace gt
