// Thread-local state read on every op. The module is a shared library, so
// plain thread_local variables cost a __tls_get_addr call per access; the
// initial-exec model makes them one load. Static TLS space for a dlopen'ed
// library is small, so only scalars and pointers may use it: larger
// per-thread state lives on the heap behind an OPENNEURON_FAST_TLS pointer.
#pragma once

#define OPENNEURON_FAST_TLS __attribute__((tls_model("initial-exec")))
