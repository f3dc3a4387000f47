// The `neuron` c10d backend. Collectives on neuron tensors run on Gloo (TCP,
// PyTorch's standard rendezvous, across machines), handed CPU aliases of the
// device memory: zero-copy on the host driver. What Gloo lacks is built here
// (average as sum then divide); everything else is Gloo's, unchanged.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "torch/distributed/neuron_options.h"
#include "torch/distributed/serial_worker.h"
#include "torch/distributed/shm_channel.h"

namespace openneuron::integration {

class NeuronBackend : public c10d::Backend {
 public:
  // Makes the Gloo transport of a group: (store, rank, size, timeout).
  using TransportFactory = std::function<c10::intrusive_ptr<c10d::Backend>(
      const c10::intrusive_ptr<c10d::Store>&, int, int,
      std::chrono::milliseconds)>;

  // `transport` is a Gloo backend of the same group (made by PyTorch's
  // Python API through `make_transport`: the wheel ships no Gloo headers to
  // build one here); subgroups split from this one get theirs the same way.
  NeuronBackend(c10::intrusive_ptr<c10d::Backend> transport,
                c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                c10::intrusive_ptr<NeuronBackendOptions> options,
                TransportFactory make_transport);

  const std::string getBackendName() const override { return "neuron"; }
  c10::intrusive_ptr<Options> getBackendOptions() override { return options_; }
  bool supportsSplitting() const override { return true; }
  // Whether collectives of this group move through shared memory (set up
  // by the first collective that can).
  bool uses_shared_memory() const { return shm_ != nullptr; }
  // The subgroup of `ranks` (ranks of this group) holding this rank, with
  // its own transport; nullptr when this rank is not among them.
  c10::intrusive_ptr<c10d::Backend> split(
      const c10::intrusive_ptr<c10d::Store>& store,
      const std::vector<int>& ranks,
      const c10::intrusive_ptr<Options>& opts) override;

  c10::intrusive_ptr<c10d::Work> broadcast(
      std::vector<at::Tensor>& tensors,
      const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(
      std::vector<at::Tensor>& tensors,
      const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(
      std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(
      at::Tensor& output, at::Tensor& input,
      std::vector<int64_t>& output_split_sizes,
      std::vector<int64_t>& input_split_sizes,
      const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors,
                                      int dst_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors,
                                      int src_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(
      std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(
      const c10d::BarrierOptions& opts) override;

  void setTimeout(std::chrono::milliseconds timeout) override;
  // Fails what is in flight at once (shared memory and Gloo).
  void abort() override;
  void shutdown() override;
  uint64_t getSequenceNumberForGroup() override;
  void setSequenceNumberForGroup() override;

 private:
  // Wraps the transport's work: outputs are the neuron tensors, `finish`
  // post-processes them on success.
  c10::intrusive_ptr<c10d::Work> wrap(
      c10::intrusive_ptr<c10d::Work> work, std::vector<at::Tensor> outputs,
      c10d::OpType type, const char* name,
      std::function<void()> finish = nullptr);
  c10::Device device_of(const std::vector<at::Tensor>& tensors) const;
  std::string describe(const char* name, uint64_t sequence) const;
  // The shared-memory channel when every rank is on this machine and it
  // can reduce `dtype` with `op` (set up on the first collective that can
  // use it, which every rank reaches alike); nullptr: Gloo.
  ShmChannel* shm_for(c10::ScalarType dtype, c10d::ReduceOp::RedOpType op);
  // The channel for collectives that only move data (any dtype).
  ShmChannel* shm_channel();
  // Queues `move` on the channel's worker thread; the Work presents
  // `outputs` once it ran (a peer that is gone fails it).
  c10::intrusive_ptr<c10d::Work> run_on_shm(
      ShmChannel& channel, std::function<void(ShmChannel&)> move,
      std::vector<at::Tensor> outputs, std::vector<at::Tensor> host_outputs,
      c10d::OpType type, const char* name, std::function<void()> finish);
  // After collective `sequence` failed here: the ranks that never reached
  // it, found through the group's store (costs nothing while all is well).
  std::string ranks_missing_at(uint64_t sequence);

  c10::intrusive_ptr<c10d::Backend> gloo_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<NeuronBackendOptions> options_;
  TransportFactory make_transport_;
  // PyTorch splits once per device type with the same store, and one
  // neuron backend may serve two (cpu and neuron): the second call must get
  // the first's backend, not a second rendezvous under the same prefix.
  c10::weak_intrusive_ptr<c10d::Store> last_split_store_{
      c10::intrusive_ptr<c10d::Store>()};
  c10::weak_intrusive_ptr<c10d::Backend> last_split_{
      c10::intrusive_ptr<c10d::Backend>()};
  // Splits made per member list: each subgroup rendezvouses under a prefix
  // of its ranks and this count, which every member counts alike.
  std::map<std::vector<int>, int> splits_per_ranks_;
  std::unique_ptr<ShmChannel> shm_;
  std::unique_ptr<SerialWorker> shm_worker_;  // after shm_: stops first
  bool shm_tried_ = false;
  std::mutex shm_mutex_;
  uint64_t sequence_ = 0;
};

}  // namespace openneuron::integration
