"""The same values in other layouts, made on the device where the op will see them (a copy
to the device would not keep them). Any unit's suite applies them to its inputs."""
import torch


def misaligned(t):
    """The same values, contiguous, starting one element past a 16-byte boundary."""
    flat = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
    flat[1:] = t.reshape(-1)
    return flat[1:].view(t.shape)


LAYOUTS = {
    # column-major storage: walked as rows, it yields the values of other rows
    "transposed": lambda t: t.transpose(-1, -2).contiguous().transpose(-1, -2),
    # every other element of a tensor twice as long: walked as rows, it yields the NaN gaps
    "every_other": lambda t: torch.stack([t, torch.full_like(t, float("nan"))], dim=-1)[..., 0],
    "misaligned": misaligned,
}
