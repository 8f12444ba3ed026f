"""The documentation's pictures of layouts and communication, drawn with matplotlib.

    python docs/img/make_figures.py          # writes the PNGs beside this file

- ``layout-block-cyclic.png`` (docs/lu.md): an 8 x 8 grid of blocks on a 2 x 4 mesh,
  as the caller lays it out (``P('rows', 'cols')``), block-cyclic, and one step of
  the LU on it: the panel, the rows it sends along, the trailing update.
- ``summa.png`` (docs/matmul.md): one step of SUMMA on a 2 x 4 mesh: the slices of A
  gathered along a mesh row, those of B along a mesh column, one local product.
- ``fft-pencil.png`` (docs/fft.md): a volume on a 4 x 2 mesh through the pencil
  plan's two ``all_to_all`` transposes, and through the slab-pencil plan's.

Colours are devices, the same in every picture: device ``(i, j)`` of the mesh is
colour ``i * pc + j``. Nothing here reads distla: the pictures draw the layouts the
pages describe (tests/test_figures.py checks them against ``distla.shard`` and the
transforms' output shardings).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import FancyArrowPatch, Rectangle  # noqa: E402

HERE = Path(__file__).resolve().parent
COLOURS = plt.get_cmap("tab10").colors[:8]
GREY = (0.86, 0.86, 0.86)
PNG = {"dpi": 110, "metadata": {"Software": None}}  # no version or date: reproducible files


def contiguous_owner(n: int, pr: int, pc: int) -> np.ndarray:
    """Device index of each of ``n x n`` blocks in 2D blocks ``P(r, c)``."""
    rows = np.arange(n) // (n // pr)
    cols = np.arange(n) // (n // pc)
    return rows[:, None] * pc + cols[None, :]


def cyclic_owner(n: int, pr: int, pc: int) -> np.ndarray:
    """Device index of each of ``n x n`` blocks, 2D block-cyclic: ``(I mod pr, J mod pc)``."""
    rows = np.arange(n) % pr
    cols = np.arange(n) % pc
    return rows[:, None] * pc + cols[None, :]


def _grid(ax, owner: np.ndarray, *, alpha=None, labels=True, pc=4) -> None:
    n = owner.shape[0]
    for i in range(n):
        for j in range(n):
            a = 1.0 if alpha is None else alpha[i, j]
            colour = COLOURS[owner[i, j]] if a > 0 else GREY
            ax.add_patch(
                Rectangle(
                    (j, n - 1 - i),
                    1,
                    1,
                    facecolor=colour,
                    alpha=max(a, 0.25),
                    lw=0.6,
                    edgecolor="white",
                )
            )
            if labels:
                d = owner[i, j]
                ax.text(
                    j + 0.5,
                    n - 0.5 - i,
                    f"{d // pc},{d % pc}",
                    ha="center",
                    va="center",
                    fontsize=6.5,
                    color="black",
                )
    ax.set_xlim(0, n)
    ax.set_ylim(0, n)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])


def block_cyclic(path: Path) -> None:
    n, pr, pc, k = 8, 2, 4, 2
    fig, axes = plt.subplots(1, 3, figsize=(11.5, 4.3))
    _grid(axes[0], contiguous_owner(n, pr, pc))
    axes[0].set_title(
        "the caller's layout: P('rows', 'cols')\ndevice (i, j) holds one contiguous 4 x 2 block",
        fontsize=9,
    )
    cyc = cyclic_owner(n, pr, pc)
    _grid(axes[1], cyc)
    axes[1].set_title(
        "block-cyclic: block (I, J) on device\n(I mod 2, J mod 4); one all_to_all per mesh axis",
        fontsize=9,
    )
    # step k of the LU: done (faded), the panel, U12's rows, the trailing matrix
    alpha = np.ones((n, n))
    alpha[:k, :] = 0.3
    alpha[:, :k] = 0.3
    _grid(axes[2], cyc, alpha=alpha)
    ax = axes[2]
    ax.add_patch(Rectangle((k, 0), 1, n - k, fill=False, lw=2.5, edgecolor="black"))
    ax.add_patch(
        Rectangle((k + 1, n - k - 1), n - k - 1, 1, fill=False, lw=2.0, ls="--", edgecolor="black")
    )
    ax.add_patch(
        Rectangle((k + 1, 0), n - k - 1, n - k - 1, fill=False, lw=1.2, ls=":", edgecolor="black")
    )
    ax.annotate(
        "panel k: factored on\nmesh column k mod 4",
        xy=(k, 1.5),
        xytext=(-0.4, 0.4),
        fontsize=8,
        ha="right",
        arrowprops={"arrowstyle": "->"},
        annotation_clip=False,
    )
    ax.annotate(
        "U12: row k, solved\nand gathered",
        xy=(n - 1.5, n - k - 0.5),
        xytext=(n + 0.3, n - 1.2),
        fontsize=8,
        arrowprops={"arrowstyle": "->"},
        annotation_clip=False,
    )
    ax.annotate(
        "A22 -= L21 U12:\none local GEMM\nper device",
        xy=(n - 2, 2),
        xytext=(n + 0.3, 1.0),
        fontsize=8,
        arrowprops={"arrowstyle": "->"},
        annotation_clip=False,
    )
    ax.set_title(f"LU step k = {k}: L21 goes along mesh rows,\nU12 along mesh columns", fontsize=9)
    fig.text(
        0.5,
        0.02,
        "8 x 8 blocks of nb x nb on a 2 x 4 mesh; label and colour: the "
        "device (row, column) that holds the block",
        ha="center",
        fontsize=8,
    )
    fig.subplots_adjust(left=0.08, right=0.88, wspace=0.55, bottom=0.1)
    fig.savefig(path, **PNG)
    plt.close(fig)


def summa(path: Path) -> None:
    pr, pc = 2, 4
    slices = 4  # the contraction dimension cut into L = lcm(pr, pc) = 4 chunks of one slice
    fig, axes = plt.subplots(1, 3, figsize=(11.5, 3.9), gridspec_kw={"width_ratios": [1, 1, 1]})
    i0, j0, s = 1, 2, 1  # device (1, 2), step s

    def blocks(ax, nr, nc, title):
        for i in range(nr):
            for j in range(nc):
                ax.add_patch(
                    Rectangle(
                        (j, nr - 1 - i),
                        1,
                        1,
                        facecolor=COLOURS[i * pc + j],
                        alpha=0.3,
                        edgecolor="white",
                        lw=1.5,
                    )
                )
        ax.set_xlim(0, nc)
        ax.set_ylim(0, nr)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(title, fontsize=9)

    # A: m x k, 2 x 4 blocks; each block column holds one chunk, slice s of it highlighted
    ax = axes[0]
    blocks(
        ax,
        pr,
        pc,
        f"A (m x k): step {s} takes slice {s} of every chunk;\nmesh row "
        f"{i0} all-gathers its slices: an A-panel (m/2) x (k/4)",
    )
    width = 1 / slices
    for j in range(pc):
        for i in range(pr):
            strong = i == i0
            ax.add_patch(
                Rectangle(
                    (j + s * width, pr - 1 - i),
                    width,
                    1,
                    facecolor=COLOURS[i * pc + j],
                    alpha=1.0 if strong else 0.55,
                    edgecolor="black" if strong else "none",
                    lw=1.0,
                )
            )
    ax.add_patch(
        FancyArrowPatch(
            (0.2, pr - 1 - i0 + 0.5),
            (pc - 0.2, pr - 1 - i0 + 0.5),
            arrowstyle="<->",
            mutation_scale=12,
            lw=1.5,
        )
    )
    # B: k x n, 2 x 4 blocks; slice s of every chunk is a block of rows
    ax = axes[1]
    blocks(
        ax, pr, pc, f"B (k x n): mesh column {j0} all-gathers\nits slices: a B-panel (k/4) x (n/4)"
    )
    chunks = 4 // pr  # each block of B holds lcm(pr, pc) / pr chunks, slice s of each
    height = 1 / chunks / slices
    for i in range(pr):
        for j in range(pc):
            strong = j == j0
            for c in range(chunks):
                top = pr - i - c / chunks - s * height
                ax.add_patch(
                    Rectangle(
                        (j, top - height),
                        1,
                        height,
                        facecolor=COLOURS[i * pc + j],
                        alpha=1.0 if strong else 0.55,
                        edgecolor="black" if strong else "none",
                        lw=1.0,
                    )
                )
    ax.add_patch(
        FancyArrowPatch(
            (j0 + 0.5, 0.15), (j0 + 0.5, pr - 0.15), arrowstyle="<->", mutation_scale=12, lw=1.5
        )
    )
    # C: m x n; device (i0, j0) adds the panel product into its block
    ax = axes[2]
    blocks(
        ax,
        pr,
        pc,
        f"C (m x n): device ({i0}, {j0}) adds A-panel x B-panel\ninto its "
        "block: one local GEMM per step",
    )
    ax.add_patch(
        Rectangle(
            (j0, pr - 1 - i0),
            1,
            1,
            facecolor=COLOURS[i0 * pc + j0],
            edgecolor="black",
            lw=2.0,
            hatch="//",
        )
    )
    fig.text(
        0.5,
        0.03,
        "every device does the same at every step, for its own mesh row and "
        "column: all send, none waits on an owner; 2 x 4 mesh, colour = device",
        ha="center",
        fontsize=8,
    )
    fig.subplots_adjust(left=0.03, right=0.97, wspace=0.15, bottom=0.12)
    fig.savefig(path, **PNG)
    plt.close(fig)


def pencil_owner(shape, split: dict[int, int], pa: int, pb: int) -> np.ndarray:
    """Device index of each voxel when axis ``split[a]`` is cut over mesh axis a (0: a, 1: b)."""
    idx = np.indices(shape)
    owner = np.zeros(shape, int)
    sizes = (pa, pb)
    blocks = [np.zeros(shape, int), np.zeros(shape, int)]
    for mesh_axis, array_axis in split.items():
        n = shape[array_axis]
        blocks[mesh_axis] = idx[array_axis] // (n // sizes[mesh_axis])
    owner = blocks[0] * pb + blocks[1]
    return owner


def _volume(ax, owner: np.ndarray, title: str) -> None:
    colours = np.empty(owner.shape + (4,))
    for d in range(8):
        colours[owner == d] = (*COLOURS[d], 0.95)
    ax.voxels(np.ones(owner.shape, bool), facecolors=colours, edgecolor=(1, 1, 1, 0.35), lw=0.3)
    ax.set_xlabel("X", labelpad=-12)
    ax.set_ylabel("Y", labelpad=-12)
    ax.set_zlabel("Z", labelpad=-12)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_zticks([])
    ax.view_init(elev=22, azim=-58)
    ax.set_box_aspect((1, 1, 1))
    ax.set_title(title, fontsize=8.5, pad=0)


def fft_pencil(path: Path) -> None:
    shape, pa, pb = (8, 8, 8), 4, 2
    x, y, z = 0, 1, 2
    plans = [
        (
            "pencil plan (pfft3d's)",
            [
                ({0: x, 1: y}, "Z-pencils (X/pa, Y/pb, Z):\nFFT along Z"),
                ({0: x, 1: z}, "Y-pencils (X/pa, Y, Z/pb):\nFFT along Y"),
                ({0: y, 1: z}, "X-pencils (X, Y/pa, Z/pb):\nFFT along X"),
            ],
            ["all_to_all over b", "all_to_all over a"],
        ),
        (
            "slab-pencil plan (fftn's default)",
            [
                ({0: x, 1: y}, "Z-pencils (X/pa, Y/pb, Z):\nFFT along Z"),
                ({0: z}, "Z-slabs (X, Y, Z/P):\n2-D FFT over X and Y"),
                ({0: y, 1: z}, "X-pencils (X, Y/pa, Z/pb):\nthe natural order"),
            ],
            ["all_to_all over (b, a)", "all_to_all over a"],
        ),
    ]
    fig = plt.figure(figsize=(11, 7.4))
    for row, (name, stages, moves) in enumerate(plans):
        for col, (split, title) in enumerate(stages):
            ax = fig.add_subplot(2, 3, row * 3 + col + 1, projection="3d")
            if len(split) == 1:  # a slab: P devices along one axis, in the order (j, i)
                (_, axis), n = next(iter(split.items())), shape[next(iter(split.values()))]
                chunk = np.indices(shape)[axis] // (n // (pa * pb))
                owner = (chunk % pa) * pb + chunk // pa  # device (i, j) holds chunk j·pa + i
            else:
                owner = pencil_owner(shape, split, pa, pb)
            _volume(ax, owner, title)
        fig.text(0.02, 0.73 - row * 0.47, name, rotation=90, fontsize=10, va="center")
        for col, move in enumerate(moves):
            fig.text(
                0.35 + col * 0.31,
                0.74 - row * 0.47,
                f"{move} →",
                ha="center",
                fontsize=9,
                bbox={"boxstyle": "round", "fc": "white", "ec": "grey"},
            )
    fig.text(
        0.5,
        0.02,
        "an 8 x 8 x 8 volume on a 4 x 2 mesh (a: 4, b: 2); colour = the device "
        "that holds the voxel, (i, j) = colour i·2 + j",
        ha="center",
        fontsize=8.5,
    )
    fig.subplots_adjust(left=0.04, right=0.98, top=0.95, bottom=0.06, wspace=0.25, hspace=0.25)
    fig.savefig(path, **PNG)
    plt.close(fig)


FIGURES = {
    "layout-block-cyclic.png": block_cyclic,
    "summa.png": summa,
    "fft-pencil.png": fft_pencil,
}


def main() -> None:
    for name, draw in FIGURES.items():
        draw(HERE / name)
        print("wrote", HERE / name)


if __name__ == "__main__":
    main()
