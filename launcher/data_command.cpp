// `graphtune data ...`: making and preparing data sets. Each subcommand registers itself on the
// `data` command below; `synth` writes the embedded synthetic citation graph
// (docs/embedded-corpus.md); `convert` writes any graph it can read as a text-graph folder;
// `build` writes GraphGPT instruction records (data/instruction_builder.hpp), with GraphGPT's
// subgraphs, LLaGA's neighbour trees or its hop fields (--template) as their graphs.
#include <cstdio>
#include <memory>
#include <string>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "data/cora_ml.hpp"
#include "data/instruction_builder.hpp"
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

// What the graph stages read of a --graph (texts, labels, citations and the features the encoder
// gets) in the one format other tools read without graphtune: the baselines of
// bench/quality.sh train on exactly these features.
static void add_convert_command(CLI::App& data, int& exit_code) {
  struct Args {
    std::string graph, out;
    bool overwrite = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = data.add_subcommand("convert", "write a graph (embedded, a cora_ml folder) as a graphtune text-graph folder");
  sub->add_option("--graph", args->graph, "'embedded', a graphtune text-graph folder or a cora_ml folder")->required();
  sub->add_option("--out", args->out, "output folder (nodes.tsv, edges.tsv, classes.tsv, features.npy, meta.json)")
      ->required();
  sub->add_flag("--overwrite", args->overwrite, "replace an existing non-empty output folder");
  sub->callback([args, &exit_code] {
    check_output_folder(args->out, args->overwrite);
    if (args->graph != "embedded" && !is_directory(args->graph))
      fail("--graph", args->graph + ": no such folder (want 'embedded', a graphtune text-graph folder or a cora_ml folder)");
    TextGraph g = load_graph(args->graph);
    write_text_graph(g, args->out, args->overwrite);
    std::fprintf(stderr, "graphtune data convert: wrote %s: graph %s, %d nodes, %zu edges, %d classes, %d-d features\n",
                 args->out.c_str(), g.name.c_str(), g.num_nodes(), g.edges.size(), g.num_classes(), g.feature_dim);
    exit_code = 0;
  });
}

static void add_build_command(CLI::App& data, int& exit_code) {
  struct Args {
    std::string graph, task, split = "train", out;
    bool overwrite = false;
    InstructionBuildOptions o;
  };
  auto args = std::make_shared<Args>();
  InstructionBuildOptions& o = args->o;
  CLI::App* sub = data.add_subcommand("build", "write GraphGPT instruction records (JSON) from a graph");
  sub->add_option("--graph", args->graph, "'embedded', a graphtune text-graph folder or a cora_ml folder")->required();
  sub->add_option("--task", args->task, "graph_matching, node_classification or link_prediction")->required();
  sub->add_option("--out", args->out, "output JSON file")->required();
  sub->add_option("--split", args->split, "train, val or test")->capture_default_str();
  sub->add_option("--hops", o.hops, "subgraph hops")->capture_default_str();
  sub->add_option("--fanout", o.fanout, "neighbours drawn per node and hop")->capture_default_str();
  sub->add_option("--max-nodes", o.max_nodes, "keep the first N nodes of each subgraph (0: all)")->capture_default_str();
  sub->add_option("--template", o.record_template,
                  "graphgpt (sampled k-hop subgraph), llaga (LLaGA's fixed-shape neighbour tree: 1 + fanout + ... + "
                  "fanout^hops slots, pads where a node has fewer neighbours) or hop_field (LLaGA's hop-field overview: "
                  "the centre once a hop, hops + 1 graph tokens)")
      ->capture_default_str();
  sub->add_option("--seed", o.seed, "sampling, shuffles and negatives; the same seed gives the same bytes")
      ->capture_default_str();
  sub->add_option("--split-seed", o.split_seed, "node split and held-out edges (keep it fixed across splits)")
      ->capture_default_str();
  sub->add_option("--train-frac", o.train_frac, "share of each class's nodes in train")->capture_default_str();
  sub->add_option("--val-frac", o.val_frac, "share of each class's nodes in val (test: the rest)")->capture_default_str();
  sub->add_option("--edge-val-frac", o.edge_val_frac, "share of links held out for val")->capture_default_str();
  sub->add_option("--edge-test-frac", o.edge_test_frac, "share of links held out for test")->capture_default_str();
  sub->add_option("--max-records", o.max_records, "at most N records (0: all)")->capture_default_str();
  sub->add_flag("--overwrite", args->overwrite, "replace an existing output file");

  sub->callback([args, &exit_code] {
    // Every refusal comes before the graph is loaded or anything is written.
    InstructionBuildOptions& o = args->o;
    o.task = parse_instruction_task(args->task);
    o.split = parse_split_part(args->split);
    validate(o);
    if (is_directory(args->out)) fail("--out", args->out + " is a folder (want a JSON file name)");
    if (path_exists(args->out) && !args->overwrite)
      fail("--out", args->out + " exists (add --overwrite to replace it)");
    if (args->graph != "embedded" && !is_directory(args->graph))
      fail("--graph", args->graph + ": no such folder (want 'embedded', a graphtune text-graph folder or a cora_ml folder)");
    TextGraph g = load_graph(args->graph);
    std::vector<BuiltInstruction> records = build_instructions(g, o);
    const std::string parent = parent_path(args->out);
    if (!path_exists(parent)) make_dirs(parent);
    write_instructions(args->out, records_of(records));
    const bool tree = o.record_template == "llaga", field = o.record_template == "hop_field";
    size_t yes = 0, nodes = 0;
    for (const auto& r : records) {
      if (r.label == 1) ++yes;
      // A tree's size is fixed; what varies is how many of its slots are real (the centre, and
      // one per edge pair).
      for (const auto& b : r.graphs) nodes += tree ? 1 + b.edge_index[0].size() / 2 : b.node_list.size();
    }
    const size_t graphs = records.empty() ? 0 : records.size() * records[0].graphs.size();
    std::string extra;
    if (o.task == InstructionTask::kLinkPrediction)
      extra = ", " + std::to_string(yes) + " yes / " + std::to_string(records.size() - yes) + " no";
    const double per_graph = graphs ? static_cast<double>(nodes) / graphs : 0.0;
    char size[96];
    if (tree)
      std::snprintf(size, sizeof size, "%lld-slot llaga trees, %.1f slots real per tree",
                    static_cast<long long>(template_tree_slots(o.hops, o.fanout)), per_graph);
    else if (field)
      std::snprintf(size, sizeof size, "hop fields of %d hops (%d graph tokens each)", o.hops, o.hops + 1);
    else
      std::snprintf(size, sizeof size, "%.1f nodes per subgraph", per_graph);
    std::fprintf(stderr, "graphtune data build: wrote %s: %zu %s records (%s split of %s, %d nodes)%s, %s\n",
                 args->out.c_str(), records.size(), instruction_task_name(o.task), split_part_name(o.split),
                 g.name.c_str(), g.num_nodes(), extra.c_str(), size);
    exit_code = 0;
  });
}

void add_data_command(CLI::App& app, int& exit_code) {
  CLI::App* data = app.add_subcommand("data", "make and prepare data sets");
  data->require_subcommand(1);
  add_synth_command(*data, exit_code);
  add_convert_command(*data, exit_code);
  add_build_command(*data, exit_code);
}

}  // namespace gt
