#pragma once
// A GGUF tensor as a torch tensor: decoded (formats/gguf_dequant.hpp) to float32 on every
// intra-op thread, shaped in PyTorch order (GGUF's dims reversed).
#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <string>

namespace gt {

class GgufFile;

// Then cast to dtype (e.g. bf16). InputError for a missing tensor, or a ggml type graphtune
// cannot decode, naming the file, the tensor and the type.
at::Tensor gguf_dequantized(const GgufFile& file, const std::string& name, c10::ScalarType dtype = c10::kFloat);

}  // namespace gt
