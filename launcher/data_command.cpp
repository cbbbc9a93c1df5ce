// `graphtune data ...`: making and preparing data sets. Each subcommand registers itself on the
// `data` command below; `synth` writes the embedded synthetic citation graph
// (docs/embedded-corpus.md).
#include <cstdio>
#include <memory>
#include <string>

#include "common/error.hpp"
#include "data/synthetic_graph.hpp"
#include "data/text_graph_io.hpp"
#include "launcher/commands.hpp"

namespace gt {

static void add_synth_command(CLI::App& data, int& exit_code) {
  struct Args {
    std::string out;
    bool overwrite = false;
    SyntheticGraphParams p;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = data.add_subcommand("synth", "write the embedded synthetic citation graph to a folder");
  sub->add_option("--out", args->out, "output folder (nodes.tsv, edges.tsv, classes.tsv, features.npy, meta.json)")
      ->required();
  SyntheticGraphParams& p = args->p;
  sub->add_option("--seed", p.seed, "random seed; the same seed gives the same bytes")->capture_default_str();
  sub->add_option("--nodes", p.nodes, "number of papers")->capture_default_str();
  sub->add_option("--classes", p.classes, "number of topics (2..12)")->capture_default_str();
  sub->add_option("--noise", p.noise, "probability a title word is not from the paper's topic")->capture_default_str();
  sub->add_option("--homophily", p.homophily, "probability a citation stays within the topic")->capture_default_str();
  sub->add_option("--mean-out-degree", p.mean_out_degree, "citations per paper")->capture_default_str();
  sub->add_option("--degree-skew", p.degree_skew, "share of citations drawn by popularity (0..1)")->capture_default_str();
  sub->add_option("--topic-words", p.topic_words, "words per topic vocabulary")->capture_default_str();
  sub->add_option("--title-min-words", p.title_min_words, "fewest topic words per title")->capture_default_str();
  sub->add_option("--title-max-words", p.title_max_words, "most topic words per title")->capture_default_str();
  sub->add_option("--text-sentences", p.text_sentences, "abstract sentences per paper")->capture_default_str();
  sub->add_option("--feature-dim", p.feature_dim, "node feature size")->capture_default_str();
  sub->add_flag("--overwrite", args->overwrite, "replace an existing non-empty output folder");

  sub->callback([args, &exit_code] {
    // Refuse bad values and an occupied folder before spending time generating.
    validate(args->p);
    check_output_folder(args->out, args->overwrite);
    TextGraph g = make_synthetic_graph(args->p);
    write_text_graph(g, args->out, args->overwrite);
    GraphStats s = graph_stats(g);
    std::fprintf(stderr,
                 "graphtune data synth: wrote %s: %d nodes, %lld edges, %d classes, homophily %.3f, "
                 "max degree %d (in %d, out %d)\n",
                 args->out.c_str(), s.num_nodes, static_cast<long long>(s.num_edges), s.num_classes, s.homophily,
                 s.max_degree, s.max_in_degree, s.max_out_degree);
    exit_code = 0;
  });
}

void add_data_command(CLI::App& app, int& exit_code) {
  CLI::App* data = app.add_subcommand("data", "make and prepare data sets");
  data->require_subcommand(1);
  add_synth_command(*data, exit_code);
  // `data build` (instruction records) registers here too.
}

}  // namespace gt
