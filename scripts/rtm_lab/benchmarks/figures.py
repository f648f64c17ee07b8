"""How every results plot is saved: on an opaque white card with a thin grey border.

The PNG carries its own background because the same file is read in places no stylesheet reaches: the site in its
light and its dark (slate) theme, GitHub's file view and the skill. A transparent plot keeps matplotlib's black text
and axes, which vanish on the dark theme; a plain white one merges with the light theme's white page. A white card
with a grey edge reads on both, and its colours stay those the pages' text names.
"""

from pathlib import Path

CARD = "white"
EDGE = "#9e9e9e"  # between the light page's white and the slate page's dark blue-grey: seen on both
EDGE_POINTS = 2.0  # half of it falls outside the canvas: about 1.5 px at the plots' 100-110 dpi


def save(fig, path: Path, dpi: int) -> None:
    """Save `fig` as a card: opaque white whatever matplotlib's style or rcParams say, with a grey border."""
    fig.patch.set_facecolor(CARD)
    fig.patch.set_alpha(1.0)
    fig.patch.set_edgecolor(EDGE)
    fig.patch.set_linewidth(EDGE_POINTS)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, facecolor=CARD, edgecolor=EDGE, transparent=False)


def label_panel(ax, title: str, xlabel: str, ylabel: str, legend_loc: str = "upper left") -> None:
    """The small panels' common dress: title, axis labels, tick size, a grid on both scales' ticks, a legend."""
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc=legend_loc)
