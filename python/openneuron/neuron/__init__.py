"""torch.neuron: the API of torch.cuda, for the neuron device."""
from . import _utils
from ._device import (
    NeuronDeviceProperties,
    _is_in_bad_fork,
    _lazy_init,
    current_device,
    device,
    device_count,
    device_of,
    get_amp_supported_dtype,
    get_device_capability,
    get_device_name,
    get_device_properties,
    init,
    is_available,
    is_bf16_supported,
    is_initialized,
    set_device,
    synchronize,
)
from .memory import (
    empty_cache,
    get_per_process_memory_fraction,
    host_memory_stats,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_snapshot,
    memory_stats,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
)
from .random import (
    default_generators,
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from .reports import (
    fallback_policy,
    eager_fusion_stats,
    eager_kernel_report,
    is_eager_fusion_enabled,
    reset_eager_fusion_stats,
    set_eager_fusion,
    fallback_report,
    format_fallback_report,
    reset_eager_kernel_report,
    reset_fallback_report,
    reset_transfer_stats,
    set_fallback_policy,
    total_transfers,
    transfer_stats,
)
from .streams import Event, Stream, StreamContext, current_stream, default_stream, set_stream, stream

OutOfMemoryError = __import__("torch").OutOfMemoryError
