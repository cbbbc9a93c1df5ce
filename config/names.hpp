#pragma once
// The closed sets of names that a job config, a checkpoint's index or a command-line flag may
// hold, as enums, each with the one table that turns a name into its value and back. Everything
// past the readers compares values, never names: a new value is a line here plus what it does.
#include <optional>
#include <string>

#include "layout/schedule.hpp"

namespace gt {

// [training].stage: what a run trains. graphtune calls these phases, so that "stage" always
// means a pipeline stage; GraphGPT calls graph_matching and task its stages 1 and 2.
enum class Phase { kLm, kGrounding, kGraphMatching, kTask };

// GraphGPT's tuning phases: the LLM and the encoder frozen, the projector and the graph
// tokens' rows trained, on instruction records.
inline bool is_graph_phase(Phase p) { return p == Phase::kGraphMatching || p == Phase::kTask; }

// [model].dtype and --dtype: fp32, or bf16 (mixed precision with fp32 master weights when
// training). fp16 is a storage type for weights that are written (graphtune convert) only.
enum class DType { kFp32, kBf16, kFp16 };

// [training].trainable in the graph phases: the projector and the <g_start>/<g_end> rows
// (GraphGPT's), those and the graph encoder (end to end through the frozen LLM, at
// [optimizer].encoder_lr), the projector alone, or the projector and LoRA adapters on the
// frozen LLM ([lora], model/lora.hpp).
enum class Trainable { kGraphGpt, kGraphGptEncoder, kProjector, kProjectorLora, kProjectorLoraEncoder };

// [training].on_nonfinite: a step whose loss or gradient norm is not finite is skipped, or ends
// the run.
enum class NonFinitePolicy { kSkipStep, kAbort };

// [parallelism].backend: which library moves the tensors: MPI (CPU tensors) or NCCL (CUDA).
enum class Backend { kMpi, kNccl };

// [training].device and --device: where a rank computes. auto: a GPU where libtorch sees one,
// else the CPU; cuda: a GPU, refused with its reason where there is none (docs/gpu.md).
enum class DeviceKind { kAuto, kCpu, kCuda };

// [eval].protocol: the settings evaluation starts from. graphtune: greedy (answers comparable
// across runs) in the training prompt. graphgpt: GraphGPT's run_graphgpt.py, to reproduce the
// paper's setting: the graphchat_v1 prompt, sampling at temperature 0.2, up to 1,024 new tokens.
enum class EvalProtocol { kGraphtune, kGraphGpt };

template <typename E>
struct NamedValue {
  E value;
  const char* name;
};

// One table a set, in the order messages list the names.
template <typename E>
struct NameTable;
template <>
struct NameTable<Phase> {
  static constexpr NamedValue<Phase> entries[] = {
      {Phase::kLm, "lm"}, {Phase::kGrounding, "grounding"}, {Phase::kGraphMatching, "graph_matching"}, {Phase::kTask, "task"}};
};
template <>
struct NameTable<DType> {
  static constexpr NamedValue<DType> entries[] = {{DType::kFp32, "fp32"}, {DType::kBf16, "bf16"}, {DType::kFp16, "fp16"}};
};
template <>
struct NameTable<Trainable> {
  static constexpr NamedValue<Trainable> entries[] = {
      {Trainable::kGraphGpt, "graphgpt"}, {Trainable::kGraphGptEncoder, "graphgpt+encoder"},
      {Trainable::kProjector, "projector"}, {Trainable::kProjectorLora, "projector+lora"},
      {Trainable::kProjectorLoraEncoder, "projector+lora+encoder"}};
};
template <>
struct NameTable<NonFinitePolicy> {
  static constexpr NamedValue<NonFinitePolicy> entries[] = {{NonFinitePolicy::kSkipStep, "skip_step"},
                                                            {NonFinitePolicy::kAbort, "abort"}};
};
template <>
struct NameTable<Backend> {
  static constexpr NamedValue<Backend> entries[] = {{Backend::kMpi, "mpi"}, {Backend::kNccl, "nccl"}};
};
template <>
struct NameTable<DeviceKind> {
  static constexpr NamedValue<DeviceKind> entries[] = {
      {DeviceKind::kAuto, "auto"}, {DeviceKind::kCpu, "cpu"}, {DeviceKind::kCuda, "cuda"}};
};
template <>
struct NameTable<EvalProtocol> {
  static constexpr NamedValue<EvalProtocol> entries[] = {{EvalProtocol::kGraphtune, "graphtune"},
                                                         {EvalProtocol::kGraphGpt, "graphgpt"}};
};
template <>
struct NameTable<ScheduleKind> {
  static constexpr NamedValue<ScheduleKind> entries[] = {{ScheduleKind::kGPipe, "gpipe"},
                                                         {ScheduleKind::kOneFOneB, "1f1b"}};
};

template <typename E>
const char* name_of(E value) {
  for (const auto& e : NameTable<E>::entries)
    if (e.value == value) return e.name;
  return "?";
}

// The value of `name`; none for a name the set does not have.
template <typename E>
std::optional<E> value_named(const std::string& name) {
  for (const auto& e : NameTable<E>::entries)
    if (name == e.name) return e.value;
  return std::nullopt;
}

}  // namespace gt
