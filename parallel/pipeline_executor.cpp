#include "parallel/pipeline_executor.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

namespace gt {
namespace {

// Four tags per micro-batch: MPI guarantees tags up to 32767 only, so this stays valid for
// 8192 micro-batches on any MPI rather than relying on OpenMPI's larger bound.
int message_tag(PipelineStream stream, int mb, bool data) {
  return (mb * 2 + static_cast<int>(stream)) * 2 + (data ? 1 : 0);
}

const char* stream_name(PipelineStream stream) {
  return stream == PipelineStream::Activation ? "activation" : "gradient";
}

std::string shape_string(at::IntArrayRef sizes, at::ScalarType dtype) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "] " + c10::toString(dtype);
}

std::string where(int stage, int mb) {
  return "pipeline stage " + std::to_string(stage) + ": micro-batch " + std::to_string(mb);
}

}  // namespace

std::vector<std::unique_ptr<Work>> post_pipeline_message(Communicator& comm, PipelineStream stream, int mb,
                                                         const at::Tensor& tensor, int peer, int64_t* bytes_sent) {
  if (!tensor.defined())
    throw std::logic_error(where(comm.rank(), mb) + ": the " + stream_name(stream) + " to send is undefined");
  if (tensor.dim() > kPipelineMaxDims)
    throw std::logic_error(where(comm.rank(), mb) + ": the " + stream_name(stream) + " to send has " +
                           std::to_string(tensor.dim()) + " dimensions, more than the header's " +
                           std::to_string(kPipelineMaxDims));
  at::Tensor header = torch::zeros({kPipelineHeaderLength}, torch::kLong);
  auto h = header.accessor<int64_t, 1>();
  h[0] = static_cast<int64_t>(tensor.scalar_type());
  h[1] = tensor.dim();
  for (int64_t d = 0; d < tensor.dim(); ++d) h[2 + d] = tensor.size(d);
  // Detached: the receiver rebuilds its own leaf, and the send must not keep this graph alive.
  at::Tensor data = tensor.detach().contiguous();
  header = header.to(data.device());  // a GPU backend moves GPU tensors only
  std::vector<std::unique_ptr<Work>> works;
  works.push_back(comm.isend(header, peer, message_tag(stream, mb, false)));
  works.push_back(comm.isend(data, peer, message_tag(stream, mb, true)));
  if (bytes_sent) *bytes_sent += static_cast<int64_t>(header.nbytes() + data.nbytes());
  return works;
}

at::Tensor recv_pipeline_message(Communicator& comm, PipelineStream stream, int mb, int peer,
                                 const at::Tensor& expected, at::Device device) {
  at::Tensor header = torch::empty({kPipelineHeaderLength}, torch::TensorOptions().dtype(torch::kLong).device(device));
  comm.recv(header, peer, message_tag(stream, mb, false));
  header = header.cpu();
  auto h = header.accessor<int64_t, 1>();
  const std::string from = where(comm.rank(), mb) + ": the " + stream_name(stream) + " received from stage " +
                           std::to_string(peer);
  const int64_t code = h[0], ndim = h[1];
  if (code < 0 || code >= static_cast<int64_t>(at::ScalarType::NumOptions) || ndim < 0 || ndim > kPipelineMaxDims)
    throw std::logic_error(from + " has a malformed header (dtype code " + std::to_string(code) + ", " +
                           std::to_string(ndim) + " dimensions)");
  std::vector<int64_t> sizes(ndim);
  for (int64_t d = 0; d < ndim; ++d) {
    sizes[d] = h[2 + d];
    if (sizes[d] < 0)
      throw std::logic_error(from + " has a negative size " + std::to_string(sizes[d]) + " in its header");
  }
  const auto dtype = static_cast<at::ScalarType>(code);
  if (expected.defined() && (at::IntArrayRef(sizes) != expected.sizes() || dtype != expected.scalar_type()))
    throw std::logic_error(from + " has shape " + shape_string(sizes, dtype) + " but stage " +
                           std::to_string(comm.rank()) + " expected " +
                           shape_string(expected.sizes(), expected.scalar_type()));
  at::Tensor data = torch::empty(sizes, torch::TensorOptions().dtype(dtype).device(device));
  comm.recv(data, peer, message_tag(stream, mb, true));
  return data;
}

PipelineExecutor::PipelineExecutor(Communicator& pp, StageActions actions)
    : pp_(pp), actions_(std::move(actions)), stage_(pp.rank()), stages_(pp.size()) {
  for (const Action& a : actions_)
    if (a.kind == ActionKind::Forward) ++microbatches_;
  std::vector<int> forwards(microbatches_), backwards(microbatches_);
  for (const Action& a : actions_) {
    const std::string name = "pipeline stage " + std::to_string(stage_) + " of " + std::to_string(stages_) +
                             ": action " + to_string(a);
    if (a.microbatch < 0 || a.microbatch >= microbatches_)
      throw std::invalid_argument(name + ": micro-batch out of 0.." + std::to_string(microbatches_ - 1));
    int peer = -1;
    switch (a.kind) {
      case ActionKind::Forward: ++forwards[a.microbatch]; break;
      case ActionKind::Backward: ++backwards[a.microbatch]; break;
      case ActionKind::SendActivation:
      case ActionKind::RecvGrad: peer = stage_ + 1; break;
      case ActionKind::RecvActivation:
      case ActionKind::SendGrad: peer = stage_ - 1; break;
    }
    if (a.peer != peer || (peer != -1 && peer >= stages_))
      throw std::invalid_argument(name + ": peer " + std::to_string(a.peer) + " is not the neighbour stage " +
                                  (peer >= 0 && peer < stages_ ? std::to_string(peer) : "(there is none)"));
  }
  for (int mb = 0; mb < microbatches_; ++mb)
    if (forwards[mb] != 1 || backwards[mb] != 1)
      throw std::invalid_argument("pipeline stage " + std::to_string(stage_) + ": micro-batch " +
                                  std::to_string(mb) + " has " + std::to_string(forwards[mb]) + " forwards and " +
                                  std::to_string(backwards[mb]) + " backwards, not one of each");
}

std::vector<double> PipelineExecutor::run(const StageFunctions& stage) {
  const bool first = stage_ == 0, last = stage_ == stages_ - 1;
  stats_ = PipelineStats{};

  // What a micro-batch holds on this stage between its receive and its last send. Erased as
  // soon as it is of no further use, so at most the in-flight micro-batches keep activations.
  struct MicroBatch {
    at::Tensor input;        // the received activation, a leaf (stage > 0)
    at::Tensor output;       // forward's result with its graph, until Backward
    at::Tensor output_grad;  // received from the next stage, until Backward
    at::Tensor input_grad;   // computed by Backward, until SendGrad
  };
  std::map<int, MicroBatch> live;
  std::vector<std::unique_ptr<Work>> sends;
  // A sent activation's Work keeps the tensor alive. Once the next stage's gradient for that
  // micro-batch has arrived, the send has necessarily completed, so it is waited for (at once)
  // and dropped at the micro-batch's Backward: otherwise stage 0 would hold every micro-batch's
  // output until the end of the step, which is what 1F1B is there to avoid.
  std::map<int, std::vector<std::unique_ptr<Work>>> activation_sends;
  std::vector<double> losses(last ? microbatches_ : 0);
  int in_flight = 0;

  auto missing = [&](const Action& a, const char* what) {
    return std::logic_error(where(stage_, a.microbatch) + ": " + to_string(a) + " before " + what);
  };

  using Clock = std::chrono::steady_clock;
  const auto step_start = Clock::now();
  try {
    for (const Action& a : actions_) {
      MicroBatch& mbs = live[a.microbatch];
      const auto action_start = Clock::now();
      const bool computes = a.kind == ActionKind::Forward || a.kind == ActionKind::Backward;
      switch (a.kind) {
        case ActionKind::RecvActivation:
          mbs.input = recv_pipeline_message(pp_, PipelineStream::Activation, a.microbatch, a.peer, at::Tensor(), device_);
          mbs.input.requires_grad_(true);
          break;

        case ActionKind::Forward: {
          if (!first && !mbs.input.defined()) throw missing(a, "its activation was received");
          mbs.output = stage.forward(a.microbatch, mbs.input);
          if (!mbs.output.defined())
            throw std::logic_error(where(stage_, a.microbatch) + ": forward returned an undefined tensor");
          if (last) {
            if (mbs.output.numel() != 1)
              throw std::logic_error(where(stage_, a.microbatch) + ": the last stage's forward must return a " +
                                     "scalar loss, got " + shape_string(mbs.output.sizes(), mbs.output.scalar_type()));
            losses[a.microbatch] = mbs.output.item<double>();
          }
          stats_.peak_in_flight = std::max(stats_.peak_in_flight, ++in_flight);
          break;
        }

        case ActionKind::SendActivation: {
          if (!mbs.output.defined()) throw missing(a, "its forward");
          auto works = post_pipeline_message(pp_, PipelineStream::Activation, a.microbatch, mbs.output, a.peer,
                                             &stats_.bytes_sent);
          for (auto& w : works) activation_sends[a.microbatch].push_back(std::move(w));
          break;
        }

        case ActionKind::RecvGrad:
          if (!mbs.output.defined()) throw missing(a, "its forward");
          mbs.output_grad =
              recv_pipeline_message(pp_, PipelineStream::Grad, a.microbatch, a.peer, mbs.output, device_);
          break;

        case ActionKind::Backward: {
          if (!mbs.output.defined()) throw missing(a, "its forward");
          if (!last && !mbs.output_grad.defined()) throw missing(a, "its output's gradient was received");
          // An output that needs no gradient (every parameter up to here frozen, stage 0) has
          // no graph to walk; the previous stage still gets its zeros below.
          if (stage.before_backward) stage.before_backward(a.microbatch);
          if (mbs.output.requires_grad()) {
            if (last) torch::autograd::backward({mbs.output});
            else torch::autograd::backward({mbs.output}, {mbs.output_grad});
          }
          if (!first) {
            at::Tensor g = mbs.input.grad();
            mbs.input_grad = g.defined() ? g : torch::zeros_like(mbs.input);
          }
          // The point of 1F1B: this micro-batch's activations go now, not at the end of the step.
          if (auto it = activation_sends.find(a.microbatch); it != activation_sends.end()) {
            for (auto& w : it->second) w->wait();
            activation_sends.erase(it);
          }
          mbs.input = at::Tensor();
          mbs.output = at::Tensor();
          mbs.output_grad = at::Tensor();
          --in_flight;
          if (first) live.erase(a.microbatch);
          break;
        }

        case ActionKind::SendGrad: {
          if (!mbs.input_grad.defined()) throw missing(a, "its backward");
          auto works = post_pipeline_message(pp_, PipelineStream::Grad, a.microbatch, mbs.input_grad, a.peer,
                                             &stats_.bytes_sent);
          for (auto& w : works) sends.push_back(std::move(w));
          live.erase(a.microbatch);
          break;
        }
      }
      if (computes) stats_.compute_seconds += std::chrono::duration<double>(Clock::now() - action_start).count();
    }
    for (auto& w : sends) w->wait();
    for (auto& [mb, works] : activation_sends)
      for (auto& w : works) w->wait();
    stats_.run_seconds = std::chrono::duration<double>(Clock::now() - step_start).count();
  } catch (...) {
    // The step is broken and the job is about to end. Waiting for the posted sends here (as
    // destroying a Work would) could block until the timeout on a peer that is failing too,
    // and then end in a timeout message that hides this error; so they are leaked with their
    // buffers, which MPI may still read.
    for (auto& w : sends) (void)w.release();
    for (auto& [mb, works] : activation_sends)
      for (auto& w : works) (void)w.release();
    throw;
  }
  return losses;
}

}  // namespace gt
