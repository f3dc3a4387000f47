// The GLSL expression each IR pointwise op becomes in a GLSL target kernel,
// and the GLSL names of IR dtypes.
#pragma once

#include <string>

#include "compiler/ir/dtype.h"

namespace openneuron::compiler {

// A GLSL expression for an IR pointwise op over operands a, b, c already in
// the compute type `ct` ("bool", "int64_t", "float" or "double"). Throws
// UnsupportedError for an op GLSL cannot compute in `ct` (float64
// transcendentals: GLSL has them in float32 only, and narrowing is not an
// option), so the op runs elsewhere instead.
std::string pointwise_glsl(const std::string& ir_op, const std::string& ct, const std::string& a,
                           const std::string& b, const std::string& c);

// The type arithmetic is done in (16-bit floats compute in float, integers
// in int64_t), and the type a buffer element is stored as (bool as uint8_t,
// bfloat16 as its uint16_t bits).
const char* glsl_compute_type(DType d);
const char* glsl_storage_type(DType d);

}  // namespace openneuron::compiler
