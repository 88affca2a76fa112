"""RMSNorm and RMSNorm + INT8 in Triton, as operators torch.compile sees into:
torch.ops.rmsnorm_triton.{rms_norm, rms_norm_backward, rms_norm_quant, add_rms_norm_quant},
with the same schemas and math as the CUDA ones (rmsnorm_kernels.h).

A row per program, held whole in one block of BLOCK = next power of two >= D lanes: the lanes
past D are masked, and read as 0 so that they add nothing to the sum of squares or to the max.
The quantization holds rows of up to LONG_ROW elements; a longer one (D up to 16384) would
spill registers, so its kernel walks the row in chunks, twice. rms_norm and its backward take
rows of any length: past ROW_MAX they walk them too, as the CUDA kernels' version 2 does.

torch.library.triton_op registers each function as an operator: its fake kernel is the
function itself run on fake tensors (the launches, wrapped in wrap_triton, are recorded
instead of run), so torch.compile traces it and can even inline the Triton kernels into its
own graph.

An operator's Python dispatch costs more host time than its launches (docs/performance.md):
in eager mode, the calls of rmsnorm_int8.py run the same functions straight (`EAGER`), and
torch.compile, opcheck and torch.ops users get the operators.
"""
import functools
import threading

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

MAX_COLS = 16384  # the quantization's longest row
ROW_MAX = 16384  # rms_norm's rows up to this are held in registers; longer ones are walked
WALK_CHUNK, WALK_WARPS = 4096, 8
# TODO(day09): the row length past which the quantization walks its rows in chunks
# (rms_norm_quant_long_kernel), the chunk and the warps: yours to choose, in _quant.
DTYPES = (torch.float16, torch.bfloat16, torch.float32)

if hasattr(torch.library, "triton_op"):  # torch >= 2.6
    define_op, _wrap = torch.library.triton_op, torch.library.wrap_triton
else:  # an opaque custom op, launched as is: torch.compile treats it as a black box
    define_op, _wrap = torch.library.custom_op, lambda kernel: kernel


class _Direct(threading.local):
    on = False  # set while _run_direct runs a function outside its operator


_direct = _Direct()


def launch(kernel):
    """The kernel as torch.compile can record it (inside an operator), or as is (eager)."""
    return kernel if _direct.on else _wrap(kernel)


_TODOS: dict[str, str] = {}  # kernel: what is left to write in it


def todo(kernel: str, message: str) -> None:
    _TODOS[kernel] = message


def _refuse_unfinished(*kernels: str) -> None:
    """An op whose kernels are not written yet raises, rather than launching them."""
    left = [_TODOS[kernel] for kernel in kernels if kernel in _TODOS]
    if left:
        raise NotImplementedError("this op is not finished yet:\n" + "\n".join(left))


# TODO(day09): the warps of the forward's and the quantization's programs are yours to choose
# (in _rms_norm and _quant): the lesson says what they trade.


@functools.cache
def _multiprocessors(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


@functools.cache
def _l2_bytes(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).L2_cache_size


def _check(op: str, x: torch.Tensor, weight, eps: float, weight_required: bool = True,
           max_cols: int | None = MAX_COLS) -> None:
    """Refuse what the kernels cannot take, naming the argument (weight may be None where it is
    not required: ones; max_cols None: rows of any length)."""
    if not isinstance(x, torch.Tensor) or not x.is_cuda:
        raise ValueError(f"{op}: x must be a CUDA tensor (Triton runs on the GPU), got "
                         f"{x.device if isinstance(x, torch.Tensor) else type(x).__name__}")
    if x.dim() < 1 or x.shape[-1] < 1 or (max_cols is not None and x.shape[-1] > max_cols):
        within = "D >= 1" if max_cols is None else f"1 <= D <= {max_cols}"
        raise ValueError(f"{op}: x must have shape [..., D] with {within}, got {list(x.shape)}")
    if x.dtype not in DTYPES:
        raise ValueError(f"{op}: x must be float16, bfloat16 or float32, got {x.dtype}")
    if weight is None and not weight_required:
        return _check_eps(op, eps)
    if not isinstance(weight, torch.Tensor) or weight.shape != x.shape[-1:] or weight.dtype != x.dtype \
            or weight.device != x.device:
        got = f"{list(weight.shape)} {weight.dtype} on {weight.device}" if isinstance(weight, torch.Tensor) \
            else repr(weight)
        raise ValueError(f"{op}: weight must be a [{x.shape[-1]}] tensor of x's dtype {x.dtype} on {x.device}, "
                         f"got {got}")
    _check_eps(op, eps)


def _check_eps(op: str, eps: float) -> None:
    if not eps >= 0:
        raise ValueError(f"{op}: eps must be >= 0, got {eps}")


# ---- forward: rstd = 1 / sqrt(Σx² / D + eps), y = x · rstd · w ----

@triton.jit
def rms_norm_forward_kernel(x_ptr, w_ptr, y_ptr, rstd_ptr, cols, eps, HAS_WEIGHT: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < cols
    pass  # TODO(day09): the row in float32, rstd, then y and rstd stored


todo("rms_norm_forward_kernel", "TODO(day09): rmsnorm_triton.py, rms_norm_forward_kernel: load the row in float32 "
     "(masked lanes read 0), rstd = 1 / sqrt(sum(x * x) / cols + tl.cast(eps, tl.float32)) (torch.compile passes "
     "eps as float64), store y = x * rstd * w in y's dtype and rstd; then delete this line")


@triton.jit
def rms_norm_forward_walk_kernel(x_ptr, w_ptr, y_ptr, rstd_ptr, rows, cols, eps, HAS_WEIGHT: tl.constexpr,
                                 CHUNK: tl.constexpr):
    """Rows longer than ROW_MAX, CHUNK lanes at a time: a first pass sums x², a second reads
    the row again (from L2, where the first left it) for y. A program takes rows program,
    program + programs, ...: few enough rows are in flight for their bytes to stay in L2."""
    for row in range(tl.program_id(0).to(tl.int64), rows, tl.num_programs(0)):  # row * cols may pass 2^31
        start = row * cols
        x_squares = tl.zeros([CHUNK], dtype=tl.float32)
        for first in range(0, cols, CHUNK):
            offsets = first + tl.arange(0, CHUNK)
            x = tl.load(x_ptr + start + offsets, mask=offsets < cols, other=0.0).to(tl.float32)
            x_squares += x * x
        rstd = tl.div_rn(1.0, tl.sqrt_rn(tl.sum(x_squares, axis=0) / cols + tl.cast(eps, tl.float32)))
        for first in range(0, cols, CHUNK):
            offsets = first + tl.arange(0, CHUNK)
            mask = offsets < cols
            y = tl.load(x_ptr + start + offsets, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
            y = y * rstd
            if HAS_WEIGHT:
                y = y * tl.load(w_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_ptr + start + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)
        tl.store(rstd_ptr + row, rstd)


def _walking_programs(x: torch.Tensor, rows: int, row_bytes: int) -> int:
    """Programs for a kernel that walks each row twice: no more rows in flight than half the
    L2 holds, and at least one program per multiprocessor (the CUDA kernels' wide_blocks)."""
    fit = _l2_bytes(x.device) // 2 // max(row_bytes, 1)
    return max(1, min(rows, max(fit, _multiprocessors(x.device))))


def _rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    _refuse_unfinished("rms_norm_forward_kernel")
    _check("rms_norm", x, weight, eps, weight_required=False, max_cols=None)
    x = x.contiguous()
    y = torch.empty_like(x)
    rstd = torch.empty(x.shape[:-1], device=x.device, dtype=torch.float32)
    cols = x.shape[-1]
    rows = x.numel() // cols
    block = triton.next_power_of_2(cols)
    if block <= ROW_MAX:
        raise NotImplementedError("TODO(day09): rmsnorm_triton.py, rms_norm_forward_kernel: launch it, a program "
                                  "per row (launch(rms_norm_forward_kernel)[grid](...): torch.compile records "
                                  "it), BLOCK = block, num_warps your choice")
    elif rows:
        launch(rms_norm_forward_walk_kernel)[(_walking_programs(x, rows, cols * x.element_size()),)](
            x, weight, y, rstd, rows, cols, eps, HAS_WEIGHT=weight is not None, CHUNK=WALK_CHUNK,
            num_warps=WALK_WARPS)
    return y, rstd


rms_norm = define_op("rmsnorm_triton::rms_norm", _rms_norm, mutates_args=())


# ---- backward: dx = rstd · (g − x̂ · mean(g · x̂)), dw = Σ_rows dy · x̂ (x̂ = x · rstd, g = dy · w) ----

@triton.jit
def rms_norm_backward_kernel(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, partial_ptr, rows, cols, rows_per_program,
                             HAS_WEIGHT: tl.constexpr, BLOCK: tl.constexpr):
    """A program walks rows_per_program rows, adding dy · x̂ of each into one running row,
    which it stores as its row of partial dw sums: a second, small sum over the programs'
    rows gives dw. The weight is read with each row (from L1): held, it would take registers
    the row needs."""
    program = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < cols
    dw = tl.zeros([BLOCK], dtype=tl.float32)
    first = program.to(tl.int64) * rows_per_program  # row * cols may pass 2^31
    for row in range(first, tl.minimum(first + rows_per_program, rows)):
        x_row, dy_row, dx_row = x_ptr + row * cols, dy_ptr + row * cols, dx_ptr + row * cols
        rstd = tl.load(rstd_ptr + row)
        pass  # TODO(day09): this row's dx, and dw += dy * x̂
    tl.store(partial_ptr + program.to(tl.int64) * cols + offsets, dw, mask=mask)


todo("rms_norm_backward_kernel", "TODO(day09): rmsnorm_triton.py, rms_norm_backward_kernel: for each of the "
     "program's rows: x̂ = x * rstd, g = dy * w (w may be absent: ones), dx = rstd * (g - x̂ * sum(g * x̂) / cols), "
     "and dw += dy * x̂; then delete this line")


@triton.jit
def rms_norm_backward_walk_kernel(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, rows, cols, HAS_WEIGHT: tl.constexpr,
                                  CHUNK: tl.constexpr):
    """dx for rows longer than ROW_MAX, as the forward walks them: a first pass sums g · x̂, a
    second reads x and dy again (from L2) for dx. dw is rms_norm_dw_columns_kernel's."""
    for row in range(tl.program_id(0).to(tl.int64), rows, tl.num_programs(0)):  # row * cols may pass 2^31
        start = row * cols
        rstd = tl.load(rstd_ptr + row)
        sums = tl.zeros([CHUNK], dtype=tl.float32)
        for first in range(0, cols, CHUNK):
            offsets = first + tl.arange(0, CHUNK)
            mask = offsets < cols
            g = tl.load(dy_ptr + start + offsets, mask=mask, other=0.0).to(tl.float32)
            if HAS_WEIGHT:
                g = g * tl.load(w_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
            sums += g * (tl.load(x_ptr + start + offsets, mask=mask, other=0.0).to(tl.float32) * rstd)
        mean_g_xhat = tl.sum(sums, axis=0) / cols
        for first in range(0, cols, CHUNK):
            offsets = first + tl.arange(0, CHUNK)
            mask = offsets < cols
            g = tl.load(dy_ptr + start + offsets, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
            if HAS_WEIGHT:
                g = g * tl.load(w_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
            xhat = tl.load(x_ptr + start + offsets, mask=mask, other=0.0, eviction_policy="evict_first")
            xhat = xhat.to(tl.float32) * rstd
            tl.store(dx_ptr + start + offsets, (rstd * (g - xhat * mean_g_xhat)).to(dx_ptr.dtype.element_ty),
                     mask=mask)


@triton.jit
def rms_norm_dw_columns_kernel(dy_ptr, x_ptr, rstd_ptr, partial_ptr, rows, cols, rows_per_strip,
                               ROWS: tl.constexpr, COLUMNS: tl.constexpr):
    """dw for rows longer than ROW_MAX: program (c, s) sums dy · x̂ over columns c · COLUMNS ...
    of the rows of strip s, ROWS rows at a time, into partial row s."""
    columns = tl.program_id(0) * COLUMNS + tl.arange(0, COLUMNS)
    in_row = columns < cols
    strip = tl.program_id(1).to(tl.int64)
    begin = strip * rows_per_strip
    end = tl.minimum(begin + rows_per_strip, rows)
    sums = tl.zeros([ROWS, COLUMNS], dtype=tl.float32)
    for first_row in range(begin, end, ROWS):
        row = first_row + tl.arange(0, ROWS)
        mask = (row < end)[:, None] & in_row[None, :]
        at = row[:, None] * cols + columns[None, :]
        rstd = tl.load(rstd_ptr + row, mask=row < end, other=0.0)[:, None]
        xhat = tl.load(x_ptr + at, mask=mask, other=0.0).to(tl.float32) * rstd
        sums += tl.load(dy_ptr + at, mask=mask, other=0.0).to(tl.float32) * xhat
    tl.store(partial_ptr + strip * cols + columns, tl.sum(sums, axis=0), mask=in_row)


# TODO(day09): rms_norm_backward_kernel's launch is yours: see _backward_in_registers.
COLUMN_ROWS, COLUMN_WIDTH, COLUMN_WARPS = 8, 512, 4


# TODO(day09): how many warps rms_norm_backward_kernel's programs get: yours to choose.


def _backward_in_registers(dy, x, weight, rstd, dx, rows: int, cols: int) -> torch.Tensor:
    """rms_norm_backward_kernel's launch; returns the partial dw rows."""
    raise NotImplementedError("TODO(day09): rmsnorm_triton.py, rms_norm_backward_kernel: launch it (launch(...)"
                              "[grid]) with BLOCK = triton.next_power_of_2(cols), and return its float32 "
                              "[programs, cols] partial dw rows: how many programs, so how many rows each walks, "
                              "and their warps are yours")


def _backward_walking(dy, x, weight, rstd, dx, rows: int, cols: int) -> torch.Tensor:
    """The long rows' two kernels; returns the partial dw rows."""
    programs = _walking_programs(x, rows, 2 * cols * x.element_size())
    launch(rms_norm_backward_walk_kernel)[(programs,)](
        dy, x, weight, rstd, dx, rows, cols, HAS_WEIGHT=weight is not None, CHUNK=WALK_CHUNK, num_warps=WALK_WARPS)
    tiles = triton.cdiv(cols, COLUMN_WIDTH)
    strips = max(1, min(triton.cdiv(rows, COLUMN_ROWS), triton.cdiv(8 * _multiprocessors(x.device), tiles)))
    partials = torch.empty(strips, cols, device=x.device, dtype=torch.float32)
    launch(rms_norm_dw_columns_kernel)[(tiles, strips)](
        dy, x, rstd, partials, rows, cols, triton.cdiv(rows, strips), ROWS=COLUMN_ROWS, COLUMNS=COLUMN_WIDTH,
        num_warps=COLUMN_WARPS)
    return partials


def _rms_norm_backward(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor | None,
                       rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    _refuse_unfinished("rms_norm_backward_kernel")
    _check("rms_norm_backward", x, weight, 0.0, weight_required=False, max_cols=None)
    if dy.shape != x.shape or dy.dtype != x.dtype or rstd.shape != x.shape[:-1] or rstd.dtype != torch.float32:
        raise ValueError(f"rms_norm_backward: dy must be shaped like x {list(x.shape)} in {x.dtype} and rstd "
                         f"{list(x.shape[:-1])} in float32, got {list(dy.shape)} {dy.dtype}, {list(rstd.shape)} "
                         f"{rstd.dtype}")
    x, dy, rstd = x.contiguous(), dy.contiguous(), rstd.contiguous()
    cols = x.shape[-1]
    rows = x.numel() // cols
    dx = torch.empty_like(x)
    if not rows:
        return dx, torch.zeros(cols, device=x.device, dtype=x.dtype)
    walk = triton.next_power_of_2(cols) > ROW_MAX
    partials = (_backward_walking if walk else _backward_in_registers)(dy, x, weight, rstd, dx, rows, cols)
    return dx, partials.sum(0).to(x.dtype)


rms_norm_backward = define_op("rmsnorm_triton::rms_norm_backward", _rms_norm_backward, mutates_args=())


def _setup_context(ctx, inputs, output):
    x, weight, _ = inputs
    ctx.save_for_backward(x, weight, output[1])
    ctx.has_weight = weight is not None


def _backward(ctx, dy, _drstd):
    x, weight, rstd = ctx.saved_tensors
    dx, dweight = torch.ops.rmsnorm_triton.rms_norm_backward(dy, x, weight if ctx.has_weight else None, rstd)
    return dx, (dweight if ctx.has_weight else None), None


rms_norm.register_autograd(_backward, setup_context=_setup_context)


# ---- quantization: scale = max|y| / 127, q = clamp(round(y / scale), −127, 127) ----

@triton.jit
def rms_norm_quant_kernel(x_ptr, residual_ptr, w_ptr, q_ptr, scale_ptr, cols, eps, HAS_RESIDUAL: tl.constexpr,
                          BLOCK: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * cols
    offsets = tl.arange(0, BLOCK)
    mask = offsets < cols
    x = tl.load(x_ptr + start + offsets, mask=mask, other=0.0)
    if HAS_RESIDUAL:  # r = x + residual, rounded to the dtype, stored back, and normalized
        x = (x.to(tl.float32) + tl.load(residual_ptr + start + offsets, mask=mask, other=0.0).to(tl.float32))
        x = x.to(residual_ptr.dtype.element_ty)
        tl.store(residual_ptr + start + offsets, x, mask=mask)
    x = x.to(tl.float32)
    rstd = tl.div_rn(1.0, tl.sqrt_rn(tl.sum(x * x, axis=0) / cols + tl.cast(eps, tl.float32)))  # compiled: eps is fp64
    y = x * rstd * tl.load(w_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    pass  # TODO(day09): scale, q, and both stored


todo("rms_norm_quant_kernel", "TODO(day09): rmsnorm_triton.py, rms_norm_quant_kernel: scale = max|y| / 127, "
     "q = clamp(rint(y * inv_scale), -127, 127) with inv_scale = tl.div_rn(1.0, scale), or 0 where the scale is 0 "
     "(libdevice.rint rounds half to even), store q as int8 and the scale; then delete this line")


@triton.jit
def rms_norm_quant_long_kernel(x_ptr, residual_ptr, w_ptr, q_ptr, scale_ptr, cols, eps, HAS_RESIDUAL: tl.constexpr,
                               CHUNK: tl.constexpr):
    """Rows longer than LONG_ROW, in CHUNK lanes at a time: a first pass sums x² and takes
    max|x · w|, a second reads the row again (from L2, where the first left it) for q. With
    y = (x · w) · rstd the max needs no pass of its own: rstd > 0 and rounding is monotonic, so
    max|y| = max|x · w| · rstd, to the bit."""
    start = tl.program_id(0).to(tl.int64) * cols
    squares = tl.zeros([CHUNK], dtype=tl.float32)
    largest = tl.zeros([CHUNK], dtype=tl.float32)
    for first in range(0, cols, CHUNK):
        offsets = first + tl.arange(0, CHUNK)
        mask = offsets < cols
        x = tl.load(x_ptr + start + offsets, mask=mask, other=0.0)
        if HAS_RESIDUAL:
            x = (x.to(tl.float32) + tl.load(residual_ptr + start + offsets, mask=mask, other=0.0).to(tl.float32))
            x = x.to(residual_ptr.dtype.element_ty)
            tl.store(residual_ptr + start + offsets, x, mask=mask)
        x = x.to(tl.float32)
        squares += x * x
        largest = tl.maximum(largest, tl.abs(x * tl.load(w_ptr + offsets, mask=mask, other=0.0).to(tl.float32)))
    rstd = tl.div_rn(1.0, tl.sqrt_rn(tl.sum(squares, axis=0) / cols + tl.cast(eps, tl.float32)))
    if HAS_RESIDUAL:
        tl.debug_barrier()  # the second pass reads r back: every thread's stores first
    row_ptr = residual_ptr if HAS_RESIDUAL else x_ptr
    pass  # TODO(day09): scale from the max, then the second pass over the row: y, q stored; and the scale


todo("rms_norm_quant_long_kernel", "TODO(day09): rmsnorm_triton.py, rms_norm_quant_long_kernel: scale = "
     "max(largest) * rstd / 127 and inv_scale as in rms_norm_quant_kernel; then a second loop over the row's chunks: "
     "y = x * w * rstd (in that order, so that max|y| is the scale's max), q = clamp(rint(y * inv_scale), -127, 127) "
     "stored as int8; store the scale; then delete this line")


def _quant(x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor, eps: float):
    x = x.contiguous()
    cols = x.shape[-1]
    q = torch.empty(x.shape, device=x.device, dtype=torch.int8)
    scale = torch.empty(x.shape[:-1], device=x.device, dtype=torch.float32)
    raise NotImplementedError("TODO(day09): rmsnorm_triton.py, rms_norm_quant_kernel: launch it, a program per row, "
                              "where the row is held whole, and rms_norm_quant_long_kernel past the row length "
                              "of your choice (up to MAX_COLS); the blocks, chunk and warps yours")
    return q, scale


def _rms_norm_quant(x: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    _refuse_unfinished("rms_norm_quant_kernel", "rms_norm_quant_long_kernel")
    _check("rms_norm_quant", x, weight, eps)
    return _quant(x, None, weight, eps)


rms_norm_quant = define_op("rmsnorm_triton::rms_norm_quant", _rms_norm_quant, mutates_args=())


def _add_rms_norm_quant(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                       eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    _refuse_unfinished("rms_norm_quant_kernel", "rms_norm_quant_long_kernel")
    _check("add_rms_norm_quant", x, weight, eps)
    if residual.shape != x.shape or residual.dtype != x.dtype or residual.device != x.device:
        raise ValueError(f"add_rms_norm_quant: residual must be shaped like x {list(x.shape)} in {x.dtype} on "
                         f"{x.device}, got {list(residual.shape)} {residual.dtype} on {residual.device}")
    if not residual.is_contiguous():
        raise ValueError("add_rms_norm_quant: residual must be contiguous (it is updated in place), got strides "
                         f"{residual.stride()}")
    return _quant(x, residual, weight, eps)


add_rms_norm_quant = define_op("rmsnorm_triton::add_rms_norm_quant", _add_rms_norm_quant, mutates_args=("residual",))


# ---- eager: the same functions without the operators' dispatch ----

def _run_direct(function, *args):
    _direct.on = True
    try:
        return function(*args)
    finally:
        _direct.on = False


class _RMSNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        y, rstd = _run_direct(_rms_norm, x, weight, eps)
        ctx.save_for_backward(x, weight, rstd)
        ctx.mark_non_differentiable(rstd)
        return y, rstd

    @staticmethod
    def backward(ctx, dy, _drstd):
        x, weight, rstd = ctx.saved_tensors
        dx, dweight = _run_direct(_rms_norm_backward, dy, x, weight, rstd)
        return dx, (dweight if weight is not None else None), None


# For real CUDA tensors in eager mode only: fake tensors and torch.compile need the operators.
EAGER = {
    "rms_norm": _RMSNormFunction.apply,
    "rms_norm_quant": lambda x, weight, eps: _run_direct(_rms_norm_quant, x, weight, eps),
    "add_rms_norm_quant": lambda x, residual, weight, eps: _run_direct(_add_rms_norm_quant, x, residual, weight, eps),
}
