#pragma once
// Graph stores the instruction builder reads: the Cora-ML citation graph as shipped in the shared
// assets (../shared/assets/graph/cora_ml), and load_graph(), which picks the right reader for a
// --graph argument.
//
// Cora-ML folder (all UTF-8, tab-separated, '\n'-terminated):
//   nodes.tsv    header `idx paper_id label label_name keywords`, one row per paper in idx order;
//                keywords are the paper's words (space-separated, alphabetical in the asset)
//   edges.tsv    header `src dst` (src cites dst)
//   classes.txt  no header: `idx path`, e.g. `4  Artificial_Intelligence/Machine_Learning/Neural_Networks`
// The resulting TextGraph (name "cora"):
//   class_names[k]        = the last component of the class path ("Neural_Networks"); it must equal
//                           the label_name of every node of that class
//   class_descriptions[k] = the whole path
//   Node::text            = the keywords
//   Node::title           = the first kCoraTitleWords keywords joined by single spaces (Cora-ML
//                           ships no titles; graph matching needs a short per-paper string)
//   features              = text_feature(keywords, 128): the same fixed text encoder as the
//                           synthetic corpus (the title is a prefix of the keywords, so it is not
//                           added twice)
// Every problem is one InputError naming the file and line.
#include <string>

#include "data/text_graph.hpp"

namespace gt {

constexpr int kCoraTitleWords = 8;
constexpr int kCoraFeatureDim = 128;

TextGraph load_cora_ml(const std::string& dir);

// True when `dir` holds nodes.tsv, edges.tsv and classes.txt (and no meta.json).
bool is_cora_ml_folder(const std::string& dir);

// A --graph argument: "embedded" (make_synthetic_graph with the default SyntheticGraphParams),
// a graphtune text-graph folder (it has meta.json: read_text_graph) or a Cora-ML folder.
// Anything else is an InputError naming `spec`.
TextGraph load_graph(const std::string& spec);

}  // namespace gt
