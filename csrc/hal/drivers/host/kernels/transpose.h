// Transposing copies of float32 matrices: a column-major matrix laid out
// row-major (the layout oneDNN's matrix products read their left operand
// in). ATen's CPU copy_ does this one thread at a time in cache blocks; this
// kernel is blocked for L1 and splits the rows across threads.
#pragma once

#include <cstdint>

#include "hal/host_kernels.h"

namespace openneuron::hal::host {

// dst[r * cols + c] = src[c * src_ld + r] for rows r in [row_begin, row_end)
// and every column c in [0, cols): src holds a [rows, cols] column-major
// matrix with leading dimension src_ld >= rows.
void transpose_f32(const float* src, int64_t src_ld, int64_t cols, float* dst,
                   int64_t row_begin, int64_t row_end);

using hal::kTransposeRowGrain;

}  // namespace openneuron::hal::host
