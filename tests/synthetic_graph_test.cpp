// The embedded synthetic corpus: determinism, the statistics its parameters promise, the
// folder format, neighbour sampling and splits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/sha256.hpp"
#include "data/graph_sampling.hpp"
#include "data/synthetic_graph.hpp"
#include "data/text_features.hpp"
#include "data/text_graph_io.hpp"
#include "data/topic_vocabulary.hpp"
#include "tests/temp_dir.hpp"

using namespace gt;

namespace {

const char* kFiles[] = {"classes.tsv", "nodes.tsv", "edges.tsv", "features.npy", "meta.json"};

using gt::test::TempDir;

std::string folder_digest(const std::string& dir) {
  std::string all;
  for (const char* f : kFiles) all += std::string(f) + ":" + sha256_hex(read_file(dir + "/" + f)) + "\n";
  return all;
}

SyntheticGraphParams small(uint64_t seed = 7) {
  SyntheticGraphParams p;
  p.seed = seed;
  p.nodes = 300;
  return p;
}

double dot(const float* a, const float* b, int32_t n) {
  double s = 0;
  for (int32_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

}  // namespace

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000, 'a')),
            "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

TEST(TopicVocabulary, ListsAreDisjointLowerCaseWords) {
  std::map<std::string, std::string> owner;
  auto claim = [&](const char* w, const std::string& list) {
    std::string s = w;
    EXPECT_EQ(text_words(s), std::vector<std::string>{s}) << "not one lower-case word: " << s;
    auto it = owner.emplace(s, list);
    EXPECT_TRUE(it.second) << s << " is in both " << it.first->second << " and " << list;
  };
  ASSERT_EQ(topic_specs().size(), 12u);
  for (const auto& t : topic_specs())
    for (const char* w : t.words) claim(w, t.name);
  for (const char* w : generic_adjectives()) claim(w, "generic adjectives");
  for (const char* w : generic_nouns()) claim(w, "generic nouns");
  for (const char* w : title_openers()) claim(w, "openers");
  for (const char* w : glue_words()) claim(w, "glue");
  EXPECT_GE(topic_words_available(), 48);
  EXPECT_GE(topic_words_available(), SyntheticGraphParams{}.topic_words);
}

TEST(SyntheticGraph, SameSeedWritesIdenticalBytes) {
  TempDir root;
  write_text_graph(make_synthetic_graph(small(7)), root.path + "/a");
  write_text_graph(make_synthetic_graph(small(7)), root.path + "/b");
  for (const char* f : kFiles)
    EXPECT_TRUE(read_file(root.path + "/a/" + f) == read_file(root.path + "/b/" + f)) << f;
  // Nothing but the five files, no temporary leftovers beside the folders.
  EXPECT_EQ(list_dir(root.path + "/a").size(), 5u);
  EXPECT_EQ(root.list().size(), 2u);
}

TEST(SyntheticGraph, DifferentSeedDifferentGraph) {
  TempDir root;
  write_text_graph(make_synthetic_graph(small(7)), root.path + "/a");
  write_text_graph(make_synthetic_graph(small(8)), root.path + "/b");
  for (const char* f : {"nodes.tsv", "edges.tsv", "features.npy"})
    EXPECT_FALSE(read_file(root.path + "/a/" + f) == read_file(root.path + "/b/" + f)) << f;
}

// Pins the bytes of one small corpus. A failure here on another machine means the output is not
// portable; after an intended change to the generator, bump kGeneratorVersion and update this.
TEST(SyntheticGraph, GoldenDigest) {
  SyntheticGraphParams p;
  p.seed = 1;
  p.nodes = 60;
  p.classes = 3;
  p.feature_dim = 16;
  TempDir root;
  write_text_graph(make_synthetic_graph(p), root.path + "/g");
  EXPECT_EQ(sha256_hex(folder_digest(root.path + "/g")), "5122dd3c0fb1bdc0be43cebdeaa241b4d15e323aacb007f4f1b42aa26924302e") << folder_digest(root.path + "/g");
}

TEST(SyntheticGraph, DefaultsAreTheDocumentedDemoSize) {
  SyntheticGraphParams p;
  EXPECT_EQ(p.classes, 7);
  EXPECT_EQ(p.nodes, 2000);
  EXPECT_EQ(p.feature_dim, 128);
  TextGraph g = make_synthetic_graph(p);
  check_text_graph(g, "synthetic");
  GraphStats s = graph_stats(g);
  std::printf("[stats] nodes %d edges %lld homophily %.4f mean_out %.3f max_in %d max_out %d max_degree %d "
              "p50_in %.0f p99_in %.0f isolated %d\n[stats] class_counts",
              s.num_nodes, static_cast<long long>(s.num_edges), s.homophily, s.mean_out_degree, s.max_in_degree,
              s.max_out_degree, s.max_degree, s.in_degree_p50, s.in_degree_p99, s.isolated_nodes);
  for (int32_t c : s.class_counts) std::printf(" %d", c);
  std::printf("\n");
  EXPECT_NEAR(s.mean_out_degree, p.mean_out_degree, 0.2);
}

TEST(SyntheticGraph, HomophilyFollowsTheParameter) {
  for (double h : {0.9, 0.8, 0.5, 0.2}) {
    SyntheticGraphParams p;
    p.homophily = h;
    GraphStats s = graph_stats(make_synthetic_graph(p));
    std::printf("[stats] homophily parameter %.2f measured %.4f\n", h, s.homophily);
    EXPECT_NEAR(s.homophily, h, 0.03) << "parameter " << h;
  }
}

// Preferential attachment: a few papers collect many citations, most collect few.
TEST(SyntheticGraph, InDegreeIsSkewed) {
  GraphStats s = graph_stats(make_synthetic_graph(SyntheticGraphParams{}));
  EXPECT_GE(s.max_in_degree, 5 * s.mean_out_degree);  // mean in-degree == mean out-degree
  EXPECT_LE(s.in_degree_p50, s.mean_out_degree);      // median below the mean: a long right tail
  EXPECT_GE(s.in_degree_p99, 5 * s.mean_out_degree);

  SyntheticGraphParams flat;
  flat.degree_skew = 0;
  GraphStats f = graph_stats(make_synthetic_graph(flat));
  std::printf("[stats] max in-degree: skew 0.8 -> %d, skew 0 -> %d\n", s.max_in_degree, f.max_in_degree);
  EXPECT_GT(s.max_in_degree, f.max_in_degree);
}

TEST(SyntheticGraph, EdgesAreSimpleAndCiteEarlierPapers) {
  TextGraph g = make_synthetic_graph(SyntheticGraphParams{});
  std::set<std::pair<int32_t, int32_t>> seen;
  for (const auto& e : g.edges) {
    EXPECT_NE(e.first, e.second);
    EXPECT_LT(e.second, e.first);  // publication order
    EXPECT_TRUE(seen.insert(e).second) << "duplicate " << e.first << "->" << e.second;
  }
  // The three neighbour lists agree with the edge list.
  int64_t out_total = 0, in_total = 0;
  for (int32_t i = 0; i < g.num_nodes(); ++i) {
    out_total += g.out_adj.degree(i);
    in_total += g.in_adj.degree(i);
    for (int32_t j : g.out_adj.row(i)) EXPECT_TRUE(seen.count({i, j}));
    for (int32_t j : g.in_adj.row(i)) EXPECT_TRUE(seen.count({j, i}));
    EXPECT_EQ(g.undirected_adj.degree(i), g.out_adj.degree(i) + g.in_adj.degree(i));  // no 2-cycles
  }
  EXPECT_EQ(out_total, static_cast<int64_t>(g.edges.size()));
  EXPECT_EQ(in_total, static_cast<int64_t>(g.edges.size()));
}

TEST(SyntheticGraph, EveryClassPresentAndRoughlyBalanced) {
  for (int32_t classes : {2, 7, 12}) {
    SyntheticGraphParams p;
    p.classes = classes;
    TextGraph g = make_synthetic_graph(p);
    ASSERT_EQ(g.num_classes(), classes);
    GraphStats s = graph_stats(g);
    const double fair = static_cast<double>(p.nodes) / classes;
    for (int32_t c = 0; c < classes; ++c) {
      EXPECT_GE(s.class_counts[c], 0.6 * fair) << "class " << c;
      EXPECT_LE(s.class_counts[c], 1.4 * fair) << "class " << c;
    }
  }
  // The smallest legal graph: one paper per class.
  SyntheticGraphParams tiny;
  tiny.nodes = tiny.classes = 3;
  GraphStats s = graph_stats(make_synthetic_graph(tiny));
  EXPECT_EQ(s.class_counts, (std::vector<int32_t>{1, 1, 1}));
}

TEST(SyntheticGraph, FeaturesAreUnitLengthAndClassInformative) {
  TextGraph g = make_synthetic_graph(SyntheticGraphParams{});
  ASSERT_EQ(g.feature_dim, 128);
  for (int32_t i = 0; i < g.num_nodes(); ++i)
    ASSERT_NEAR(dot(g.feature(i), g.feature(i), g.feature_dim), 1.0, 1e-5) << "node " << i;
  double same = 0, diff = 0;
  int64_t n_same = 0, n_diff = 0;
  for (int32_t i = 0; i < g.num_nodes(); i += 3)
    for (int32_t j = i + 1; j < g.num_nodes(); j += 5) {
      double d = dot(g.feature(i), g.feature(j), g.feature_dim);
      if (g.nodes[i].label == g.nodes[j].label) {
        same += d;
        ++n_same;
      } else {
        diff += d;
        ++n_diff;
      }
    }
  same /= n_same;
  diff /= n_diff;
  std::printf("[stats] mean feature cosine: same class %.4f, different class %.4f\n", same, diff);
  EXPECT_GT(same - diff, 0.05);
  // The features come from the text: recomputing from title + text gives the same row.
  std::vector<float> f(static_cast<size_t>(g.feature_dim));
  text_feature(g.nodes[5].title + " " + g.nodes[5].text, g.feature_dim, f.data());
  EXPECT_TRUE(std::equal(f.begin(), f.end(), g.feature(5)));
}

TEST(SyntheticGraph, WithoutNoiseTitlesUseOnlyOwnTopicAndGenericWords) {
  SyntheticGraphParams p;
  p.noise = 0;
  TextGraph g = make_synthetic_graph(p);
  std::set<std::string> shared;
  for (const auto* list : {&generic_adjectives(), &generic_nouns(), &title_openers(), &glue_words()})
    for (const char* w : *list) shared.insert(w);
  for (const Node& v : g.nodes) {
    const auto& words = topic_specs()[v.label].words;
    std::set<std::string> own(words.begin(), words.begin() + p.topic_words);
    for (const std::string& w : text_words(v.title + " " + v.text))
      ASSERT_TRUE(own.count(w) || shared.count(w)) << "node " << v.id << " (" << g.class_names[v.label]
                                                   << "): '" << w << "' in: " << v.title << " | " << v.text;
  }
}

// Text alone is a real but imperfect signal at the default noise; the neighbours' labels add to it.
TEST(SyntheticGraph, TextIsImperfectAndNeighboursHelp) {
  SyntheticGraphParams p;
  TextGraph g = make_synthetic_graph(p);
  std::map<std::string, int32_t> topic_of;
  for (int32_t c = 0; c < p.classes; ++c)
    for (int32_t k = 0; k < p.topic_words; ++k) topic_of[topic_specs()[c].words[k]] = c;
  auto argmax = [](const std::vector<int32_t>& v) {
    return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
  };
  int32_t by_title = 0, by_neighbours = 0;
  for (const Node& v : g.nodes) {
    std::vector<int32_t> t(static_cast<size_t>(p.classes)), n(t.size());
    for (const std::string& w : text_words(v.title))
      if (topic_of.count(w)) ++t[topic_of[w]];
    for (int32_t u : g.undirected_adj.row(v.id)) ++n[g.nodes[u].label];
    by_title += argmax(t) == v.label;
    by_neighbours += argmax(n) == v.label;
  }
  double title_acc = by_title / double(g.num_nodes()), nb_acc = by_neighbours / double(g.num_nodes());
  std::printf("[stats] majority-vote accuracy: title words %.4f, neighbour labels %.4f\n", title_acc, nb_acc);
  EXPECT_GT(title_acc, 0.6);
  EXPECT_LT(title_acc, 0.9);
  EXPECT_GT(nb_acc, title_acc);
}

TEST(SyntheticGraph, InvalidParametersNameTheFlag) {
  auto expect_flag = [](SyntheticGraphParams p, const std::string& flag) {
    try {
      make_synthetic_graph(p);
      ADD_FAILURE() << "accepted a bad " << flag;
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(flag + ":", 0), 0u) << e.what();
    }
  };
  SyntheticGraphParams p;
  p.nodes = 5;  // fewer than 7 classes
  expect_flag(p, "--nodes");
  p = {};
  p.nodes = 2000000000;  // refused before anything is allocated
  expect_flag(p, "--nodes");
  p = {};
  p.classes = 13;
  expect_flag(p, "--classes");
  p = {};
  p.classes = 1;
  expect_flag(p, "--classes");
  p = {};
  p.noise = 1.5;
  expect_flag(p, "--noise");
  p = {};
  p.noise = -0.1;
  expect_flag(p, "--noise");
  p = {};
  p.homophily = std::nan("");
  expect_flag(p, "--homophily");
  p = {};
  p.degree_skew = 2;
  expect_flag(p, "--degree-skew");
  p = {};
  p.mean_out_degree = 0.5;
  expect_flag(p, "--mean-out-degree");
  p = {};
  p.feature_dim = 0;
  expect_flag(p, "--feature-dim");
  p = {};
  p.nodes = 1000000;
  p.feature_dim = 4096;  // each allowed, together 16 GiB
  expect_flag(p, "--feature-dim");
  p = {};
  p.topic_words = 1000;
  expect_flag(p, "--topic-words");
  p = {};
  p.title_min_words = 5;
  p.title_max_words = 4;
  expect_flag(p, "--title-max-words");
}

TEST(SubgraphSampling, GraphGptShapeAndDeterminism) {
  TextGraph g = make_synthetic_graph(SyntheticGraphParams{});
  std::set<std::pair<int32_t, int32_t>> edges(g.edges.begin(), g.edges.end());
  size_t largest = 0;
  for (int32_t center : {0, 1, 17, 500, 1999}) {
    Rng r1(99), r2(99);
    Subgraph s = sample_subgraph(g, center, kGraphGptHops, kGraphGptFanout, r1);
    Subgraph t = sample_subgraph(g, center, kGraphGptHops, kGraphGptFanout, r2);
    EXPECT_EQ(s.node_list, t.node_list);
    EXPECT_EQ(s.edge_index, t.edge_index);
    ASSERT_FALSE(s.node_list.empty());
    EXPECT_EQ(s.center, center);
    EXPECT_EQ(s.node_list[0], center);
    EXPECT_LE(s.node_list.size(), 1u + 10u + 100u);
    largest = std::max(largest, s.node_list.size());
    EXPECT_EQ(std::set<int32_t>(s.node_list.begin(), s.node_list.end()).size(), s.node_list.size());
    ASSERT_EQ(s.edge_index[0].size(), s.edge_index[1].size());
    std::set<std::pair<int32_t, int32_t>> local;
    for (size_t k = 0; k < s.edge_index[0].size(); ++k) {
      int32_t a = s.edge_index[0][k], b = s.edge_index[1][k];
      ASSERT_GE(a, 0);
      ASSERT_GE(b, 0);
      ASSERT_LT(a, static_cast<int32_t>(s.node_list.size()));
      ASSERT_LT(b, static_cast<int32_t>(s.node_list.size()));
      int32_t u = s.node_list[a], v = s.node_list[b];
      EXPECT_TRUE(edges.count({u, v}) || edges.count({v, u})) << u << "-" << v << " is not a citation";
      local.insert({a, b});
    }
    for (const auto& e : local) EXPECT_TRUE(local.count({e.second, e.first})) << "one direction only";
    // The centre hears from every first-hop node.
    size_t hop1 = std::min<size_t>(10, static_cast<size_t>(g.undirected_adj.degree(center)));
    for (size_t k = 1; k <= hop1; ++k) EXPECT_TRUE(local.count({0, static_cast<int32_t>(k)}));
  }
  EXPECT_GT(largest, 50u);  // a well-cited paper fills most of its 111 places
  // Another generator state gives another sample around a hub.
  Rng a(1), b(2);
  EXPECT_NE(sample_subgraph(g, 0, 2, 10, a).node_list, sample_subgraph(g, 0, 2, 10, b).node_list);
  // Zero hops: the centre alone.
  Rng c(3);
  Subgraph alone = sample_subgraph(g, 42, 0, 10, c);
  EXPECT_EQ(alone.node_list, std::vector<int32_t>{42});
  EXPECT_TRUE(alone.edge_index[0].empty());
  EXPECT_THROW(sample_subgraph(g, g.num_nodes(), 2, 10, c), InputError);
}

TEST(NodeSplit, DisjointCoveringStratifiedDeterministic) {
  TextGraph g = make_synthetic_graph(SyntheticGraphParams{});
  NodeSplit s = split_nodes(g, 0.6, 0.2, 5);
  NodeSplit t = split_nodes(g, 0.6, 0.2, 5);
  EXPECT_EQ(s.train, t.train);
  EXPECT_EQ(s.val, t.val);
  EXPECT_EQ(s.test, t.test);
  EXPECT_NE(s.train, split_nodes(g, 0.6, 0.2, 6).train);
  EXPECT_EQ(s.train.size() + s.val.size() + s.test.size(), g.nodes.size());
  std::set<int32_t> all(s.train.begin(), s.train.end());
  all.insert(s.val.begin(), s.val.end());
  all.insert(s.test.begin(), s.test.end());
  EXPECT_EQ(all.size(), g.nodes.size());
  EXPECT_NEAR(s.train.size() / double(g.num_nodes()), 0.6, 0.01);
  EXPECT_NEAR(s.val.size() / double(g.num_nodes()), 0.2, 0.01);
  for (int32_t i : s.val) EXPECT_EQ(s.part[i], SplitPart::kVal);
  // Stratified: every class is in every part.
  for (const auto* part : {&s.train, &s.val, &s.test}) {
    std::set<int32_t> classes;
    for (int32_t i : *part) classes.insert(g.nodes[i].label);
    EXPECT_EQ(static_cast<int32_t>(classes.size()), g.num_classes());
  }
  EXPECT_THROW(split_nodes(g, 0.8, 0.3, 1), InputError);
  EXPECT_THROW(split_nodes(g, -0.1, 0.3, 1), InputError);
}

TEST(CorpusTexts, NonEmptyDeterministicAndLabelsOnlyWhereAllowed) {
  TextGraph g = make_synthetic_graph(small());
  std::vector<std::string> a = corpus_texts(g), b = corpus_texts(make_synthetic_graph(small()));
  EXPECT_EQ(a, b);
  ASSERT_GT(a.size(), g.nodes.size());
  for (const std::string& line : a) EXPECT_FALSE(line.empty());
  auto about = [](const std::vector<std::string>& lines) {
    return std::count_if(lines.begin(), lines.end(),
                         [](const std::string& l) { return l.find(" is a paper about ") != std::string::npos; });
  };
  EXPECT_EQ(about(a), static_cast<long>(g.nodes.size()));
  NodeSplit s = split_nodes(g, 0.5, 0.0, 1);
  std::vector<std::string> train_only = corpus_texts(g, s.train);
  EXPECT_EQ(about(train_only), static_cast<long>(s.train.size()));
  for (int32_t i : s.test)
    for (const std::string& line : train_only)
      ASSERT_NE(line.rfind(g.nodes[i].title + " is a paper about", 0), 0u) << "test label leaked: " << line;
}

TEST(TextGraphFolder, FormatReadableWithoutGraphtune) {
  TempDir root;
  TextGraph g = make_synthetic_graph(small());
  write_text_graph(g, root.path + "/g");
  const std::string dir = root.path + "/g";
  auto meta = nlohmann::json::parse(read_file(dir + "/meta.json"));
  EXPECT_EQ(meta["num_nodes"], 300);
  EXPECT_EQ(meta["num_edges"], g.edges.size());
  EXPECT_EQ(meta["generator"]["seed"], 7);
  for (const char* f : {"classes.tsv", "nodes.tsv", "edges.tsv", "features.npy"}) {
    std::string bytes = read_file(dir + "/" + f);
    EXPECT_EQ(meta["files"][f]["bytes"], bytes.size()) << f;
    EXPECT_EQ(meta["files"][f]["sha256"], sha256_hex(bytes)) << f;
  }
  std::string npy = read_file(dir + "/features.npy");
  ASSERT_EQ(npy.compare(0, 8, std::string("\x93NUMPY\x01\x00", 8)), 0);
  size_t header_len = static_cast<unsigned char>(npy[8]) | static_cast<unsigned char>(npy[9]) << 8;
  EXPECT_EQ((10 + header_len) % 64, 0u);
  EXPECT_NE(npy.find("'shape': (300, 128)"), std::string::npos);
  EXPECT_EQ(npy.size(), 10 + header_len + 300 * 128 * 4);
  std::string nodes = read_file(dir + "/nodes.tsv");
  EXPECT_EQ(nodes.rfind("idx\tlabel\tlabel_name\ttitle\ttext\n0\t", 0), 0u);
  EXPECT_EQ(std::count(nodes.begin(), nodes.end(), '\n'), 301);
  EXPECT_EQ(std::count(nodes.begin(), nodes.end(), '\t'), 4 * 301);
}

TEST(TextGraphFolder, RefusesToOverwriteUnlessAsked) {
  TempDir root;
  const std::string dir = root.path + "/g";
  make_dirs(dir);
  write_file_atomic(dir + "/keep.txt", "mine");
  TextGraph g = make_synthetic_graph(small());
  EXPECT_THROW(write_text_graph(g, dir), InputError);
  EXPECT_EQ(read_file(dir + "/keep.txt"), "mine");
  EXPECT_EQ(root.list().size(), 1u);  // no temp left

  write_text_graph(g, dir + "/", /*overwrite=*/true);
  EXPECT_FALSE(path_exists(dir + "/keep.txt"));
  EXPECT_TRUE(path_exists(dir + "/meta.json"));
  EXPECT_EQ(root.list().size(), 1u);

  // An existing empty folder is simply filled; missing parents are created.
  make_dirs(root.path + "/empty");
  write_text_graph(g, root.path + "/empty");
  write_text_graph(g, root.path + "/new/deeper/g");
  EXPECT_EQ(folder_digest(root.path + "/empty"), folder_digest(root.path + "/new/deeper/g"));

  write_file_atomic(root.path + "/file", "x");
  EXPECT_THROW(write_text_graph(g, root.path + "/file", true), InputError);
}

TEST(TextGraphFolder, ReadsBackWhatItWrote) {
  TempDir root;
  TextGraph g = make_synthetic_graph(small());
  write_text_graph(g, root.path + "/g");
  TextGraph r = read_text_graph(root.path + "/g");
  EXPECT_EQ(r.name, g.name);
  EXPECT_EQ(r.params_json, g.params_json);
  EXPECT_EQ(r.class_names, g.class_names);
  EXPECT_EQ(r.class_descriptions, g.class_descriptions);
  ASSERT_EQ(r.nodes.size(), g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    EXPECT_EQ(r.nodes[i].label, g.nodes[i].label);
    EXPECT_EQ(r.nodes[i].title, g.nodes[i].title);
    EXPECT_EQ(r.nodes[i].text, g.nodes[i].text);
  }
  EXPECT_EQ(r.edges, g.edges);
  EXPECT_EQ(r.feature_dim, g.feature_dim);
  EXPECT_TRUE(r.features == g.features);
  EXPECT_EQ(r.undirected_adj.targets, g.undirected_adj.targets);
  // Written again, the same bytes.
  write_text_graph(r, root.path + "/again");
  EXPECT_EQ(folder_digest(root.path + "/g"), folder_digest(root.path + "/again"));
}

TEST(TextGraphFolder, DamagedFolderIsAnInputErrorNamingTheFile) {
  TempDir root;
  const std::string dir = root.path + "/g";
  write_text_graph(make_synthetic_graph(small()), dir);
  auto expect_error_naming = [&](const std::string& file) {
    try {
      read_text_graph(dir);
      ADD_FAILURE() << "accepted a damaged " << file;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
    }
  };
  std::string edges = read_file(dir + "/edges.tsv");
  write_file_atomic(dir + "/edges.tsv", edges + "1\t1\n");
  expect_error_naming("edges.tsv");  // size differs from meta.json
  write_file_atomic(dir + "/edges.tsv", edges);
  std::remove((dir + "/meta.json").c_str());
  expect_error_naming("meta.json");
  write_file_atomic(dir + "/meta.json", "{}");  // no checksums: the content itself is checked
  write_file_atomic(dir + "/edges.tsv", edges + "1\t1\n");
  expect_error_naming("self loop");
  write_file_atomic(dir + "/edges.tsv", edges + "1\tx\n");
  expect_error_naming("edges.tsv");
  write_file_atomic(dir + "/edges.tsv", "from\tto\n");
  expect_error_naming("edges.tsv");
  write_file_atomic(dir + "/edges.tsv", edges);
  std::string npy = read_file(dir + "/features.npy");
  write_file_atomic(dir + "/features.npy", npy.substr(0, npy.size() - 4));
  expect_error_naming("features.npy");
}
