#include "torch/distributed/neuron_work.h"

#include <ATen/core/ivalue.h>

#include <chrono>
#include <thread>

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

std::exception_ptr NeuronWork::failure(const std::string& cause) const {
  const std::string missing = diagnose_ ? diagnose_() : "unknown";
  try {
    C10_THROW_ERROR(DistBackendError,
                    c10::str("neuron backend: ", description_,
                             " failed; ranks that did not arrive: ", missing,
                             ". Cause: ", cause));
  } catch (...) {
    return std::current_exception();
  }
}

void NeuronWork::complete(const c10::ivalue::Future* inner_future) {
  if (future_->completed()) return;
  if (inner_future && inner_future->hasError()) {
    // Waiters on the future (DDP's reducer) get the same clear error as
    // wait() gives; one the backend built already passes as it is.
    const std::string message = inner_future->tryRetrieveErrorMessage();
    future_->setError(message.rfind("neuron backend: ", 0) == 0
                          ? inner_future->exception_ptr()
                          : failure(message));
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
    // The transport failed its work: its callback is building the error
    // for every waiter (it asks the store who is missing: a few seconds).
    // A wait() that timed out on its own leaves the work pending: the
    // error is built here.
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (inner_has_future_ && !future_->completed() &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!future_->completed()) std::rethrow_exception(failure(e.what()));
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
