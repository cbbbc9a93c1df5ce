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

}  // namespace gt
