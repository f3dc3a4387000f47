#include "torch/distributed/neuron_work.h"

#include <ATen/core/ivalue.h>

namespace openneuron::integration {

NeuronWork::NeuronWork(c10::intrusive_ptr<c10d::Work> inner,
                       std::vector<at::Tensor> outputs, c10::Device device,
                       int rank, c10d::OpType type, std::string description,
                       std::function<void()> finish,
                       std::function<std::string()> diagnose)
    : c10d::Work(rank, type),
      inner_(std::move(inner)),
      outputs_(std::move(outputs)),
      description_(std::move(description)),
      finish_(std::move(finish)),
      diagnose_(std::move(diagnose)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()),
          std::vector<c10::Device>{device})) {}

c10::intrusive_ptr<NeuronWork> NeuronWork::create(
    c10::intrusive_ptr<c10d::Work> inner, std::vector<at::Tensor> outputs,
    c10::Device device, int rank, c10d::OpType type, std::string description,
    std::function<void()> finish, std::function<std::string()> diagnose) {
  auto work = c10::make_intrusive<NeuronWork>(
      std::move(inner), std::move(outputs), device, rank, type,
      std::move(description), std::move(finish), std::move(diagnose));
  work->follow_transport();
  return work;
}

void NeuronWork::follow_transport() {
  c10::intrusive_ptr<c10::ivalue::Future> inner_future;
  try {
    inner_future = inner_->getFuture();
  } catch (const std::exception&) {
    // Point-to-point work of the transport has no future; wait() completes.
  }
  if (inner_future) {
    inner_has_future_ = true;
    // The callback holds the Work alive until the transport finished.
    auto self = c10::intrusive_ptr<NeuronWork>::reclaim_copy(this);
    inner_future->addCallback(
        [self](c10::ivalue::Future& f) { self->complete(&f); });
  }
}

void NeuronWork::complete(const c10::ivalue::Future* inner_future) {
  if (future_->completed()) return;
  if (inner_future && inner_future->hasError()) {
    future_->setError(inner_future->exception_ptr());
    return;
  }
  try {
    if (finish_) finish_();
    future_->markCompleted(c10::IValue(outputs_));
  } catch (...) {
    future_->setError(std::current_exception());
  }
}

bool NeuronWork::isCompleted() { return future_->completed(); }

bool NeuronWork::isSuccess() const {
  return future_->completed() && !future_->hasError();
}

std::exception_ptr NeuronWork::exception() const {
  return future_->completed() && future_->hasError() ? future_->exception_ptr()
                                                     : nullptr;
}

bool NeuronWork::wait(std::chrono::milliseconds timeout) {
  try {
    inner_->wait(timeout);
  } catch (const std::exception& e) {
    const std::string missing = diagnose_ ? diagnose_() : "unknown";
    TORCH_CHECK(false, "neuron backend: ", description_,
                " failed; ranks that did not arrive: ", missing, ". Cause: ",
                e.what());
  }
  if (!inner_has_future_) complete(nullptr);
  future_->wait();
  if (future_->hasError()) std::rethrow_exception(future_->exception_ptr());
  return true;
}

void NeuronWork::abort() { inner_->abort(); }

std::vector<at::Tensor> NeuronWork::result() { return outputs_; }

c10::intrusive_ptr<c10::ivalue::Future> NeuronWork::getFuture() {
  return future_;
}

}  // namespace openneuron::integration
