#include "common/train_config.hpp"

#include "common/config.hpp"

namespace gt {

TrainConfig read_train_config(const std::string& path,
                              const std::vector<std::pair<std::string, std::string>>& overrides) {
  ConfigReader r(path);
  for (const auto& [k, v] : overrides) r.apply_override(k, v);
  TrainConfig c;
  c.path = path;
  auto positive = [&](const char* s, const char* k, int64_t dflt) {
    int64_t v = r.get_int(s, k, dflt);
    if (v <= 0) r.reject(s, k, "must be positive, got " + std::to_string(v));
    return v;
  };
  auto in_range = [&](const char* s, const char* k, double dflt, double lo, double hi) {
    double v = r.get_float(s, k, dflt);
    if (!(v >= lo && v <= hi))
      r.reject(s, k, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(v));
    return v;
  };
  auto one_of = [&](const char* s, const char* k, const std::string& dflt, std::vector<std::string> allowed) {
    std::string v = r.get_string(s, k, dflt);
    std::string list;
    for (const auto& a : allowed) {
      if (a == v) return v;
      list += (list.empty() ? "" : ", ") + a;
    }
    r.reject(s, k, "'" + v + "' is not one of: " + list);
  };

  c.name = r.get_string("job", "name", c.name);
  if (c.name.empty()) r.reject("job", "name", "must not be empty");
  c.out_dir = r.get_string("job", "out_dir", "runs/" + c.name);

  c.model_path = r.get_string("model", "path", c.model_path);
  c.tokenizer = r.get_string("model", "tokenizer", c.tokenizer);
  c.dim = positive("model", "dim", c.dim);
  c.n_layers = positive("model", "n_layers", c.n_layers);
  c.n_heads = positive("model", "n_heads", c.n_heads);
  c.n_kv_heads = positive("model", "n_kv_heads", c.n_kv_heads);
  c.hidden_dim = positive("model", "hidden_dim", c.hidden_dim);
  c.max_seq_len = positive("model", "max_seq_len", c.max_seq_len);
  c.dtype = one_of("model", "dtype", c.dtype, {"fp32", "bf16"});
  if (c.dim % c.n_heads) r.reject("model", "n_heads", "must divide dim (" + std::to_string(c.dim) + ")");
  if (c.n_heads % c.n_kv_heads) r.reject("model", "n_kv_heads", "must divide n_heads (" + std::to_string(c.n_heads) + ")");
  if ((c.dim / c.n_heads) % 2) r.reject("model", "n_heads", "head size dim/n_heads must be even for rotary embeddings");

  c.source = r.get_string("data", "source", c.source);
  c.data_seed = r.get_int("data", "seed", c.data_seed);
  c.nodes = positive("data", "nodes", c.nodes);
  c.classes = positive("data", "classes", c.classes);
  c.noise = in_range("data", "noise", c.noise, 0.0, 1.0);

  c.stage = one_of("training", "stage", c.stage, {"lm", "grounding", "graph_matching", "task"});
  if (c.stage != "lm") r.reject("training", "stage", "not supported yet: stage '" + c.stage + "' (only 'lm' so far)");
  c.steps = positive("training", "steps", c.steps);
  c.batch_size = positive("training", "batch_size", c.batch_size);
  c.seq_len = positive("training", "seq_len", c.seq_len);
  c.grad_accum_steps = positive("training", "grad_accum_steps", c.grad_accum_steps);
  c.seed = r.get_int("training", "seed", c.seed);
  c.max_grad_norm = in_range("training", "max_grad_norm", c.max_grad_norm, 0.0, 1e9);
  c.log_every = positive("training", "log_every", c.log_every);
  c.threads = r.get_int("training", "threads", c.threads);
  if (c.threads < 0) r.reject("training", "threads", "must be >= 0 (0 = all cores)");

  one_of("optimizer", "name", "adamw", {"adamw"});
  c.lr = in_range("optimizer", "lr", c.lr, 0.0, 10.0);
  c.weight_decay = in_range("optimizer", "weight_decay", c.weight_decay, 0.0, 10.0);
  c.beta1 = in_range("optimizer", "beta1", c.beta1, 0.0, 0.999999);
  c.beta2 = in_range("optimizer", "beta2", c.beta2, 0.0, 0.999999);
  c.eps = in_range("optimizer", "eps", c.eps, 0.0, 1.0);

  one_of("lr_scheduler", "name", "cosine", {"cosine"});
  c.warmup_ratio = in_range("lr_scheduler", "warmup_ratio", c.warmup_ratio, 0.0, 1.0);
  c.min_lr_ratio = in_range("lr_scheduler", "min_lr_ratio", c.min_lr_ratio, 0.0, 1.0);

  r.finish();
  return c;
}

}  // namespace gt
