// graphtune's side of tests/test_graph_encoder_reference.py: the Python test writes weights,
// inputs and a Python-saved graph_projector.bin into DIR; this computes graphtune's outputs into
// the same folder, and the Python test compares them with its independent implementation.
// A separate program (not a gtest) so that ctest lists no test that only ever skips.
#include <torch/torch.h>

#include <cstdio>

#include "common/error.hpp"
#include "model/graph_encoder.hpp"
#include "model/graph_encoder_folder.hpp"
#include "model/graph_projector.hpp"
#include "tests/input_error.hpp"
#include "weights/safetensors.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  auto in = gt::load_safetensors(dir + "/inputs.safetensors");
  torch::NoGradGuard ng;
  gt::GraphEncoder enc;
  enc->eval();
  enc->load_file(dir + "/encoder.safetensors");
  auto out = enc->forward(in.at("x"), in.at("edge_index"));
  gt::GraphEncoder clip;
  clip->eval();
  clip->load_file(dir + "/clip_like.pkl", "gnn.");
  auto out_clip = clip->forward(in.at("x"), in.at("edge_index"));
  // The same dict saved as an OrderedDict, as module.state_dict() is and clip_gt_arxiv_pub.pkl is.
  gt::GraphEncoder ordered;
  ordered->eval();
  ordered->load_file(dir + "/clip_ordered.pkl", "gnn.");
  auto out_ordered = ordered->forward(in.at("x"), in.at("edge_index"));
  // GraphGPT's released folder: config.json and clip_gt_arxiv_pub.pkl, read as [model].graph_encoder.
  gt::GraphEncoder folder = gt::open_graph_encoder(dir + "/Arxiv-PubMed-GraphCLIP-GT", "");
  folder->eval();
  auto out_folder = folder->forward(in.at("x"), in.at("edge_index"));
  // GraphGPT's clip_gcn_arxiv folder: its GCN, the kind its config.json names.
  gt::GraphEncoder gcn = gt::open_graph_encoder(dir + "/Arxiv-GraphCLIP-GCN", "");
  gcn->eval();
  auto out_gcn = gcn->forward(in.at("x"), in.at("edge_index"));
  // Its config disagreeing with its weights: one line naming the file and the tensor.
  std::string e = gt::test::input_error_of([&] { gt::open_graph_encoder(dir + "/config_disagrees", ""); });
  if (e.find("clip_gt_arxiv_pub.pkl") == std::string::npos || e.find("has shape") == std::string::npos) {
    std::fprintf(stderr, "FAIL: a config that disagrees with the weights: %s\n", e.c_str());
    return 1;
  }
  gt::save_safetensors(dir + "/cpp_out.safetensors", {{"out", out},
                                                      {"out_clip", out_clip},
                                                      {"out_clip_ordered", out_ordered},
                                                      {"out_clip_folder", out_folder},
                                                      {"out_gcn_folder", out_gcn}});

  auto py = gt::load_graph_projector_bin(dir + "/py_graph_projector.bin");
  gt::save_safetensors(dir + "/cpp_loaded_projector.safetensors", py->named_weights());
  gt::GraphProjector mine(128, 96);
  mine->init_weights(7);
  gt::save_graph_projector_bin(dir + "/cpp_graph_projector.bin", mine);
  gt::save_safetensors(dir + "/cpp_projector.safetensors", mine->named_weights());
  std::printf("graph encoder reference driver: ok\n");
  return 0;
}
