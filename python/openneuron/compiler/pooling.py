"""max_pool2d_with_indices as ops the compiler generates: the input padded
with -inf (a pad view, computed where it is read), one strided slice per
window position, and a running max with its index, so the pool is one fused
kernel instead of ATen's NCHW kernel (2.5 ms for ResNet's 16x32x32x32 stem
pool on this machine, 0.28 ms channels-last; ResNet training's largest eager
op after convolutions).

The scan is ATen's: window rows then columns, a value replaces the max when
it is greater or NaN, and the index starts at the window's first position
inside the input. So values and indices (which the backward uses) are ATen's,
ties included."""
import torch
from torch._meta_registrations import pooling_output_shape

aten = torch.ops.aten


def _pair(v, default=None):
    if isinstance(v, int):
        return v, v
    if not v:
        return default
    return (v[0], v[0]) if len(v) == 1 else (v[0], v[1])


def _first_inside(start, dilation):
    """The first window position >= 0, stepping by the dilation (ATen's
    `while (start < 0) start += dilation`)."""
    return start + (start.neg().clamp(min=0) + dilation - 1) // dilation * dilation


def max_pool2d_with_indices(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    if x.device.type != "neuron" or not x.is_floating_point() or x.dim() not in (3, 4):
        return NotImplemented  # integers: ATen's kernel (a -inf fill has no integer)
    kh, kw = _pair(kernel_size)
    sh, sw = _pair(stride, (kh, kw))
    ph, pw = _pair(padding)
    dh, dw = _pair(dilation)
    height, width = x.shape[-2], x.shape[-1]
    out_h = pooling_output_shape(height, kh, ph, sh, dh, ceil_mode)
    out_w = pooling_output_shape(width, kw, pw, sw, dw, ceil_mode)
    # Pad so every window lies inside (ceil_mode's last window may reach past
    # the input's end and its padding).
    bottom = max(0, (out_h - 1) * sh + (kh - 1) * dh + 1 - height - ph)
    right = max(0, (out_w - 1) * sw + (kw - 1) * dw + 1 - width - pw)
    padded = aten.constant_pad_nd(x, [pw, right, ph, bottom], float("-inf"))
    rows = torch.arange(out_h, device=x.device) * sh - ph  # first window row, maybe in the padding
    cols = torch.arange(out_w, device=x.device) * sw - pw
    index = (_first_inside(rows, dh) * width).unsqueeze(1) + _first_inside(cols, dw)
    best = None
    for i in range(kh):
        for j in range(kw):
            value = aten.slice(aten.slice(padded, -2, i * dh, i * dh + (out_h - 1) * sh + 1, sh),
                               -1, j * dw, j * dw + (out_w - 1) * sw + 1, sw)
            at = ((rows + i * dh) * width).unsqueeze(1) + (cols + j * dw)
            if best is None:  # the max starts at -inf: any value but -inf replaces it
                best = value
                index = torch.where(value != float("-inf"), at, index)
                continue
            take = (value > best) | torch.isnan(value)
            best = torch.where(take, value, best)
            index = torch.where(take, at, index)
    # Laid out as ATen lays them out: in the input's memory format.
    layout = _memory_format(x)
    return best.contiguous(memory_format=layout), index.expand(best.shape).contiguous(memory_format=layout)


def _memory_format(t):
    if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous():
        return torch.channels_last
    return torch.contiguous_format


def pooling_decompositions():
    return {aten.max_pool2d_with_indices.default: max_pool2d_with_indices}
