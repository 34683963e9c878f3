"""The report's plots read right: no legend over an axis' label, a log axis where the sides
differ more than tenfold, an axis' label true to the axis, a range below zero drawn."""

from __future__ import annotations

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.lines import Line2D

from kit.report import figures
from kit.report.figures import CompileCost, StepTimeRow

ONE = [
    StepTimeRow(
        "Mica · float32", "contender", (0.002, 0.00201, 0.00199, 0.002, 0.00202), variant="mica"
    )
]


def _boxes(fig):
    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()
    (ax, _) = fig.axes  # the plot and its twin, which holds the numbers on the right
    legend = ax.get_legend().get_window_extent(renderer)
    label = ax.xaxis.label.get_window_extent(renderer)
    ticks = [t.get_window_extent(renderer) for t in ax.get_xticklabels() if t.get_text()]
    return legend, label, ticks


def test_on_a_series_of_one_configuration_the_legend_lies_clear_of_the_axis_label():
    legend, label, ticks = _boxes(figures.step_times_figure(ONE, "Step times · cpu · M1 · float32"))
    assert not legend.overlaps(label), (legend, label)
    assert not any(legend.overlaps(t) for t in ticks)
    assert legend.y1 < label.y0  # below it, not beside it
    # as the kit drew it before: over the label
    legend, label, _ = _boxes(figures.step_times_figure(ONE, "Step times", earlier=True))
    assert legend.overlaps(label)


def test_many_configurations_keep_the_legend_clear_too():
    rows = [
        StepTimeRow(f"mode {i}", "pytorch", (0.002 + i * 1e-4,) * 5, variant="eager")
        for i in range(8)
    ]
    legend, label, _ = _boxes(figures.step_times_figure(rows, "Step times"))
    assert not legend.overlaps(label)


def _axis(rows):
    fig = figures.step_times_figure(rows, "Step times")
    ax = fig.axes[0]
    return ax.get_xscale(), ax.get_xlabel(), ax.get_xlim()


def test_sides_seventy_times_apart_are_drawn_on_a_log_axis_that_says_so():
    rows = [
        StepTimeRow("Mica", "contender", (0.001, 0.0011, 0.00105), variant="mica"),
        StepTimeRow("PyTorch eager", "pytorch", (0.07, 0.071, 0.0705), variant="eager"),
    ]
    scale, label, _ = _axis(rows)
    assert scale == "log" and "log scale" in label and "does not start at zero" not in label
    close = [rows[0], StepTimeRow("PyTorch eager", "pytorch", (0.002, 0.0021), variant="eager")]
    scale, label, _ = _axis(close)
    assert scale == "linear" and "log" not in label


def test_the_axis_label_says_the_axis_does_not_start_at_zero_only_when_it_does_not():
    scale, label, (low, _) = _axis(ONE)
    assert scale == "linear" and low > 0 and label.endswith("the axis does not start at zero")
    wide = [
        StepTimeRow("Mica", "contender", (0.0001, 0.005, 0.009), variant="mica"),
        StepTimeRow("PyTorch eager", "pytorch", (0.004, 0.006, 0.008), variant="eager"),
    ]
    scale, label, (low, _) = _axis(wide)
    assert scale == "linear" and low <= 0 and "does not start at zero" not in label


def test_a_range_below_zero_is_drawn_not_cut():
    rows = [
        CompileCost("eager", "eager", 1.0, 0.9, 1.1, None, "eager is the reference"),
        CompileCost("default", "default", 0.2, -0.4, 0.5, -120.0),
    ]
    fig = figures.compile_costs_figure(rows, "What compiling costs")
    left, right = fig.axes
    assert left.get_xlim()[0] < -0.4 and right.get_xlim()[0] < -120.0
    warmups = [rows[0], CompileCost("default", "default", 0.2, -0.4, 0.5, 40.0)]
    before = figures.compile_costs_figure(warmups, "What compiling costs", earlier=True)
    assert before.axes[0].get_xlim()[0] == 0  # as the kit drew it before: cut at zero


def test_eager_alone_draws_no_empty_break_even_panel():
    rows = [CompileCost("eager", "eager", 1.0, 0.9, 1.1, None, "eager is the reference")]
    assert len(figures.compile_costs_figure(rows, "What compiling costs").axes) == 2
    alone = figures.compile_costs_figure(rows, "What compiling costs", warm_up_only=True)
    (left,) = alone.axes
    assert left.get_xlabel().startswith("warm-up (s)")


def test_the_legend_swatches_take_the_rows_colours():
    rows = [*ONE, StepTimeRow("PyTorch eager", "pytorch", (0.003, 0.0031), variant="eager")]
    fig = figures.step_times_figure(rows, "Step times")
    FigureCanvasAgg(fig).draw()
    legend = fig.axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == [
        "a timed run", "median", "range (fastest to slowest)"
    ]  # fmt: skip
    colours = {x.colour for x in figures.styles([(r.side, r.variant) for r in rows])}
    found = {line.get_color() for line in legend.findobj(Line2D)}
    assert colours <= found and "0.3" not in found, (found, colours)
