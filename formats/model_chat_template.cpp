#include "formats/model_chat_template.hpp"

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/json_file.hpp"
#include "formats/gguf.hpp"

namespace gt {

namespace {

std::optional<std::string> folder_template(const nlohmann::json& config) {
  auto it = config.find("chat_template");
  if (it == config.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array())  // [{"name": "default", "template": ...}, {"name": "tool_use", ...}]
    for (const auto& t : *it)
      if (t.is_object() && t.value("name", "") == "default" && t.contains("template") && t["template"].is_string())
        return t["template"].get<std::string>();
  return std::nullopt;
}

}  // namespace

std::optional<ModelChatTemplate> model_chat_template(const std::string& model_path) {
  try {
    if (is_directory(model_path)) {
      const std::string file = model_path + "/tokenizer_config.json";
      if (!path_exists(file)) return std::nullopt;
      if (auto jinja = folder_template(read_json_object(file))) return ModelChatTemplate{file, *jinja};
      return std::nullopt;
    }
    if (ends_with(model_path, ".gguf")) {
      const GgufFile f = GgufFile::open(model_path);
      if (!f.has("tokenizer.chat_template")) return std::nullopt;
      return ModelChatTemplate{model_path + " (tokenizer.chat_template)", f.get_string("tokenizer.chat_template")};
    }
  } catch (const InputError&) {
  }
  return std::nullopt;
}

}  // namespace gt
