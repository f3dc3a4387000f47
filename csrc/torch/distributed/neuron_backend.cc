#include "torch/distributed/neuron_backend.h"

#include "torch/aten/device_staging.h"
#include "torch/distributed/host_alias.h"
#include "torch/distributed/neuron_work.h"
#include "torch/distributed/shm_collectives.h"
#include "torch/distributed/serial_worker.h"
#include "torch/distributed/shm_rendezvous.h"
#include "torch/runtime/device.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <algorithm>
#include <thread>

namespace openneuron::integration {
namespace {

using c10d::OpType;
using Tensors = std::vector<at::Tensor>;

std::vector<at::Tensor> flatten(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<at::Tensor> out;
  for (const auto& list : lists) out.insert(out.end(), list.begin(), list.end());
  return out;
}

// Gloo has no average: reduce with a sum, then divide the results.
template <typename Options>
std::pair<Options, bool> without_average(const Options& opts) {
  Options copy = opts;
  const bool average = opts.reduceOp == c10d::ReduceOp::AVG;
  if (average) copy.reduceOp = c10d::ReduceOp::SUM;
  return {copy, average};
}

std::function<void()> divide_by(Tensors tensors, int size, bool enabled) {
  if (!enabled) return nullptr;
  return [tensors = std::move(tensors), size]() mutable {
    for (auto& t : tensors) {
      if (at::isIntegralType(t.scalar_type(), /*includeBool=*/true)) {
        t.div_(size, "floor");
      } else {
        t.div_(size);
      }
    }
  };
}

}  // namespace

NeuronBackend::NeuronBackend(c10::intrusive_ptr<c10d::Backend> transport,
                             c10::intrusive_ptr<c10d::Store> store, int rank,
                             int size,
                             c10::intrusive_ptr<NeuronBackendOptions> options,
                             TransportFactory make_transport)
    : c10d::Backend(rank, size),
      gloo_(std::move(transport)),
      store_(std::move(store)),
      options_(std::move(options)),
      make_transport_(std::move(make_transport)) {
  TORCH_CHECK(gloo_->getRank() == rank && gloo_->getSize() == size,
              "neuron backend: the transport's rank/size (", gloo_->getRank(),
              "/", gloo_->getSize(), ") differ from the group's (", rank, "/",
              size, ")");
}

c10::intrusive_ptr<c10d::Backend> NeuronBackend::split(
    const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
    const c10::intrusive_ptr<Options>& opts) {
  const auto me = std::find(ranks.begin(), ranks.end(), getRank());
  if (me == ranks.end()) return nullptr;
  for (int r : ranks)
    TORCH_CHECK(r >= 0 && r < getSize(), "neuron backend: split_group rank ",
                r, " is not a rank of the parent group (size ", getSize(), ")");
  if (last_split_store_.lock() == store) {
    if (auto existing = last_split_.lock()) return existing;
  }
  const int rank = static_cast<int>(me - ranks.begin());
  const int size = static_cast<int>(ranks.size());
  // Whatever options type PyTorch hands over, only the common fields count.
  auto options = c10::make_intrusive<NeuronBackendOptions>(*options_);
  if (opts) {
    options->timeout = opts->timeout;
    options->group_name = opts->group_name;
    options->group_desc = opts->group_desc;
  }
  options->global_ranks_in_group.clear();
  for (int r : ranks)
    options->global_ranks_in_group.push_back(
        options_->global_ranks_in_group.empty()
            ? static_cast<uint64_t>(r)
            : options_->global_ranks_in_group.at(r));
  // Rendezvous under this group's own store: the one PyTorch passes is
  // named after a count of groups that differs between ranks once a split
  // left some ranks out (fine for NCCL's store-less split, not for Gloo).
  auto own_store = c10::make_intrusive<c10d::PrefixStore>(
      c10::str("neuron_split/", c10::Join("_", ranks), "/",
               splits_per_ranks_[ranks]++),
      store_);
  auto transport = make_transport_(own_store, rank, size, options->timeout);
  c10::intrusive_ptr<c10d::Backend> child = c10::make_intrusive<NeuronBackend>(
      std::move(transport), own_store, rank, size, std::move(options),
      make_transport_);
  last_split_store_ = store;
  last_split_ = child;
  return child;
}

c10::Device NeuronBackend::device_of(const Tensors& tensors) const {
  for (const auto& t : tensors)
    if (t.defined() && t.device().type() == kNeuron) return t.device();
  return c10::Device(kNeuron, current_device());
}

std::string NeuronBackend::describe(const char* name, uint64_t sequence) const {
  return c10::str(name, " (sequence number ", sequence, ", rank ", getRank(),
                  " of ", getSize(), ")");
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::wrap(
    c10::intrusive_ptr<c10d::Work> work, Tensors outputs, OpType type,
    const char* name, std::function<void()> finish) {
  const auto device = device_of(outputs);
  // Staged copies (memory the host cannot address): the outputs' results
  // go back to the device before the work completes.
  std::vector<std::pair<at::Tensor, at::Tensor>> write_back;
  for (auto& [neuron, cpu] : take_staged()) {
    for (const auto& out : outputs)
      if (out.unsafeGetTensorImpl() == neuron.unsafeGetTensorImpl()) {
        write_back.emplace_back(neuron, cpu);
        break;
      }
  }
  if (!write_back.empty()) {
    finish = [finish = std::move(finish), write_back = std::move(write_back)] {
      if (finish) finish();
      for (const auto& [neuron, cpu] : write_back) upload(neuron, cpu);
    };
  }
  const uint64_t sequence = sequence_++;
  // Weak: a Work outliving its group (its callback runs on the transport's
  // thread) must not be what destroys the group there.
  c10::weak_intrusive_ptr<NeuronBackend> group(
      c10::intrusive_ptr<NeuronBackend>::reclaim_copy(this));
  return NeuronWork::create(
      std::move(work), std::move(outputs), device, getRank(), type,
      describe(name, sequence), std::move(finish),
      [group, sequence]() -> std::string {
        auto self = group.lock();
        return self ? self->ranks_missing_at(sequence)
                    : "unknown (the group was destroyed)";
      });
}

ShmChannel* NeuronBackend::shm_for(c10::ScalarType dtype,
                                   c10d::ReduceOp::RedOpType op) {
  return shm::supports(dtype, op) ? shm_channel() : nullptr;
}

ShmChannel* NeuronBackend::shm_channel() {
  if (getSize() < 2) return nullptr;
  std::lock_guard<std::mutex> lock(shm_mutex_);
  if (!shm_tried_) {
    shm_tried_ = true;
    shm_ = rendezvous_shm_channel(store_, getRank(), getSize());
    if (shm_) shm_worker_ = std::make_unique<SerialWorker>();
  }
  return shm_.get();
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::run_on_shm(
    ShmChannel& channel, std::function<void(ShmChannel&)> move,
    Tensors outputs, Tensors host_outputs, OpType type, const char* name,
    std::function<void()> finish) {
  auto done = c10::make_intrusive<c10::ivalue::Future>(
      c10::ListType::create(c10::TensorType::get()));
  std::string what = describe(name, sequence_);  // the number wrap() takes
  auto work = wrap(c10d::Work::create_from_future(done), std::move(outputs),
                   type, name, std::move(finish));
  shm_worker_->post([&channel, move = std::move(move), done,
                     host_outputs = std::move(host_outputs),
                     what = std::move(what)] {
    try {
      move(channel);
      done->markCompleted(c10::IValue(host_outputs));
    } catch (const ShmPeerError& e) {
      // The channel knows exactly who is missing: no need to ask the store.
      done->setError(std::make_exception_ptr(c10::DistBackendError(
          {__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
          c10::str("neuron backend: ", what,
                   " failed; ranks that did not arrive: ",
                   c10::ArrayRef<int>(e.missing_ranks), ". Cause: ",
                   e.what()))));
    } catch (...) {
      done->setError(std::current_exception());
    }
  });
  return work;
}

std::string NeuronBackend::ranks_missing_at(uint64_t sequence) {
  // Every rank that fails here says so; whoever stays silent for a few
  // seconds never arrived (dead, hung, or elsewhere in the program).
  const std::string prefix = c10::str("neuron/failed/", sequence, "/");
  try {
    store_->set(prefix + std::to_string(getRank()), std::vector<uint8_t>{1});
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(3);
    std::vector<int> missing;
    do {
      missing.clear();
      for (int r = 0; r < getSize(); ++r)
        if (!store_->check({prefix + std::to_string(r)})) missing.push_back(r);
      if (missing.empty()) return "none (all ranks failed here)";
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    } while (std::chrono::steady_clock::now() < deadline);
    return c10::str(c10::ArrayRef<int>(missing));
  } catch (const std::exception&) {
    return "unknown (the group's store is unreachable: its host may be the "
           "rank that died)";
  }
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::broadcast(
    Tensors& tensors, const c10d::BroadcastOptions& opts) {
  auto host = host_aliases(tensors, "broadcast");
  if (host.size() == 1) {
    TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(),
                "neuron backend: broadcast root ", opts.rootRank,
                " is not a rank of this group (size ", getSize(), ")");
    if (auto* ch = shm_channel()) {
      const auto timeout = options_->timeout;
      return run_on_shm(
          *ch,
          [t = host[0], root = static_cast<int>(opts.rootRank),
           timeout](ShmChannel& c) {
            at::Tensor tensor = t;
            shm::broadcast(c, tensor, root, timeout);
          },
          tensors, host, OpType::BROADCAST, "broadcast", nullptr);
    }
  }
  return wrap(gloo_->broadcast(host, opts), tensors, OpType::BROADCAST,
              "broadcast");
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::allreduce(
    Tensors& tensors, const c10d::AllreduceOptions& opts) {
  auto host = host_aliases(tensors, "allreduce");
  auto [gloo_opts, average] = without_average(opts);
  auto finish = divide_by(host, getSize(), average);
  if (host.size() == 1) {
    if (auto* ch = shm_for(host[0].scalar_type(), gloo_opts.reduceOp)) {
      const auto timeout = options_->timeout;
      return run_on_shm(
          *ch,
          [t = host[0], op = gloo_opts.reduceOp, timeout](ShmChannel& c) {
            at::Tensor tensor = t;
            shm::allreduce(c, tensor, op, timeout);
          },
          tensors, host, OpType::ALLREDUCE, "allreduce", std::move(finish));
    }
  }
  return wrap(gloo_->allreduce(host, gloo_opts), tensors, OpType::ALLREDUCE,
              "allreduce", std::move(finish));
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::allreduce_coalesced(
    Tensors& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  auto host = host_aliases(tensors, "allreduce_coalesced");
  auto [gloo_opts, average] = without_average(opts);
  return wrap(gloo_->allreduce_coalesced(host, gloo_opts), tensors,
              OpType::ALLREDUCE_COALESCED, "allreduce_coalesced",
              divide_by(host, getSize(), average));
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::reduce(
    Tensors& tensors, const c10d::ReduceOptions& opts) {
  auto host = host_aliases(tensors, "reduce");
  auto [gloo_opts, average] = without_average(opts);
  const bool is_root = opts.rootRank == getRank();
  return wrap(gloo_->reduce(host, gloo_opts), tensors, OpType::REDUCE,
              "reduce", divide_by(host, getSize(), average && is_root));
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::allgather(
    std::vector<Tensors>& outputs, Tensors& inputs,
    const c10d::AllgatherOptions& opts) {
  auto host_out = host_aliases(outputs, "allgather");
  auto host_in = host_aliases(inputs, "allgather");
  return wrap(gloo_->allgather(host_out, host_in, opts), flatten(outputs),
              OpType::ALLGATHER, "allgather");
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::_allgather_base(
    at::Tensor& output, at::Tensor& input,
    const c10d::AllgatherOptions& opts) {
  auto host_out = host_alias(output, "all_gather_into_tensor");
  auto host_in = host_alias(input, "all_gather_into_tensor");
  if (host_out.scalar_type() == host_in.scalar_type()) {
    if (auto* ch = shm_channel()) {
      const auto timeout = options_->timeout;
      return run_on_shm(
          *ch,
          [out = host_out, in = host_in, timeout](ShmChannel& c) {
            at::Tensor output = out;
            shm::all_gather_into_tensor(c, output, in, timeout);
          },
          {output}, {host_out}, OpType::_ALLGATHER_BASE,
          "all_gather_into_tensor", nullptr);
    }
  }
  return wrap(gloo_->_allgather_base(host_out, host_in, opts), {output},
              OpType::_ALLGATHER_BASE, "all_gather_into_tensor");
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::allgather_into_tensor_coalesced(
    Tensors& outputs, Tensors& inputs, const c10d::AllgatherOptions& opts) {
  auto host_out = host_aliases(outputs, "all_gather_into_tensor_coalesced");
  auto host_in = host_aliases(inputs, "all_gather_into_tensor_coalesced");
  return wrap(gloo_->allgather_into_tensor_coalesced(host_out, host_in, opts),
              outputs, OpType::COALESCED, "all_gather_into_tensor_coalesced");
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::allgather_coalesced(
    std::vector<Tensors>& outputs, Tensors& inputs,
    const c10d::AllgatherOptions& opts) {
  auto host_out = host_aliases(outputs, "allgather_coalesced");
  auto host_in = host_aliases(inputs, "allgather_coalesced");
  return wrap(gloo_->allgather_coalesced(host_out, host_in, opts),
              flatten(outputs), OpType::ALLGATHER_COALESCED,
              "allgather_coalesced");
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::gather(
    std::vector<Tensors>& outputs, Tensors& inputs,
    const c10d::GatherOptions& opts) {
  auto host_out = host_aliases(outputs, "gather");
  auto host_in = host_aliases(inputs, "gather");
  return wrap(gloo_->gather(host_out, host_in, opts), flatten(outputs),
              OpType::GATHER, "gather");
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::scatter(
    Tensors& outputs, std::vector<Tensors>& inputs,
    const c10d::ScatterOptions& opts) {
  auto host_out = host_aliases(outputs, "scatter");
  auto host_in = host_aliases(inputs, "scatter");
  return wrap(gloo_->scatter(host_out, host_in, opts), outputs,
              OpType::SCATTER, "scatter");
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::reduce_scatter(
    Tensors& outputs, std::vector<Tensors>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  auto host_out = host_aliases(outputs, "reduce_scatter");
  auto host_in = host_aliases(inputs, "reduce_scatter");
  auto [gloo_opts, average] = without_average(opts);
  return wrap(gloo_->reduce_scatter(host_out, host_in, gloo_opts), outputs,
              OpType::REDUCE_SCATTER, "reduce_scatter",
              divide_by(host_out, getSize(), average));
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input,
    const c10d::ReduceScatterOptions& opts) {
  auto host_out = host_alias(output, "reduce_scatter_tensor");
  auto host_in = host_alias(input, "reduce_scatter_tensor");
  auto [gloo_opts, average] = without_average(opts);
  if (host_out.scalar_type() == host_in.scalar_type()) {
    if (auto* ch = shm_for(host_in.scalar_type(), gloo_opts.reduceOp)) {
      const auto timeout = options_->timeout;
      return run_on_shm(
          *ch,
          [out = host_out, in = host_in, op = gloo_opts.reduceOp,
           timeout](ShmChannel& c) {
            at::Tensor output = out;
            shm::reduce_scatter_tensor(c, output, in, op, timeout);
          },
          {output}, {host_out}, OpType::_REDUCE_SCATTER_BASE,
          "reduce_scatter_tensor",
          divide_by({host_out}, getSize(), average));
    }
  }
  return wrap(gloo_->_reduce_scatter_base(host_out, host_in, gloo_opts),
              {output}, OpType::_REDUCE_SCATTER_BASE, "reduce_scatter_tensor",
              divide_by({host_out}, getSize(), average));
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::reduce_scatter_tensor_coalesced(
    Tensors& outputs, Tensors& inputs,
    const c10d::ReduceScatterOptions& opts) {
  auto host_out = host_aliases(outputs, "reduce_scatter_tensor_coalesced");
  auto host_in = host_aliases(inputs, "reduce_scatter_tensor_coalesced");
  auto [gloo_opts, average] = without_average(opts);
  return wrap(
      gloo_->reduce_scatter_tensor_coalesced(host_out, host_in, gloo_opts),
      outputs, OpType::COALESCED, "reduce_scatter_tensor_coalesced",
      divide_by(host_out, getSize(), average));
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::alltoall_base(
    at::Tensor& output, at::Tensor& input,
    std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes,
    const c10d::AllToAllOptions& opts) {
  auto host_out = host_alias(output, "all_to_all_single");
  auto host_in = host_alias(input, "all_to_all_single");
  return wrap(gloo_->alltoall_base(host_out, host_in, output_split_sizes,
                                   input_split_sizes, opts),
              {output}, OpType::ALLTOALL_BASE, "all_to_all_single");
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::alltoall(
    Tensors& outputs, Tensors& inputs, const c10d::AllToAllOptions& opts) {
  auto host_out = host_aliases(outputs, "all_to_all");
  auto host_in = host_aliases(inputs, "all_to_all");
  return wrap(gloo_->alltoall(host_out, host_in, opts), outputs,
              OpType::ALLTOALL, "all_to_all");
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::send(Tensors& tensors,
                                                   int dst_rank, int tag) {
  auto host = host_aliases(tensors, "send");
  return wrap(gloo_->send(host, dst_rank, tag), tensors, OpType::SEND,
              "send");
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::recv(Tensors& tensors,
                                                   int src_rank, int tag) {
  auto host = host_aliases(tensors, "recv");
  return wrap(gloo_->recv(host, src_rank, tag), tensors, OpType::RECV,
              "recv");
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::recvAnysource(Tensors& tensors,
                                                            int tag) {
  auto host = host_aliases(tensors, "recv");
  auto work = gloo_->recvAnysource(host, tag);
  auto wrapped = wrap(work, tensors, OpType::RECVANYSOURCE, "recv");
  return wrapped;
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::barrier(
    const c10d::BarrierOptions& opts) {
  return wrap(gloo_->barrier(opts), {}, OpType::BARRIER, "barrier");
}

void NeuronBackend::abort() {
  if (shm_) shm_->abort();
  gloo_->abort();
}

void NeuronBackend::shutdown() { gloo_->shutdown(); }

void NeuronBackend::setTimeout(std::chrono::milliseconds timeout) {
  options_->timeout = timeout;
  gloo_->setTimeout(timeout);
}

uint64_t NeuronBackend::getSequenceNumberForGroup() {
  return gloo_->getSequenceNumberForGroup();
}

void NeuronBackend::setSequenceNumberForGroup() {
  gloo_->setSequenceNumberForGroup();
}

}  // namespace openneuron::integration
