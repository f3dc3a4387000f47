#include "torch/distributed/shm_collectives.h"

#include <algorithm>
#include <cstring>

namespace openneuron::integration::shm {
namespace {

using Op = c10d::ReduceOp::RedOpType;

at::Tensor view_of(char* data, int64_t numel, c10::ScalarType dtype) {
  return at::from_blob(data, {numel}, at::TensorOptions().dtype(dtype));
}

void reduce_into(at::Tensor& acc, const at::Tensor& x, Op op) {
  switch (op) {
    case Op::SUM: acc.add_(x); break;
    case Op::PRODUCT: acc.mul_(x); break;
    case Op::MIN: at::minimum_out(acc, acc, x); break;
    case Op::MAX: at::maximum_out(acc, acc, x); break;
    case Op::BAND: acc.bitwise_and_(x); break;
    case Op::BOR: acc.bitwise_or_(x); break;
    case Op::BXOR: acc.bitwise_xor_(x); break;
    default: TORCH_INTERNAL_ASSERT(false, "shm reduce: unsupported op");
  }
}

// [begin, end) of the part of `n` elements that `rank` reduces.
std::pair<int64_t, int64_t> part(int64_t n, int rank, int size) {
  return {n * rank / size, n * (rank + 1) / size};
}

// Runs `body` on a contiguous tensor holding `t`'s values, then writes the
// result back if `t` was not contiguous.
template <typename Body>
void on_contiguous(at::Tensor& t, Body body) {
  at::Tensor c = t.is_contiguous() ? t : t.contiguous();
  body(c);
  if (!c.is_same(t)) t.copy_(c);
}

// Calls body(offset, count) for each chunk of `numel` elements, `chunk` at
// a time, on the other slot set each time.
template <typename Body>
void for_each_chunk(ShmChannel& ch, int64_t numel, int64_t chunk, Body body) {
  for (int64_t off = 0; off < numel; off += chunk) {
    ch.next_set();
    body(off, std::min(chunk, numel - off));
  }
}

}  // namespace

bool supports(c10::ScalarType dtype, Op op) {
  const bool is_bool = dtype == at::kBool;
  const bool is_complex = at::isComplexType(dtype);
  const bool is_integral = at::isIntegralType(dtype, /*includeBool=*/true);
  switch (op) {
    case Op::SUM:
    case Op::PRODUCT: return !is_bool;
    case Op::MIN:
    case Op::MAX: return !is_complex;
    case Op::BAND:
    case Op::BOR:
    case Op::BXOR: return is_integral;
    default: return false;
  }
}

void allreduce(ShmChannel& ch, at::Tensor& tensor, Op op,
               std::chrono::milliseconds timeout) {
  on_contiguous(tensor, [&](at::Tensor& t) {
    const auto dtype = t.scalar_type();
    const int64_t elem = t.element_size();
    const int64_t chunk = static_cast<int64_t>(ch.slot_bytes()) / elem;
    char* data = static_cast<char*>(t.data_ptr());
    for_each_chunk(ch, t.numel(), chunk, [&](int64_t off, int64_t n) {
      std::memcpy(ch.slot(ch.rank()), data + off * elem, n * elem);
      ch.barrier(timeout);
      // Each rank reduces its part of the chunk, in its own slot.
      auto [lo, hi] = part(n, ch.rank(), ch.size());
      if (hi > lo) {
        at::Tensor acc = view_of(ch.slot(ch.rank()) + lo * elem, hi - lo, dtype);
        for (int p = 0; p < ch.size(); ++p)
          if (p != ch.rank())
            reduce_into(acc, view_of(ch.slot(p) + lo * elem, hi - lo, dtype), op);
      }
      ch.barrier(timeout);
      for (int p = 0; p < ch.size(); ++p) {
        auto [plo, phi] = part(n, p, ch.size());
        std::memcpy(data + (off + plo) * elem, ch.slot(p) + plo * elem,
                    (phi - plo) * elem);
      }
    });
  });
}

void broadcast(ShmChannel& ch, at::Tensor& tensor, int root,
               std::chrono::milliseconds timeout) {
  on_contiguous(tensor, [&](at::Tensor& t) {
    const int64_t elem = t.element_size();
    const int64_t chunk = static_cast<int64_t>(ch.slot_bytes()) / elem;
    char* data = static_cast<char*>(t.data_ptr());
    for_each_chunk(ch, t.numel(), chunk, [&](int64_t off, int64_t n) {
      if (ch.rank() == root) std::memcpy(ch.slot(root), data + off * elem, n * elem);
      ch.barrier(timeout);
      if (ch.rank() != root) std::memcpy(data + off * elem, ch.slot(root), n * elem);
    });
  });
}

void all_gather_into_tensor(ShmChannel& ch, at::Tensor& output,
                            const at::Tensor& input,
                            std::chrono::milliseconds timeout) {
  const at::Tensor in = input.contiguous();
  on_contiguous(output, [&](at::Tensor& out) {
    const int64_t elem = in.element_size();
    const int64_t numel = in.numel();
    TORCH_CHECK(out.numel() == numel * ch.size(),
                "all_gather_into_tensor: output has ", out.numel(),
                " elements, expected ", numel * ch.size());
    const int64_t chunk = static_cast<int64_t>(ch.slot_bytes()) / elem;
    const char* src = static_cast<const char*>(in.data_ptr());
    char* dst = static_cast<char*>(out.data_ptr());
    for_each_chunk(ch, numel, chunk, [&](int64_t off, int64_t n) {
      std::memcpy(ch.slot(ch.rank()), src + off * elem, n * elem);
      ch.barrier(timeout);
      for (int p = 0; p < ch.size(); ++p)
        std::memcpy(dst + (p * numel + off) * elem, ch.slot(p), n * elem);
    });
  });
}

void reduce_scatter_tensor(ShmChannel& ch, at::Tensor& output,
                           const at::Tensor& input, Op op,
                           std::chrono::milliseconds timeout) {
  const at::Tensor in = input.contiguous();
  on_contiguous(output, [&](at::Tensor& out) {
    const auto dtype = in.scalar_type();
    const int64_t elem = in.element_size();
    const int64_t numel = out.numel();  // per rank
    TORCH_CHECK(in.numel() == numel * ch.size(),
                "reduce_scatter_tensor: input has ", in.numel(),
                " elements, expected ", numel * ch.size());
    // A slot holds one chunk of every rank's piece.
    const int64_t chunk =
        static_cast<int64_t>(ch.slot_bytes()) / (elem * ch.size());
    const char* src = static_cast<const char*>(in.data_ptr());
    char* dst = static_cast<char*>(out.data_ptr());
    for_each_chunk(ch, numel, chunk, [&](int64_t off, int64_t n) {
      for (int p = 0; p < ch.size(); ++p)
        std::memcpy(ch.slot(ch.rank()) + p * n * elem,
                    src + (p * numel + off) * elem, n * elem);
      ch.barrier(timeout);
      // My piece, reduced over every rank's slot in rank order.
      at::Tensor acc = view_of(dst + off * elem, n, dtype);
      acc.copy_(view_of(ch.slot(0) + ch.rank() * n * elem, n, dtype));
      for (int p = 1; p < ch.size(); ++p)
        reduce_into(acc, view_of(ch.slot(p) + ch.rank() * n * elem, n, dtype), op);
    });
  });
}

}  // namespace openneuron::integration::shm
