#include "weights/gguf_tensor.hpp"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "common/error.hpp"
#include "formats/gguf.hpp"
#include "formats/gguf_dequant.hpp"

namespace gt {

at::Tensor gguf_dequantized(const GgufFile& file, const std::string& name, c10::ScalarType dtype) {
  const GgufTensorInfo& t = file.tensor(name);
  const GgmlTypeInfo* info = ggml_type_info(t.type);
  if (!info->dequantizable)
    fail(file.path(), "tensor '" + name + "' has ggml type " + info->name +
                          ", which graphtune cannot dequantize (it reads " + ggml_dequantizable_types() + ")");
  auto out = torch::empty({t.numel()}, torch::kFloat32);
  const uint8_t* src = file.tensor_data(t);
  float* dst = out.data_ptr<float>();
  // Blocks are independent: decode chunks of them on all intra-op threads.
  const int64_t blocks = t.numel() / info->block_elements;
  at::parallel_for(0, blocks, 4096, [&](int64_t begin, int64_t end) {
    dequantize_ggml(t.type, src + begin * info->block_bytes, (end - begin) * info->block_elements,
                    dst + begin * info->block_elements);
  });
  out = out.view(t.torch_shape());
  return dtype == torch::kFloat32 ? out : out.to(dtype);
}

}  // namespace gt
