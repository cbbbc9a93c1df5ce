// The pipeline executor (parallel/pipeline_executor.hpp) under a real mpirun, driven by
// tests/cli/pipeline.sh. A toy model (a chain of Linear+tanh layers, a linear head and a squared
// error, float64, weights from a seed) is cut into one piece per stage; micro-batches have
// different sequence lengths, so the shape headers matter. Every rank also runs the whole model
// serially in-process and compares. Modes:
//   check     with N ranks: pipelines of N stages (and, with 4 ranks, two pipelines of 2 stages
//             on split sub-communicators), GPipe and 1F1B, for several micro-batch counts
//   badshape  2 ranks: rank 1 plays a broken last stage that answers micro-batch 0 with a
//             gradient one row too long; rank 0's executor must throw a std::logic_error naming
//             both shapes, which this driver prints before aborting the job
// A second argument, nccl, runs `check` with the tensors on the GPU and the stages talking over
// the NCCL backend (scripts/device/gpu_check.sh: two ranks may share one GPU there, each with
// its own NCCL_HOSTID); the checks' own agreement always goes over MPI.
// Rank 0 prints "ok NAME" per check that held on every rank; a rank whose side failed prints
// "FAIL" and exits 1, so mpirun exits non-zero.
#include <mpi.h>
#include <torch/torch.h>

#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "comm/comm_backend.hpp"
#include "comm/mpi_communicator.hpp"
#include "comm/world.hpp"
#include "layout/schedule.hpp"
#include "parallel/pipeline_executor.hpp"
#include "tests/rank_checks.hpp"

namespace {

using gt::testing::expect;
using gt::testing::failures;

constexpr int kHidden = 6;
constexpr int kLayers = 8;  // divisible by 2 and 4 stages
constexpr int kHeaderBytes = gt::kPipelineHeaderLength * 8;

torch::Device g_device = torch::kCPU;  // where the toy model, its data and the messages live


struct Toy {
  std::vector<torch::Tensor> weight, bias;  // layer l: x -> tanh(x W^T + b)
  torch::Tensor head_weight, head_bias;     // [1, H], [1]

  std::vector<torch::Tensor> layer_params(int l) const { return {weight[l], bias[l]}; }
  std::vector<torch::Tensor> head_params() const { return {head_weight, head_bias}; }
};

// The same weights on every rank and for every copy: a seeded generator, drawn in one order.
Toy make_toy(uint64_t seed) {
  torch::manual_seed(seed);
  auto opts = torch::TensorOptions().dtype(torch::kDouble);
  Toy t;
  for (int l = 0; l < kLayers; ++l) {
    t.weight.push_back((torch::randn({kHidden, kHidden}, opts) * 0.5).to(g_device).requires_grad_());
    t.bias.push_back((torch::randn({kHidden}, opts) * 0.1).to(g_device).requires_grad_());
  }
  t.head_weight = (torch::randn({1, kHidden}, opts) * 0.5).to(g_device).requires_grad_();
  t.head_bias = torch::zeros({1}, opts).to(g_device).requires_grad_();
  return t;
}

struct Batches {
  std::vector<torch::Tensor> inputs, targets;  // micro-batch i: [len_i, H] and [len_i, 1]
};

// Lengths 2, 5, 3, 6, 4, 2, 5, 3, ...: neighbouring micro-batches never share a shape.
int64_t length_of(int mb) { return 2 + (mb * 3) % 5; }

Batches make_batches(int m, uint64_t seed) {
  torch::manual_seed(seed);
  Batches b;
  for (int i = 0; i < m; ++i) {
    b.inputs.push_back(torch::randn({length_of(i), kHidden}, torch::kDouble).to(g_device));
    b.targets.push_back(torch::randn({length_of(i), 1}, torch::kDouble).to(g_device));
  }
  return b;
}

torch::Tensor run_layers(const Toy& toy, int begin, int end, torch::Tensor x) {
  for (int l = begin; l < end; ++l) x = torch::tanh(torch::nn::functional::linear(x, toy.weight[l], toy.bias[l]));
  return x;
}

// Scaled by 1/m, as a trainer averaging over micro-batches would.
torch::Tensor loss_of(const Toy& toy, const torch::Tensor& x, const torch::Tensor& target, int m) {
  torch::Tensor y = torch::nn::functional::linear(x, toy.head_weight, toy.head_bias);
  return (y - target).pow(2).mean() / m;
}

bool close(const torch::Tensor& got, const torch::Tensor& want, double rel = 1e-6) {
  if (!got.defined() || !want.defined() || got.sizes() != want.sizes()) return false;
  const double scale = want.abs().max().item<double>();
  return scale > 0 && (got - want).abs().max().item<double>() <= rel * scale;
}

// One configuration: p stages on `pp` (a group of the data communicator), m micro-batches, one
// schedule; `world` (MPI) carries the checks' agreement.
void check_pipeline(gt::Communicator& world, gt::Communicator& pp, const std::string& kind, int m) {
  const int p = pp.size(), s = pp.rank();
  const bool last = s == p - 1;
  const std::string label = kind + " p=" + std::to_string(p) + " m=" + std::to_string(m) +
                            (p < world.size() ? " (" + std::to_string(world.size() / p) + " pipelines)" : "");
  const Toy toy = make_toy(17), serial = make_toy(17);
  const Batches data = make_batches(m, 29);

  // The reference: every layer and micro-batch in one process, one backward of the summed loss.
  std::vector<double> serial_losses;
  torch::Tensor total = torch::zeros({}, torch::TensorOptions().dtype(torch::kDouble).device(g_device));
  for (int i = 0; i < m; ++i) {
    torch::Tensor l = loss_of(serial, run_layers(serial, 0, kLayers, data.inputs[i]), data.targets[i], m);
    serial_losses.push_back(l.item<double>());
    total = total + l;
  }
  total.backward();

  const int begin = s * kLayers / p, end = (s + 1) * kLayers / p;
  gt::StageFunctions stage;
  stage.forward = [&](int mb, const at::Tensor& input) -> at::Tensor {
    torch::Tensor x = run_layers(toy, begin, end, s == 0 ? data.inputs[mb] : input);
    return last ? loss_of(toy, x, data.targets[mb], m) : x;
  };
  const gt::Schedule schedule = kind == "gpipe" ? gt::gpipe_schedule(p, m) : gt::one_f_one_b_schedule(p, m);
  gt::PipelineExecutor executor(pp, schedule[s]);
  executor.set_device(g_device);
  const std::vector<double> losses = executor.run(stage);

  bool losses_match = last ? losses.size() == size_t(m) : losses.empty();
  for (size_t i = 0; losses_match && i < losses.size(); ++i)
    losses_match = std::abs(losses[i] - serial_losses[i]) <= 1e-6 * std::abs(serial_losses[i]);
  expect(world, label + ": losses per micro-batch equal the serial model's", losses_match);

  // This stage's parameters carry the serial gradients; nobody else's got any.
  bool own = true, stray = false;
  for (int l = 0; l < kLayers; ++l) {
    const bool mine = l >= begin && l < end;
    for (int k = 0; k < 2; ++k) {
      const torch::Tensor& g = toy.layer_params(l)[k].grad();
      if (mine) own = own && close(g, serial.layer_params(l)[k].grad());
      else stray = stray || g.defined();
    }
  }
  for (int k = 0; k < 2; ++k) {
    const torch::Tensor& g = toy.head_params()[k].grad();
    if (last) own = own && close(g, serial.head_params()[k].grad());
    else stray = stray || g.defined();
  }
  expect(world, label + ": each stage's parameter gradients equal the serial ones (1e-6 relative)", own && !stray);

  const int want_peak = kind == "gpipe" ? m : std::min(p - s, m);
  expect(world, label + ": peak in-flight micro-batches " + (kind == "gpipe" ? "m" : "min(p - stage, m)"),
         executor.stats().peak_in_flight == want_peak);

  int64_t want_bytes = 0;  // activations forward unless last, gradients back unless first
  for (int i = 0; i < m; ++i) {
    const int64_t message = kHeaderBytes + length_of(i) * kHidden * 8;
    want_bytes += (last ? 0 : message) + (s == 0 ? 0 : message);
  }
  expect(world, label + ": bytes sent = headers + activations + gradients", executor.stats().bytes_sent == want_bytes);

  // A second step on the same executor: nothing left over from the first (tags, saved tensors),
  // so with gradients zeroed it reproduces the first step bit for bit.
  std::vector<torch::Tensor> mine;
  for (int l = begin; l < end; ++l)
    for (const auto& t : toy.layer_params(l)) mine.push_back(t);
  if (last)
    for (const auto& t : toy.head_params()) mine.push_back(t);
  std::vector<torch::Tensor> first_grads;
  for (const auto& t : mine) first_grads.push_back(t.grad().clone()), t.grad().zero_();
  const std::vector<double> again = executor.run(stage);
  bool same = again == losses;
  for (size_t k = 0; k < mine.size(); ++k) same = same && torch::equal(mine[k].grad(), first_grads[k]);
  expect(world, label + ": a second step reproduces the first exactly", same && executor.stats().peak_in_flight == want_peak);
}

void check(gt::Communicator& world, gt::Communicator& data) {
  const int n = world.size();
  for (int m : n == 2 ? std::vector<int>{4, 8} : std::vector<int>{4, 6})
    for (const char* kind : {"gpipe", "1f1b"}) check_pipeline(world, data, kind, m);
  if (n == 4) {
    // Two pipelines of two stages: stage numbers are ranks of the group, not of the world.
    auto pp = data.split(world.rank() % 2, world.rank());
    for (const char* kind : {"gpipe", "1f1b"}) check_pipeline(world, *pp, kind, 4);
  }
  world.barrier();
}

// Rank 1 receives the activations as a last stage would, then sends micro-batch 0's gradient
// with one row too many, and stays silent: only rank 0's error can end the job in time.
void badshape(gt::Communicator& world) {
  const int m = 4;
  const Toy toy = make_toy(17);
  const Batches data = make_batches(m, 29);
  if (world.rank() == 1) {
    for (int i = 0; i < m; ++i) gt::recv_pipeline_message(world, gt::PipelineStream::Activation, i, 0);
    auto works = gt::post_pipeline_message(world, gt::PipelineStream::Grad, 0,
                                           torch::ones({length_of(0) + 1, kHidden}, torch::kDouble), 0);
    std::this_thread::sleep_for(std::chrono::seconds(60));
    std::printf("FAIL rank 1: nobody ended the job after the bad gradient\n");
    std::exit(1);
  }
  gt::StageFunctions stage;
  stage.forward = [&](int mb, const at::Tensor&) -> at::Tensor { return run_layers(toy, 0, kLayers / 2, data.inputs[mb]); };
  gt::PipelineExecutor executor(world, gt::gpipe_schedule(2, m)[0]);
  executor.run(stage);
  std::printf("FAIL rank 0: the step with a wrongly shaped gradient returned\n");
}

int body(int argc, char** argv) {
  gt::World mpi(&argc, &argv);
  const bool nccl = argc == 3 && std::string(argv[2]) == "nccl";
  if ((argc != 2 && !nccl) || !mpi.under_mpi()) {
    std::fprintf(stderr, "usage: mpirun -np N %s check|badshape [nccl]\n", argv[0]);
    return 2;
  }
  auto world = gt::MpiCommunicator::world();
  world->set_timeout_seconds(30);  // a schedule bug should fail the test, not stall it
  torch::set_num_threads(1);       // ranks share the cores
  const std::string mode = argv[1];
  try {
    std::unique_ptr<gt::Communicator> gpu;
    if (nccl) {
      gpu = gt::make_world_communicator(gt::Backend::kNccl, 30);
      const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
      const int gpus = static_cast<int>(torch::cuda::device_count());
      // The GPU the NCCL backend took for this rank: its local rank among the visible ones.
      g_device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>((local ? std::atoi(local) : 0) % std::max(gpus, 1)));
    }
    if (mode == "check" && (world->size() == 2 || world->size() == 4)) {
      check(*world, gpu ? *gpu : *world);
      return failures ? 1 : 0;
    }
    if (mode == "badshape" && world->size() == 2) {
      badshape(*world);
      return 1;
    }
  } catch (const std::exception& e) {
    // The peers may be blocked on this rank: end the whole job now rather than let them time out.
    std::fprintf(stderr, "pipeline_driver: rank %d: %s\n", world->rank(), e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  std::fprintf(stderr, "unknown mode '%s' for %d ranks\n", mode.c_str(), world->size());
  return 2;
}

}  // namespace

int main(int argc, char** argv) { return gt::testing::run_driver("pipeline_driver", body, argc, argv); }
