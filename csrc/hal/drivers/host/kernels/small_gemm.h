// Matrix products with few rows (M <= 8): one decode step of a language
// model multiplies a handful of token vectors by each weight matrix. BLAS
// libraries tune for large M and leave these far from memory bandwidth (MKL
// on this repo's machine: x @ W.t() for x [2, 256], W [8000, 256] takes
// ~6x the time of reading W once); here every output row is computed while
// each weight element is read once.
//
// Arithmetic is fixed by the shapes alone: each output element is computed by
// one thread in one order, so results do not depend on the thread count.
#pragma once

#include <cstdint>

#include "hal/host_kernels.h"

namespace openneuron::hal::host {

using hal::kSmallGemmMaxRows;
using hal::SmallGemmF32;

// Whether small_gemm_f32 computes this product (row count, unit strides) and
// is expected to beat a BLAS at it.
bool small_gemm_applies(const SmallGemmF32& g);

// Computes output columns [n_begin, n_end) of every row; callers split the
// columns across threads.
void small_gemm_f32(const SmallGemmF32& g, int64_t n_begin, int64_t n_end);

// The fewest output columns worth a thread of their own (~32K multiply-adds,
// and at least one 64-column block): the grain callers split columns with.
int64_t small_gemm_column_grain(const SmallGemmF32& g);

}  // namespace openneuron::hal::host
