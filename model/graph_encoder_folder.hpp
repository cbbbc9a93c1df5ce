#pragma once
// GraphGPT's released graph encoder as its users download it: a folder such as
// Arxiv-PubMed-GraphCLIP-GT/ holding config.json (gnn_input, att_d_model, gnn_output, gt_layers,
// head, att_norm, if_pos, gnn_type "gt", and the CLIP text tower's fields, which are not read) and
// the CLIP model's torch.save'd state dict (clip_gt_arxiv_pub.pkl), the encoder under "gnn.". A
// clip_gcn_arxiv folder's config.json says gnn_type "gcn" and gives gnn_input, gnn_hid and
// gnn_output.
#include <string>

#include "model/graph_encoder.hpp"

namespace gt {

// [model].graph_encoder: a folder as above, read by its config and its one weights file (prefix
// "gnn." unless `prefix` says otherwise), or a weights file (safetensors or torch.save; tensors
// under `prefix`), whose kind, widths and layer count are read off its tensors (8 heads). Weights that disagree with the
// config, a config key of the wrong type, or a folder without exactly one weights file is an
// InputError naming the file and the key or tensor.
GraphEncoder open_graph_encoder(const std::string& path, const std::string& prefix);

// The graph fields of such a config.json.
GraphEncoderConfig read_graph_encoder_config(const std::string& config_json);

// The encoder as GraphGPT's own code loads a graph tower: the folder `parent`/NAME, NAME the
// --graph_tower GraphGPT matches ("clip_gt_arxiv_pub" for a graph transformer, "clip_gcn_arxiv"
// for a GCN), holding config.json and NAME.pkl, a torch.save'd CLIP state dict. GraphGPT builds
// the whole CLIP model from config.json and loads the pickle strictly, then keeps only its `gnn`:
// the text tower (which graphtune's grounding does not train in CLIP's form) is written at its
// smallest, no layers and width 8, only so that the strict load finds every tensor it expects.
// Returns the folder. InputError for a llaga encoder (not one of GraphGPT's towers).
std::string write_graphgpt_graph_tower(const GraphEncoderImpl& encoder, const std::string& parent);

}  // namespace gt
