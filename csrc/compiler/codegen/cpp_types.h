// C++ type names of IR dtypes, for the C++ target's generated code.
#pragma once

#include "compiler/ir/dtype.h"

namespace openneuron::compiler {

// The C++ type a buffer of this dtype holds in generated code.
const char* storage_ctype(DType d);
// The C++ type arithmetic is done in: float16/bfloat16 compute in float,
// integers in int64_t.
const char* compute_ctype(DType d);

}  // namespace openneuron::compiler
