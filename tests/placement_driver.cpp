// The device-placement check without a GPU (tests/cli/placement.sh runs it): a graph phase's
// training job (train/graph_phase.hpp, every step as the worker runs it), an eval batch (greedy
// answers, as `graphtune eval`) and a generation (the LLM alone, KV cache on) run on DEVICE:
// cpu, or fakegpu (tests/fake_device.hpp), where any CPU tensor with elements beside the
// device's is an error naming the operator. Writes to OUT:
//   train/        the job's outputs (graph_projector.bin, ...)
//   answers.txt   the eval batch's answer ids, one row a line
//   generated.txt the generation's ids
// so that the CPU's and the fake device's can be compared byte for byte.
//
// --plant step|eval|generate: a tensor of that part comes out on the CPU (the fake device's
// plant_cpu_tensor); the run must then fail with the placement line.
//
// usage: placement_driver CONFIG OUT DEVICE [--plant WHERE] [--section.key VALUE ...]
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "comm/world.hpp"
#include "common/config.hpp"
#include "common/error.hpp"
#include "config/job_config.hpp"
#include "data/chat_template.hpp"
#include "loader/graph_batches.hpp"
#include "loader/job_records.hpp"
#include "model/generate.hpp"
#include "model/graph_generate.hpp"
#include "tests/fake_device.hpp"
#include "train/graph_phase.hpp"
#include "train/graphgpt_setup.hpp"
#include "weights/load_model.hpp"

namespace {

void write_rows(const std::string& path, const std::vector<std::vector<int32_t>>& rows) {
  std::ofstream f(path);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) f << (i ? " " : "") << row[i];
    f << "\n";
  }
}

// Two records' answers, greedy, from the trained projector.
std::vector<std::vector<int32_t>> eval_batch(gt::JobConfig cfg, const c10::Device& device, bool plant) {
  cfg.model.projector = cfg.job.out_dir + "/graph_projector.bin";
  std::vector<gt::InstructionRecord> records = gt::read_job_records(cfg.data);
  records.resize(std::min<size_t>(records.size(), 2));
  gt::GraphGptSetup s = gt::build_graphgpt(cfg, device);
  const gt::ChatTemplate tmpl = gt::chat_template_named(cfg.eval.chat_template, "[eval].template");
  std::vector<gt::GraphExample> examples;
  for (const auto& r : records)
    examples.push_back(gt::make_prompt_example(r, s.features, *s.tokenizer, cfg.data.max_len, cfg.data.instructions, tmpl));
  s.model->eval();
  const gt::GraphGptBatch batch = gt::collate(examples, s.tokenizer->pad_id());
  if (plant) gt::testing::plant_cpu_tensor(1);
  return gt::generate_graph_answers(s.model, s.model->prepare(batch, device), 8, gt::chat_stop_id(tmpl, *s.tokenizer));
}

// The LLM alone continues a few tokens, greedy.
std::vector<int32_t> generation(const gt::JobConfig& cfg, const c10::Device& device, bool plant) {
  gt::LoadedModel loaded = gt::load_model(cfg.model.path);
  gt::LlamaStage whole;
  whole.device = device;
  whole.initialise = false;
  gt::Llama model(loaded.config, whole);
  model->load_weights(std::move(loaded.weights), cfg.model.path);
  model->eval();
  gt::SamplingParams sp;
  sp.temperature = 0;
  sp.max_new_tokens = 12;
  if (plant) gt::testing::plant_cpu_tensor(1);
  return gt::generate(model, {1, 403, 407, 261, 378}, sp, [](int32_t) {});
}

int run(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s CONFIG OUT cpu|fakegpu [--plant step|eval|generate] [--section.key VALUE ...]\n",
                 argv[0]);
    return 2;
  }
  const std::string out = argv[2], on = argv[3];
  std::vector<std::string> args(argv + 4, argv + argc), rest;
  std::string plant;
  if (args.size() >= 2 && args[0] == "--plant") {
    plant = args[1];
    args.erase(args.begin(), args.begin() + 2);
  }
  if (!plant.empty() && plant != "step" && plant != "eval" && plant != "generate")
    gt::fail("--plant", "expected step, eval or generate, got '" + plant + "'");
  if (on != "cpu" && on != "fakegpu") gt::fail("DEVICE", "expected cpu or fakegpu, got '" + on + "'");
  const c10::Device device = on == "cpu" ? c10::Device(c10::kCPU) : gt::testing::fake_device();

  const auto overrides = gt::take_overrides(args, rest);
  if (!rest.empty()) gt::fail("command line", "unexpected argument '" + rest[0] + "'");
  gt::JobConfig cfg = gt::read_job_config(argv[1], overrides);
  cfg.job.out_dir = out + "/train";
  gt::World world(&argc, &argv);

  // The first step's tensors are made before its loss is read; a plant counted from the first
  // read lands in the second step.
  if (plant == "step") gt::testing::plant_cpu_tensor(1, /*after_host_read=*/true);
  const int rc = gt::run_graph_phase(cfg, world, device);
  if (rc != 0) return rc;
  std::fprintf(stderr, "placement: training on %s done\n", on.c_str());
  write_rows(out + "/answers.txt", eval_batch(cfg, device, plant == "eval"));
  std::fprintf(stderr, "placement: eval batch on %s done\n", on.c_str());
  write_rows(out + "/generated.txt", {generation(cfg, device, plant == "generate")});
  std::fprintf(stderr, "placement: generation on %s done; %lld operators ran on fakegpu\n", on.c_str(),
               static_cast<long long>(gt::testing::fake_device_ops()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const gt::InputError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "%s\n", e.what_without_backtrace());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
