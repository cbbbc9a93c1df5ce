#include "data/synthetic_graph.hpp"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/rng.hpp"
#include "data/synthetic_text.hpp"
#include "data/text_features.hpp"
#include "data/topic_vocabulary.hpp"

namespace gt {

// Bumped whenever the word lists or the generator change what a seed produces.
constexpr int kGeneratorVersion = 1;
constexpr int32_t kMaxNodes = 1000000;
constexpr int32_t kMaxFeatureDim = 4096;
constexpr int64_t kMaxFeatureFloats = int64_t{1} << 28;

static void need_int(const char* flag, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi)
    fail(flag, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(v));
}

static std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

static void need_real(const char* flag, double v, double lo, double hi) {
  if (!(v >= lo && v <= hi))  // also rejects NaN
    fail(flag, "must be in [" + num(lo) + ", " + num(hi) + "], got " + num(v));
}

void validate(const SyntheticGraphParams& p) {
  const int32_t max_classes = static_cast<int32_t>(topic_specs().size());
  need_int("--classes", p.classes, 2, max_classes);
  need_int("--nodes", p.nodes, 1, kMaxNodes);
  if (p.nodes < p.classes)
    fail("--nodes", "must be at least the number of classes (" + std::to_string(p.classes) + "), got " +
                        std::to_string(p.nodes));
  need_int("--topic-words", p.topic_words, 1, topic_words_available());
  need_int("--title-min-words", p.title_min_words, 1, 32);
  need_int("--title-max-words", p.title_max_words, p.title_min_words, 32);
  need_int("--text-sentences", p.text_sentences, 0, 16);
  need_real("--noise", p.noise, 0, 1);
  need_real("--mean-out-degree", p.mean_out_degree, 1, 64);
  need_real("--homophily", p.homophily, 0, 1);
  need_real("--degree-skew", p.degree_skew, 0, 1);
  need_int("--feature-dim", p.feature_dim, 1, kMaxFeatureDim);
  const int64_t floats = static_cast<int64_t>(p.nodes) * p.feature_dim;
  if (floats > kMaxFeatureFloats)
    fail("--feature-dim", "nodes x feature_dim = " + std::to_string(floats) + " exceeds " +
                              std::to_string(kMaxFeatureFloats) + " (1 GiB of features)");
}

std::string synthetic_params_json(const SyntheticGraphParams& p) {
  nlohmann::ordered_json j;
  j["generator"] = "graphtune synthetic citation graph";
  j["generator_version"] = kGeneratorVersion;
  j["seed"] = p.seed;
  j["classes"] = p.classes;
  j["nodes"] = p.nodes;
  j["topic_words"] = p.topic_words;
  j["title_min_words"] = p.title_min_words;
  j["title_max_words"] = p.title_max_words;
  j["text_sentences"] = p.text_sentences;
  j["noise"] = p.noise;
  j["mean_out_degree"] = p.mean_out_degree;
  j["homophily"] = p.homophily;
  j["degree_skew"] = p.degree_skew;
  j["feature_dim"] = p.feature_dim;
  return j.dump();
}

// Independent streams per concern, so that changing one parameter (say the noise) leaves what
// the others decide (labels, citations) unchanged.
static uint64_t stream_seed(uint64_t seed, uint64_t stream) { return seed ^ (stream * 0x9e3779b97f4a7c15ULL); }

// Mildly unbalanced classes (weights 1 to 1.5, as real topic sizes differ), every class at
// least one paper, assigned to node ids in random order.
static std::vector<int32_t> draw_labels(const SyntheticGraphParams& p, Rng& rng) {
  std::vector<uint64_t> w(static_cast<size_t>(p.classes));
  uint64_t total = 0;
  for (auto& x : w) total += (x = 1000 + rng.below(501));
  const int32_t spare = p.nodes - p.classes;  // after the one guaranteed paper per class
  std::vector<int32_t> count(static_cast<size_t>(p.classes), 1);
  int32_t given = 0;
  for (int32_t c = 0; c < p.classes; ++c) {
    int32_t k = static_cast<int32_t>(static_cast<uint64_t>(spare) * w[c] / total);
    count[c] += k;
    given += k;
  }
  for (int32_t c = 0; given < spare; c = (c + 1) % p.classes, ++given) ++count[c];  // remainders
  std::vector<int32_t> labels;
  labels.reserve(static_cast<size_t>(p.nodes));
  for (int32_t c = 0; c < p.classes; ++c) labels.insert(labels.end(), static_cast<size_t>(count[c]), c);
  for (int32_t i = p.nodes - 1; i > 0; --i) std::swap(labels[i], labels[rng.below(static_cast<uint32_t>(i + 1))]);
  return labels;
}

// Paper i cites only papers j < i. Each citation picks a topic (its own with P = homophily,
// otherwise another uniformly), then a paper of that topic: with P = degree_skew from an urn
// holding each paper once plus once per citation it has received (linear preferential
// attachment: P ~ in-degree + 1), otherwise uniformly. A paper drawn twice is redrawn (up to
// ten times); a topic with no earlier paper yet drops the citation (only the first few papers).
static std::vector<std::pair<int32_t, int32_t>> draw_citations(const SyntheticGraphParams& p,
                                                               const std::vector<int32_t>& labels, Rng& rng) {
  const double p_more = (p.mean_out_degree - 1.0) / p.mean_out_degree;  // 1 + geometric
  std::vector<std::vector<int32_t>> members(static_cast<size_t>(p.classes)), urn(members.size());
  std::vector<std::pair<int32_t, int32_t>> edges;
  std::vector<int32_t> cited;
  for (int32_t i = 0; i < p.nodes; ++i) {
    int32_t want = 1;
    while (rng.uniform() < p_more && want < i) ++want;
    want = std::min(want, i);
    cited.clear();
    for (int32_t slot = 0; slot < want; ++slot) {
      // The topic is drawn once per citation, so retries cannot shift the homophily.
      int32_t c = labels[i];
      if (!(rng.uniform() < p.homophily)) {
        c = static_cast<int32_t>(rng.below(static_cast<uint32_t>(p.classes - 1)));
        if (c >= labels[i]) ++c;
      }
      for (int attempt = 0; attempt < 10; ++attempt) {
        const auto& pool = rng.uniform() < p.degree_skew ? urn[c] : members[c];
        if (pool.empty()) continue;
        int32_t j = pool[rng.below(static_cast<uint32_t>(pool.size()))];
        if (std::find(cited.begin(), cited.end(), j) != cited.end()) continue;
        cited.push_back(j);
        break;
      }
    }
    for (int32_t j : cited) {
      edges.emplace_back(i, j);
      urn[labels[j]].push_back(j);
    }
    members[labels[i]].push_back(i);
    urn[labels[i]].push_back(i);
  }
  std::sort(edges.begin(), edges.end());
  return edges;
}

TextGraph make_synthetic_graph(const SyntheticGraphParams& p) {
  validate(p);
  Rng label_rng(stream_seed(p.seed, 1)), text_rng(stream_seed(p.seed, 2)), cite_rng(stream_seed(p.seed, 3));

  TextGraph g;
  g.name = "synth";
  g.params_json = synthetic_params_json(p);
  for (int32_t c = 0; c < p.classes; ++c) {
    g.class_names.push_back(topic_specs()[c].name);
    g.class_descriptions.push_back(topic_specs()[c].description);
  }

  const std::vector<int32_t> labels = draw_labels(p, label_rng);
  PaperWriter writer(p.topic_words, p.title_min_words, p.title_max_words, p.noise);
  g.nodes.resize(static_cast<size_t>(p.nodes));
  for (int32_t i = 0; i < p.nodes; ++i) {
    Node& v = g.nodes[i];
    v.id = i;
    v.label = labels[i];
    // The topic this paper's noise borrows from; any topic but its own.
    int32_t second = static_cast<int32_t>(text_rng.below(static_cast<uint32_t>(p.classes - 1)));
    if (second >= v.label) ++second;
    v.title = writer.title(v.label, second, text_rng);
    v.text = writer.text(v.label, second, p.text_sentences, text_rng);
  }

  g.edges = draw_citations(p, labels, cite_rng);
  g.build_adjacency();

  g.feature_dim = p.feature_dim;
  g.features.resize(static_cast<size_t>(p.nodes) * static_cast<size_t>(p.feature_dim));
  for (int32_t i = 0; i < p.nodes; ++i) {
    const Node& v = g.nodes[i];
    text_feature(v.text.empty() ? v.title : v.title + " " + v.text, p.feature_dim,
                 g.features.data() + static_cast<size_t>(i) * p.feature_dim);
  }
  return g;
}

}  // namespace gt
