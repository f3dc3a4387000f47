// The Work of a neuron collective: waits on the transport's work, then
// presents the neuron tensors (not the transport's CPU aliases) as result
// and future value, so DDP and comm hooks see device tensors.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Work.hpp>

namespace openneuron::integration {

class NeuronWork : public c10d::Work {
 public:
  // `finish` runs once the transport finished successfully (e.g. the
  // division of an average), before the future completes; `diagnose`, when
  // it failed, says which ranks did not arrive.
  static c10::intrusive_ptr<NeuronWork> create(
      c10::intrusive_ptr<c10d::Work> inner, std::vector<at::Tensor> outputs,
      c10::Device device, int rank, c10d::OpType type,
      std::string description, std::function<void()> finish = nullptr,
      std::function<std::string()> diagnose = nullptr);

  NeuronWork(c10::intrusive_ptr<c10d::Work> inner,
             std::vector<at::Tensor> outputs, c10::Device device, int rank,
             c10d::OpType type, std::string description,
             std::function<void()> finish = nullptr,
             std::function<std::string()> diagnose = nullptr);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  bool wait(std::chrono::milliseconds timeout) override;
  void abort() override;
  std::vector<at::Tensor> result() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  int sourceRank() const override { return inner_->sourceRank(); }

 private:
  void follow_transport();
  void complete(const c10::ivalue::Future* inner_future);
  // The error a failure raises: names the collective, its sequence number
  // and the ranks that did not arrive.
  std::exception_ptr failure(const std::string& cause) const;

  c10::intrusive_ptr<c10d::Work> inner_;
  std::vector<at::Tensor> outputs_;
  std::string description_;
  std::function<void()> finish_;
  std::function<std::string()> diagnose_;  // on failure: who did not arrive
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  bool inner_has_future_ = false;
};

}  // namespace openneuron::integration
