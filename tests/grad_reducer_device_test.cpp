// The data-parallel GradReducer with parameters on a device that is not the CPU (the fake
// device of tests/fake_device.hpp): autograd runs a device's backward on a thread of its own,
// and the reducer's hooks must start every bucket's reduction from there, during backward,
// with the gradients the CPU computes, and finish() must not read the device back when every
// parameter had a gradient. A GPU takes the same path; tests/dp_driver.cpp holds the reduction
// itself to MPI across processes.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "comm/local_communicator.hpp"
#include "parallel/grad_reducer.hpp"
#include "tests/fake_device.hpp"

namespace {

// A group of one that notes which threads started reductions, and on which device.
class RecordingCommunicator final : public gt::Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void send(const at::Tensor& t, int peer, int tag) override { local_.send(t, peer, tag); }
  void recv(at::Tensor& t, int peer, int tag) override { local_.recv(t, peer, tag); }
  void all_reduce_sum(at::Tensor&) override {}
  at::Tensor all_gather(const at::Tensor& t) override { return local_.all_gather(t); }
  void broadcast(at::Tensor& t, int root) override { local_.broadcast(t, root); }
  void barrier() override {}
  std::unique_ptr<gt::Work> isend(const at::Tensor& t, int peer, int tag) override { return local_.isend(t, peer, tag); }
  std::unique_ptr<gt::Work> irecv(at::Tensor& t, int peer, int tag) override { return local_.irecv(t, peer, tag); }
  std::unique_ptr<gt::Work> iall_reduce_sum(at::Tensor& t) override {
    std::lock_guard<std::mutex> lock(mutex_);
    threads.insert(std::this_thread::get_id());
    devices.insert(t.device().str());
    return local_.iall_reduce_sum(t);
  }
  std::unique_ptr<gt::Communicator> split(int color, int key) override { return local_.split(color, key); }

  std::set<std::thread::id> threads;
  std::set<std::string> devices;

 private:
  gt::LocalCommunicator local_;
  std::mutex mutex_;
};

struct Mlp {
  std::vector<torch::Tensor> params;
  explicit Mlp(const c10::Device& device) {
    torch::manual_seed(3);
    for (auto shape : std::vector<std::vector<int64_t>>{{16, 8}, {16}, {16, 16}, {16}, {4, 16}, {4}})
      params.push_back(torch::randn(shape).to(device).set_requires_grad(true));
  }
  torch::Tensor loss(const torch::Tensor& x) {
    auto h = torch::tanh(torch::nn::functional::linear(x, params[0], params[1]));
    h = torch::tanh(torch::nn::functional::linear(h, params[2], params[3]));
    return torch::nn::functional::linear(h, params[4], params[5]).pow(2).sum();
  }
};

TEST(GradReducerOnADevice, HooksStartEveryBucketFromAutogradsDeviceThread) {
  const c10::Device device = gt::testing::fake_device();
  torch::manual_seed(5);
  const torch::Tensor x = torch::randn({6, 8});

  Mlp cpu(torch::kCPU);
  cpu.loss(x).backward();

  Mlp dev(device);
  RecordingCommunicator comm;
  gt::GradReducer reducer(comm, dev.params, /*bucket_bytes=*/256);
  reducer.set_sync(true);
  dev.loss(x.to(device)).backward();
  const gt::GradReducerStats during = reducer.stats();
  const int64_t reads = gt::testing::fake_device_host_reads();
  reducer.finish();
  EXPECT_EQ(gt::testing::fake_device_host_reads(), reads) << "every parameter had a gradient: nothing to read back";

  EXPECT_GE(during.buckets, 3);
  EXPECT_EQ(during.started_during_backward, during.buckets) << "every bucket from a hook, before backward returned";
  EXPECT_EQ(comm.devices, std::set<std::string>{"fakegpu:0"});
  ASSERT_EQ(comm.threads.size(), 1u);
  EXPECT_NE(*comm.threads.begin(), std::this_thread::get_id()) << "autograd ran the device's backward on its own thread";
  for (size_t i = 0; i < cpu.params.size(); ++i) {
    ASSERT_TRUE(dev.params[i].grad().defined()) << i;
    EXPECT_EQ(dev.params[i].grad().device(), device) << i;
    EXPECT_TRUE(torch::allclose(dev.params[i].grad().cpu(), cpu.params[i].grad(), 1e-5, 1e-6)) << i;
  }

  // A parameter without a gradient here: whether any rank had one is read back, once.
  for (auto& p : dev.params) p.mutable_grad() = torch::Tensor();
  reducer.set_sync(true);
  torch::nn::functional::linear(x.to(device), dev.params[0], dev.params[1]).sum().backward();
  const int64_t before = gt::testing::fake_device_host_reads();
  reducer.finish();
  EXPECT_EQ(gt::testing::fake_device_host_reads(), before + 1);
  EXPECT_TRUE(dev.params[0].grad().defined() && dev.params[1].grad().defined());
  for (size_t i = 2; i < dev.params.size(); ++i) EXPECT_FALSE(dev.params[i].grad().defined()) << i;
}

}  // namespace
