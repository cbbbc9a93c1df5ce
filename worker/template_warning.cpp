#include "worker/template_warning.hpp"

#include <cstdio>

#include "common/error.hpp"
#include "config/job_config.hpp"
#include "data/chat_template.hpp"
#include "formats/model_chat_template.hpp"
#include "formats/model_presets.hpp"

namespace gt {

void warn_if_template_differs(const JobConfig& cfg, const std::string& name, const char* section) {
  if (cfg.model.path.empty()) return;
  std::string path;
  try {
    path = resolve_model_path(cfg.model.path);
  } catch (const InputError&) {
    return;  // the model's own readers say what is wrong with it
  }
  const auto shipped = model_chat_template(path);
  if (!shipped) return;
  const std::string model = template_rendered_by(shipped->jinja);
  if (template_fits_model(name, model)) return;
  std::fprintf(stderr,
               "graphtune: warning: %s: \"%s\" renders prompts unlike those the model was tuned on: its "
               "chat_template (%s) is graphtune's \"%s\"\n",
               cfg.origin(section, "template").c_str(), name.c_str(), shipped->source.c_str(), model.c_str());
}

}  // namespace gt
