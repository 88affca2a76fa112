"""Inputs past 2^31 elements, for the LayerNorm units' cases of a row's offset in 64 bits: the
parent makes a small tile, the GPU repeats it row by row with an offset of each row's own (a
read from any other row shows), and only the last rows come back, judged against float64 rows
rebuilt from the tile. No tensor of that size is made on the CPU, in the child or in the grader."""
import torch

TILE_ROWS, LAST_ROWS = 37, 3


def row_offsets(rows, device="cpu"):
    """Row r adds (r % 13) / 64: multiples of 1/64 below 1.25, exact in fp16 and wider, so the
    GPU's rows and the parent's agree bit for bit."""
    return (torch.arange(rows, device=device) % 13).double() / 64


def random_tile(cols, generator):
    """Multiples of 1/64 in [-1, 1): exact in fp16 with any row offset added."""
    return torch.randint(-64, 64, (TILE_ROWS, cols), generator=generator) / 64


def tiled_rows(tile, rows):
    """[rows, cols] on the tile's device: row r is tile row r % TILE_ROWS plus its offset."""
    x = tile.repeat(-(-rows // TILE_ROWS), 1)[:rows]
    x += row_offsets(rows, x.device)[:, None].to(x.dtype)  # in place: one large tensor, not two
    return x


def last_rows(tile, rows):
    """The last LAST_ROWS rows of tiled_rows(tile, rows), in float64, made from the tile alone."""
    index = torch.arange(rows - LAST_ROWS, rows)
    return tile.double()[index % TILE_ROWS] + row_offsets(rows)[index, None]


def last_of(outputs):
    """Each output's last LAST_ROWS rows (mean's and rstd's last elements), copied: what comes back."""
    return tuple(t[-LAST_ROWS:].clone() for t in outputs)
