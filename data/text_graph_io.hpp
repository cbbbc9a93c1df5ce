#pragma once
// A TextGraph on disk: one folder of plain files that other tools read without graphtune
// (format in docs/embedded-corpus.md):
//   nodes.tsv     idx, label, label_name, title, text   (header row, tab-separated)
//   edges.tsv     src, dst                               (src cites dst)
//   classes.tsv   idx, name, description
//   features.npy  float32, C order, shape (nodes, feature_dim)   (numpy.load reads it)
//   meta.json     format, counts, generator parameters, statistics, size + sha256 per file
#include <string>

#include "data/text_graph.hpp"

namespace gt {

// Writes the folder whole or not at all: everything goes to DIR.tmp.<pid>, is fsynced, and the
// folder is renamed into place. An existing non-empty DIR is an InputError unless `overwrite`;
// with it the old folder is replaced (moved aside, then deleted, after the new one is complete).
// Missing parent folders are created. The bytes depend only on the graph.
void write_text_graph(const TextGraph& g, const std::string& dir, bool overwrite = false);

// The refusal write_text_graph would make, checked up front (so a command can fail before
// generating anything): DIR is a file, or a non-empty folder without `overwrite`.
void check_output_folder(const std::string& dir, bool overwrite);

// Reads a folder written by write_text_graph (or made by hand in the same format) and builds
// the adjacency. Checks each file's size and sha256 against meta.json when it lists them;
// every problem is an InputError naming the file (and line).
TextGraph read_text_graph(const std::string& dir);

// The bytes of features.npy for a rows x cols float32 matrix (NPY format 1.0, little-endian).
std::string npy_float32(const float* data, int64_t rows, int64_t cols);

}  // namespace gt
