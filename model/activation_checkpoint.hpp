#pragma once
// Activation checkpointing for one block of layers: libtorch has no torch.utils.checkpoint, so
// this is a custom autograd Function. Why: a decoder layer keeps every intermediate it needs for
// backward (norms, q/k/v, attention weights, the [B, T, hidden] MLP activations), which for long
// sequences dwarfs the weights. Checkpointed, the forward keeps only the layer's input; backward
// reruns the layer from it with grad on, then backpropagates through that one recomputation.
// Cost: one extra forward of every checkpointed layer.
//
// The body must be deterministic given its input (the LLaMA layers have no dropout, so no RNG
// state needs replaying) and must read its parameters from `params` (or the same tensors), so
// that their gradients reach them: they are the Function's inputs. Anything else the body uses
// (masks, positions, rotary tables) is a constant and gets no gradient.
#include <torch/types.h>

#include <functional>
#include <vector>

namespace gt {

using CheckpointBody = std::function<torch::Tensor(const torch::Tensor&)>;

// body(x), keeping only x (and references to params) for backward. x may or may not require
// grad (it does not when only later parameters train), and so may each of params; gradients
// come back only for those that do. Outside grad mode this is just body(x).
torch::Tensor checkpoint(const CheckpointBody& body, const torch::Tensor& x, const std::vector<torch::Tensor>& params);

}  // namespace gt
