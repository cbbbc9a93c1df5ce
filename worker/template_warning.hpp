#pragma once
// One line on stderr when a job renders its prompts in another chat template than the one its
// model ships (a Llama 3.1 model with "llama3", a Qwen2.5 model with "chatml"): the model then
// reads prompts unlike those it was tuned on, and nothing fails to say so. A warning, not an
// error: GraphGPT's own recipe tunes models in vicuna_v1_1 whatever they ship.
#include <string>

namespace gt {

struct JobConfig;

// `name` is the template the job uses, read from [section].template.
void warn_if_template_differs(const JobConfig& cfg, const std::string& name, const char* section);

}  // namespace gt
