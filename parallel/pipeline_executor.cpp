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

// The header of a message: dtype code, ndim, dims, padded with zeros; on the data's device,
// since a GPU backend moves GPU tensors only.
at::Tensor make_header(const at::Tensor& data) {
  at::Tensor header = torch::zeros({kPipelineHeaderLength}, torch::kLong);
  auto h = header.accessor<int64_t, 1>();
  h[0] = static_cast<int64_t>(data.scalar_type());
  h[1] = data.dim();
  for (int64_t d = 0; d < data.dim(); ++d) h[2 + d] = data.size(d);
  return header.to(data.device());
}

// What will be sent: detached (the receiver rebuilds its own leaf, and the send must not keep
// this graph alive) and contiguous.
at::Tensor outgoing(Communicator& comm, PipelineStream stream, int mb, const at::Tensor& tensor) {
  if (!tensor.defined())
    throw std::logic_error(where(comm.rank(), mb) + ": the " + stream_name(stream) + " to send is undefined");
  if (tensor.dim() > kPipelineMaxDims)
    throw std::logic_error(where(comm.rank(), mb) + ": the " + stream_name(stream) + " to send has " +
                           std::to_string(tensor.dim()) + " dimensions, more than the header's " +
                           std::to_string(kPipelineMaxDims));
  return tensor.detach().contiguous();
}

at::Tensor empty_header(at::Device device) {
  return torch::empty({kPipelineHeaderLength}, torch::TensorOptions().dtype(torch::kLong).device(device));
}

// The buffer a received header announces. `expected`, when defined, is the shape and dtype the
// message must have: any other header is a std::logic_error naming the micro-batch and both
// shapes, raised before the data is received.
at::Tensor buffer_for(const at::Tensor& received_header, Communicator& comm, PipelineStream stream, int mb, int peer,
                      const at::Tensor& expected, at::Device device) {
  const at::Tensor header = received_header.cpu();
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
  return torch::empty(sizes, torch::TensorOptions().dtype(dtype).device(device));
}

}  // namespace

std::vector<std::unique_ptr<Work>> post_pipeline_message(Communicator& comm, PipelineStream stream, int mb,
                                                         const at::Tensor& tensor, int peer, int64_t* bytes_sent) {
  const at::Tensor data = outgoing(comm, stream, mb, tensor);
  const at::Tensor header = make_header(data);
  std::vector<std::unique_ptr<Work>> works;
  works.push_back(comm.isend(header, peer, message_tag(stream, mb, false)));
  works.push_back(comm.isend(data, peer, message_tag(stream, mb, true)));
  if (bytes_sent) *bytes_sent += static_cast<int64_t>(header.nbytes() + data.nbytes());
  return works;
}

at::Tensor recv_pipeline_message(Communicator& comm, PipelineStream stream, int mb, int peer,
                                 const at::Tensor& expected, at::Device device) {
  at::Tensor header = empty_header(device);
  comm.recv(header, peer, message_tag(stream, mb, false));
  at::Tensor data = buffer_for(header, comm, stream, mb, peer, expected, device);
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
  // Kept where the loss is and read once, after the step: reading each as it comes would make
  // the host wait for the device at every micro-batch.
  std::vector<at::Tensor> losses(last ? microbatches_ : 0);
  int in_flight = 0;

  auto missing = [&](const Action& a, const char* what) {
    return std::logic_error(where(stage_, a.microbatch) + ": " + to_string(a) + " before " + what);
  };

  // One group of sends and receives, as the schedule grouped them, in two rounds over the
  // same peers: the headers, then the data, whose receive buffers the headers size. Each round
  // is one batch_isend_irecv, waited for before going on, which is what the simulator proves
  // deadlock-free. Once a group has returned its sends are complete, so nothing sent outlives
  // it: a sent activation is freed at its micro-batch's Backward, as 1F1B intends.
  auto exchange = [&](size_t begin, size_t end) {
    const size_t n = end - begin;
    std::vector<at::Tensor> data(n), headers(n);
    std::vector<PointToPoint> round;
    for (size_t k = 0; k < n; ++k) {
      const Action& a = actions_[begin + k];
      MicroBatch& mbs = live[a.microbatch];
      const PipelineStream stream = a.kind == ActionKind::SendGrad || a.kind == ActionKind::RecvGrad
                                        ? PipelineStream::Grad : PipelineStream::Activation;
      const int tag = message_tag(stream, a.microbatch, false);
      switch (a.kind) {
        case ActionKind::SendActivation:
        case ActionKind::SendGrad: {
          const bool grad = a.kind == ActionKind::SendGrad;  // the backward's input gradient, or the output
          const at::Tensor& sent = grad ? mbs.input_grad : mbs.output;
          if (!sent.defined()) throw missing(a, grad ? "its backward" : "its forward");
          data[k] = outgoing(pp_, stream, a.microbatch, sent);
          round.push_back({true, headers[k] = make_header(data[k]), a.peer, tag});
          stats_.bytes_sent += static_cast<int64_t>(headers[k].nbytes() + data[k].nbytes());
          break;
        }
        case ActionKind::RecvGrad:
          if (!mbs.output.defined()) throw missing(a, "its forward");
          [[fallthrough]];
        case ActionKind::RecvActivation:
          round.push_back({false, headers[k] = empty_header(device_), a.peer, tag});
          break;
        default: throw std::logic_error(where(stage_, a.microbatch) + ": " + to_string(a) + " is not a message");
      }
    }
    pp_.batch_isend_irecv(std::move(round))->wait();

    round.clear();
    for (size_t k = 0; k < n; ++k) {
      const Action& a = actions_[begin + k];
      const bool grad = a.kind == ActionKind::RecvGrad;
      const PipelineStream stream = grad || a.kind == ActionKind::SendGrad ? PipelineStream::Grad
                                                                           : PipelineStream::Activation;
      if (a.kind == ActionKind::RecvActivation || grad)
        data[k] = buffer_for(headers[k], pp_, stream, a.microbatch, a.peer,
                             grad ? live[a.microbatch].output : at::Tensor(), device_);
      round.push_back({!(a.kind == ActionKind::RecvActivation || grad), data[k], a.peer,
                       message_tag(stream, a.microbatch, true)});
    }
    pp_.batch_isend_irecv(std::move(round))->wait();

    for (size_t k = 0; k < n; ++k) {
      const Action& a = actions_[begin + k];
      if (a.kind == ActionKind::RecvActivation) live[a.microbatch].input = data[k].requires_grad_(true);
      else if (a.kind == ActionKind::RecvGrad) live[a.microbatch].output_grad = data[k];
      else if (a.kind == ActionKind::SendGrad) live.erase(a.microbatch);
    }
  };

  using Clock = std::chrono::steady_clock;
  const auto step_start = Clock::now();
  for (size_t next = 0; next < actions_.size();) {
    const Action& a = actions_[next];
    if (is_communication(a.kind)) {
      const size_t end = group_end(actions_, next);
      exchange(next, end);
      next = end;
      continue;
    }
    ++next;
    MicroBatch& mbs = live[a.microbatch];
    const auto action_start = Clock::now();
    if (a.kind == ActionKind::Forward) {
      if (!first && !mbs.input.defined()) throw missing(a, "its activation was received");
      mbs.output = stage.forward(a.microbatch, mbs.input);
      if (!mbs.output.defined())
        throw std::logic_error(where(stage_, a.microbatch) + ": forward returned an undefined tensor");
      if (last) {
        if (mbs.output.numel() != 1)
          throw std::logic_error(where(stage_, a.microbatch) + ": the last stage's forward must return a " +
                                 "scalar loss, got " + shape_string(mbs.output.sizes(), mbs.output.scalar_type()));
        losses[a.microbatch] = mbs.output.detach().reshape({1}).to(at::kDouble);
      }
      stats_.peak_in_flight = std::max(stats_.peak_in_flight, ++in_flight);
    } else {
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
      mbs.input = at::Tensor();
      mbs.output = at::Tensor();
      mbs.output_grad = at::Tensor();
      --in_flight;
      if (first) live.erase(a.microbatch);
    }
    stats_.compute_seconds += std::chrono::duration<double>(Clock::now() - action_start).count();
  }
  stats_.run_seconds = std::chrono::duration<double>(Clock::now() - step_start).count();
  if (losses.empty()) return {};
  const at::Tensor all = torch::cat(losses).to(at::kCPU);
  return std::vector<double>(all.data_ptr<double>(), all.data_ptr<double>() + all.numel());
}

}  // namespace gt
