#include "comm/communicator.hpp"

#include <utility>

namespace gt {
namespace {

// The Works of a group's operations, waited for in the order they were posted.
class WorkList final : public Work {
 public:
  explicit WorkList(std::vector<std::unique_ptr<Work>> works) : works_(std::move(works)) {}
  void wait() override {
    for (auto& w : works_) w->wait();
    works_.clear();
  }

 private:
  std::vector<std::unique_ptr<Work>> works_;
};

}  // namespace

std::unique_ptr<Work> Communicator::batch_isend_irecv(std::vector<PointToPoint> ops) {
  std::vector<std::unique_ptr<Work>> works;
  works.reserve(ops.size());
  for (PointToPoint& op : ops)
    works.push_back(op.send ? isend(op.tensor, op.peer, op.tag) : irecv(op.tensor, op.peer, op.tag));
  return std::make_unique<WorkList>(std::move(works));
}

}  // namespace gt
