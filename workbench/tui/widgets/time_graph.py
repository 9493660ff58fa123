"""A time graph of a whole build: labelled value axis, time scale, O(1) work per sample.

Every sample goes into a `SeriesHistory`: buckets of 1, 2, 4, ... samples, at most `capacity`
of them, two neighbours merged into one whenever the count reaches it (amortised O(1) per
sample). A frame folds those buckets into the plot's columns, so it shows the build from its
first second (the left edge, "0s" on the time axis) to now, and its cost never grows with the
build's length (memray's live graph keeps the same rule). The time axis says how long after
the first sample each tick is.

Live, each column spans a power of two of samples, anchored at the first one: a new sample
changes only the newest column, and the columns before it stay as they were (nothing on the
terminal moves, so nothing is written again) until the series outgrows the plot; then each
column takes twice as many samples and the plot is drawn anew, about half full. An ended
series fills the plot's width: from its `frame`'s start to its end where one is set (the build
screen sets the build's start and end on all three of its graphs, so their time axes agree),
else from its first sample to its last. The latest samples are also kept at full resolution in
a ring (`samples`).

A value may be unknown (NaN: no sample in that interval, e.g. before a build's first sample):
its column is left blank and no figure counts it.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable
from itertools import repeat

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region, Size
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

BLOCKS = " ▁▂▃▄▅▆▇█"
AXIS_WIDTH = 7
AXIS = "graph--axis"

Row = tuple[tuple[str, str], ...]
"""One drawn row: runs of (cells, component class), "" for the widget's own style."""


def fit(*runs: tuple[str, str], width: int) -> Row:
    """Runs cut to `width` cells, the last cell an ellipsis where any was cut, in the style of
    the run whose cell it replaces (as Rich's `Text.truncate` leaves it)."""
    if sum(len(cells) for cells, _ in runs) <= width:
        return tuple(run for run in runs if run[0])
    if width <= 0:
        return ()
    cut = width - 1
    kept: list[tuple[str, str]] = []
    position, ellipsis = 0, runs[-1][1]
    for cells, component in runs:
        end = position + len(cells)
        if position <= cut < end:
            ellipsis = component
        if position < cut:
            kept.append((cells[: cut - position], component))
        position = end
    kept.append(("…", ellipsis))
    return tuple(run for run in kept if run[0])


def column_cells(fraction: float, rows: int) -> list[str]:
    """The cells of one column, top to bottom, for a value at `fraction` of the full scale
    (blank for NaN: nothing was sampled there)."""
    if fraction != fraction:  # NaN
        fraction = 0.0
    eighths = round(max(0.0, min(1.0, fraction)) * rows * 8)
    if fraction > 0 and eighths == 0:
        eighths = 1  # a small value still shows: 60 MB against 250 GB is not nothing
    cells = _COLUMNS.get((eighths, rows))
    if cells is None:
        cells = _COLUMNS[eighths, rows] = _column(eighths, rows)
    return cells


def _column(eighths: int, rows: int) -> list[str]:
    """A column `eighths` eighths of a row tall, top to bottom (made once for each height: a
    frame of a graph made every column of its plot, 45 of them at 160 columns, a cell at a
    time)."""
    cells = []
    for row in range(rows - 1, -1, -1):  # from the top row down
        filled = eighths - row * 8
        cells.append(BLOCKS[max(0, min(8, filled))])
    return cells


_COLUMNS: dict[tuple[int, int], list[str]] = {}


def nice_ceiling(value: float, unit: float = 1024**2) -> float:
    """The smallest of 1, 1.5, 2, 3, 4, 6, 8 … × `unit` (each power of two and the point
    halfway) at or above `value`: a scale that reads well and leaves the curve room."""
    step = unit
    while True:
        for candidate in (step, step * 1.5):
            if candidate >= value:
                return candidate
        step *= 2


class SeriesHistory:
    """A whole series at a resolution that halves as it grows (see the module docstring)."""

    def __init__(self, capacity: int = 1024) -> None:
        self.capacity = max(2, capacity - capacity % 2)
        self.width = 1
        """Samples per full bucket."""
        self.maxima: list[float] = []
        self.sums: list[float] = []
        self.counts: list[int] = []
        """Samples each bucket spans, unknown ones (NaN) included: its place in time."""
        self.known: list[int] = []
        """Samples each bucket holds a value of (its mean's divisor)."""
        self.total = 0
        """Samples added in all."""

    def add(self, value: float) -> None:
        """One sample (amortised O(1)); NaN: a sample's place with no value."""
        self.total += 1
        known = value == value  # not NaN
        if self.counts and self.counts[-1] < self.width:
            self.counts[-1] += 1
            if known:
                self.maxima[-1] = max(self.maxima[-1], value)
                self.sums[-1] += value
                self.known[-1] += 1
            return
        self.maxima.append(value if known else -math.inf)
        self.sums.append(value if known else 0.0)
        self.counts.append(1)
        self.known.append(1 if known else 0)
        if len(self.counts) >= self.capacity:
            self._halve()

    def _halve(self) -> None:
        maxima, sums, counts, known = self.maxima, self.sums, self.counts, self.known
        pairs = range(0, len(counts) - 1, 2)
        self.maxima = [max(maxima[i], maxima[i + 1]) for i in pairs]
        self.sums = [sums[i] + sums[i + 1] for i in pairs]
        self.counts = [counts[i] + counts[i + 1] for i in pairs]
        self.known = [known[i] + known[i + 1] for i in pairs]
        if len(counts) % 2:
            self.maxima.append(maxima[-1])
            self.sums.append(sums[-1])
            self.counts.append(counts[-1])
            self.known.append(known[-1])
        self.width *= 2

    def clear(self) -> None:
        self.__init__(self.capacity)  # type: ignore[misc]

    def _value(self, start: int, end: int, peak: bool) -> float:
        """Buckets `start` to `end` as one value: their highest sample with `peak`, else their
        mean; NaN where none of them holds a value."""
        known = sum(self.known[start:end])
        if not known:
            return math.nan
        if peak:
            return max(self.maxima[start:end])
        return sum(self.sums[start:end]) / known

    def columns(
        self,
        count: int,
        peak: bool,
        stable: bool = False,
        frame: tuple[float, float] | None = None,
    ) -> tuple[list[float], float]:
        """At most `count` values covering the whole series, oldest first, each the highest
        sample of its span with `peak`, else their mean (NaN where no sample of it has a
        value); and the samples per column (less than one where an ended series shorter than
        the plot is drawn wider).

        `stable` (a live series): columns are anchored at the first sample, each spans a power
        of two of buckets, so adding a sample changes the newest column only, until the series
        no longer fits and every span doubles. Else (an ended series) exactly `count` columns
        span `frame`: (where it starts, how long it is) in samples from the first sample's
        start (sample k spans [k, k + 1)); by default the whole series. Each bucket goes to the
        column its middle falls in; a column no middle falls in (a series shorter than the
        plot) shows the bucket it lies in."""
        buckets = len(self.counts)
        if buckets == 0 or count <= 0:
            return [], float(self.width)
        if not stable:
            return self._framed(count, peak, frame or (0.0, float(self.total)))
        group = -(-buckets // count)  # ceiling
        group = 1 << (group - 1).bit_length()  # the power of two at or above
        values = [self._value(start, start + group, peak) for start in range(0, buckets, group)]
        return values, float(self.width * group)

    def _framed(
        self, count: int, peak: bool, frame: tuple[float, float]
    ) -> tuple[list[float], float]:
        lead, span = frame
        if span <= 0:
            lead, span = 0.0, float(self.total)
        step = span / count
        # Each column's first and last bucket (+1), from where the buckets' middles fall: every
        # bucket is `width` samples long but the newest, so bucket j starts at j * width.
        first: list[int | None] = [None] * count
        last = [0] * count
        for j, spanned in enumerate(self.counts):
            start = j * self.width
            if start >= lead + span or start + spanned <= lead:
                continue  # wholly outside the frame
            column = min(count - 1, max(0, math.floor((start + spanned / 2 - lead) / step)))
            if first[column] is None:
                first[column] = j
            last[column] = j + 1
        values: list[float] = []
        for column in range(count):
            begin = first[column]
            if begin is None:  # narrower than a bucket: the bucket its middle lies in
                middle = lead + (column + 0.5) * step
                j = math.floor(middle / self.width)
                inside = 0 <= middle < self.total and j < len(self.counts)
                values.append(self._value(j, j + 1, peak) if inside else math.nan)
            else:
                values.append(self._value(begin, last[column], peak))
        return values, step

    def highest(self) -> float | None:
        """The highest sample of the whole series (None before the first with a value)."""
        known = [high for high, held in zip(self.maxima, self.known, strict=True) if held]
        return max(known) if known else None


def time_label(seconds: float) -> str:
    """ "0s", "45s", "3m", "2m30", "1h05" for a point `seconds` after the first sample."""
    seconds = round(seconds)
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        minutes, rest = divmod(seconds, 60)
        return f"{minutes}m{rest:02d}" if rest else f"{minutes}m"
    hours, rest = divmod(seconds // 60, 60)
    return f"{hours}h{rest:02d}"


TICK_COLUMNS = 15  # a labelled tick on the time axis every this many columns


class TimeGraph(Widget):
    """One value over time, newest at the right; columns at `limit_fraction` of `maximum` or
    above are drawn in the limit colour (2.0, the default, never).

    With `autoscale` the plot's full scale follows the highest sample shown (a build using
    0.5 GiB of a 22 GiB host is not a flat line) and `maximum`, the host's total, is named in
    the title instead."""

    DEFAULT_CSS = """
    TimeGraph { height: 8; }
    TimeGraph > .graph--bar { color: $primary; }
    TimeGraph > .graph--limit { color: $warning; }
    TimeGraph > .graph--axis { color: $text-muted; }
    TimeGraph > .graph--title { text-style: bold; }
    """
    COMPONENT_CLASSES = {"graph--bar", "graph--limit", "graph--axis", "graph--title"}

    live: reactive[bool] = reactive(True)
    """False for a finished series: "last" instead of "now", and its columns fill the plot."""

    def __init__(
        self,
        title: str,
        format_value: Callable[[float], str],
        maximum: float,
        *,
        interval_s: float = 1.0,
        capacity: int = 4096,
        limit_fraction: float = 2.0,
        autoscale: bool = False,
        peak_columns: bool = False,
        scale_label: str | None = None,
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self.autoscale = autoscale
        self.title = title
        self.format_value = format_value
        self.maximum = maximum
        self.interval_s = interval_s
        self.samples: deque[float] = deque(maxlen=capacity)
        self.history = SeriesHistory()
        self.peak_columns = peak_columns
        self.scale_label = scale_label
        """What the full scale is, in words ("of all cores"), instead of its number."""
        """A column spanning several samples shows their highest (memory) rather than their
        mean (CPU)."""
        self.limit_fraction = limit_fraction
        self.last_t: float | None = None
        self._frame: tuple[float, float] | None = None
        self._column_s = interval_s
        self._rows: list[Row] | None = None  # as last drawn, at `_rows_size`
        self._rows_size = Size(0, 0)
        self._strips: dict[int, Strip] = {}  # each row's Strip, made when first drawn
        self._styles: dict[str, Style] = {}  # each component's style ("": the widget's own)
        self._styled: dict[str, Style] = {}  # the widget's style with each component's on top
        self._diff_due = False
        self.holding = False
        """While True, a change waits for `draw_changed` instead of queueing its redraw."""

    def add(self, value: float, maximum: float | None = None, t: float | None = None) -> bool:
        """Append a sample (O(1)); `maximum` moves the full scale (e.g. available memory).

        With `t` (epoch seconds) a sample already shown is ignored and a gap (samples missed
        between two polls) is filled with the last value, so the time scale stays true.
        Returns whether the sample was taken.
        """
        if t is not None:
            if self.last_t is not None:
                if t <= self.last_t + self.interval_s / 2:
                    return False
                missed = round((t - self.last_t) / self.interval_s) - 1
                if missed > 0 and self.samples:
                    held = self.samples[-1]
                    # Bounded by the ring's size: a long gap costs at most one ring's worth.
                    filled = min(missed, self.samples.maxlen or missed)
                    self.samples.extend(repeat(held, filled))
                    for _ in range(filled):
                        self.history.add(held)
            self.last_t = t
        self.samples.append(value)
        self.history.add(value)
        if maximum is not None and maximum > 0:
            self.maximum = maximum
        self._changed()
        return True

    def clear(self) -> None:
        """Forget every sample."""
        self.samples.clear()
        self.history.clear()
        self.last_t = None
        self._changed()

    def show_series(
        self,
        values: Iterable[float],
        first_t: float,
        interval_s: float = 1.0,
        maximum: float | None = None,
    ) -> None:
        """Replace the samples with `values`: one per `interval_s`, the first ending at
        `first_t` (epoch seconds), NaN where none was measured. The whole series goes into the
        history (once, O(1) per value), the latest into the ring."""
        self.samples.clear()
        self.history.clear()
        self.interval_s = interval_s
        self.last_t = None
        t = first_t
        for value in values:
            self.samples.append(value)
            self.history.add(value)
            self.last_t = t
            t += interval_s
        if maximum is not None and maximum > 0:
            self.maximum = maximum
        self._changed()

    @property
    def frame(self) -> tuple[float, float] | None:
        """(start, end), epoch seconds: the interval an ended series spans from the plot's left
        edge ("0s") to its right (the end label); None: from its first sample to its last."""
        return self._frame

    @frame.setter
    def frame(self, frame: tuple[float, float] | None) -> None:
        if frame != self._frame:
            self._frame = frame
            self._changed()

    def _frame_samples(self) -> tuple[float, float] | None:
        """The frame in samples from the first sample's start (as `SeriesHistory.columns`
        takes it): the series' last sample ends at `last_t`."""
        if self._frame is None or self.last_t is None or not self.history.total:
            return None
        start, end = self._frame
        origin = self.last_t - self.history.total * self.interval_s
        return (start - origin) / self.interval_s, (end - start) / self.interval_s

    def _heading_words(self, shown: list[float], room: int) -> str:
        """The words after the title, the longest form that fits `room` cells: a narrow graph
        (80 columns) drops the latest value before the peak, then the scale, so the figure
        it is read for stays whole instead of ending in an ellipsis."""
        shown = [value for value in shown if value == value]  # NaN: nothing sampled there
        if not shown:
            return "no samples yet" if self.live else "no samples recorded"
        if self.autoscale and max(shown) <= 0:
            # Every sample met no process of the build (a no-op rebuild ends between two
            # samples): a peak of 0 would be no figure at all.
            return "no process sampled yet" if self.live else "no process sampled"
        value = self.format_value(shown[-1])
        latest = f"{'now' if self.live else 'last'} {value}"
        # The graph covers the whole build (every stored sample): its highest column is the
        # build's sampled peak, the figure history and report show.
        peak = f"peak {self.format_value(max(shown))}" if self.autoscale else ""
        scale = self.scale_label or f"of {self.format_value(self.maximum)}"
        forms = (
            [f"{latest}, {peak} {scale}", f"{peak} {scale}", peak]
            if peak
            # A live graph's bare value is read as "now"; an ended build's keeps its "last",
            # and its unit in fewer words ("last 60%, all cores") before none: the process
            # table beside it counts per core.
            else [
                f"{latest} {scale}",
                f"{value} {scale}" if self.live else f"{latest}, {scale.removeprefix('of ')}",
                latest,
            ]
        )
        return next((form for form in forms if len(form) <= room), forms[-1])

    # -- drawing: each row a tuple of (text, component) runs, drawn as a Strip of its own ------

    def _heading_row(self, words: str, width: int) -> Row:
        """The title in bold and `words` in the axis colour, cut with an ellipsis to `width`."""
        return fit((f"{self.title}  ", "graph--title"), (words, "graph--axis"), width=width)

    def _prepare(self) -> None:
        """Called before the rows are made (a subclass sets its scale here)."""

    def rows(self, width: int, height: int) -> list[Row]:
        """What the graph shows at `width` x `height`: the heading, the plot's rows with the
        value axis, the time axis; plain strings and the component class of each run."""
        self._prepare()
        rows = max(1, height - 2)  # title row and time-axis row
        plot_width = max(1, width - AXIS_WIDTH)
        shown, per_column = self.history.columns(
            plot_width,
            self.peak_columns,
            stable=self.live,
            frame=None if self.live else self._frame_samples(),
        )
        self._column_s = per_column * self.interval_s
        scale = self.maximum
        known = [value for value in shown if value == value]
        if self.autoscale and known:
            scale = nice_ceiling(max(known))
            if self.maximum > 0:
                scale = min(scale, self.maximum)
        drawn: list[Row] = [
            self._heading_row(self._heading_words(shown, width - len(self.title) - 2), width)
        ]
        fractions = [v / scale if scale else 0.0 for v in shown]
        columns = [column_cells(fraction, rows) for fraction in fractions]
        # Runs of columns near `maximum` (memory running out) take the limit colour.
        runs: list[tuple[int, int, bool]] = []
        for position, value in enumerate(shown):
            hot = self.maximum > 0 and value / self.maximum >= self.limit_fraction
            if runs and runs[-1][2] == hot:
                runs[-1] = (runs[-1][0], position + 1, hot)
            else:
                runs.append((position, position + 1, hot))
        padding = plot_width - len(columns)  # the plot fills from the left (the build's start)
        for row in range(rows):
            if scale <= 0:
                label = ""  # no scale yet (memory before its first sample): no numbers
            elif row == 0:
                label = self.format_value(scale)
            elif row == rows // 2 and rows > 2:
                label = self.format_value(scale / 2)
            elif row == rows - 1:
                label = self.format_value(0)
            else:
                label = ""
            line: list[tuple[str, str]] = [(f"{label:>{AXIS_WIDTH - 1}.{AXIS_WIDTH - 1}}│", AXIS)]
            for first, last, hot in runs:
                cells = "".join(column[row] for column in columns[first:last])
                line.append((cells, "graph--limit" if hot else "graph--bar"))
            if padding > 0:
                line.append((" " * padding, ""))
            drawn.append(tuple(line))
        drawn.append(((self._time_axis(plot_width), AXIS),))
        return drawn

    def render(self) -> Text:
        """The whole graph as one Text (what `render_line` draws row by row)."""
        styles: dict[str, Style] = {}
        text = Text(no_wrap=True, overflow="crop")
        for number, row in enumerate(self.rows(self.size.width, self.size.height)):
            if number:
                text.append("\n")
            for cells, component in row:
                text.append(cells, self._style(component, styles) if component else None)
        return text

    def _style(self, component: str, styles: dict[str, Style]) -> Style:
        style = styles.get(component)
        if style is None:
            style = styles[component] = self.get_component_rich_style(component)
        return style

    # -- what changed since the last frame --------------------------------------------------

    def _changed(self) -> None:
        """The series or what frames it changed: once the current message is handled, the rows
        are made again and only those that differ are drawn (a new sample of a live graph: the
        heading and the plot rows its newest column reaches; the axes stay)."""
        if self.holding:
            self._diff_due = True  # drawn by the holder's `draw_changed`
            return
        if not self._diff_due:
            self._diff_due = True
            self.call_next(self.draw_changed)

    def draw_changed(self) -> None:
        """Draw now the rows the samples added while `holding` changed (the build screen adds
        the samples of its polls at once and draws each graph once, with no callback queued:
        each of Textual's callbacks works out its function's signature again)."""
        if self._diff_due:
            self._redraw_changed_rows()

    def _redraw_changed_rows(self) -> None:
        self._diff_due = False
        size = self.size
        before = self._rows
        if not self.is_mounted or before is None or size != self._rows_size or not size.area:
            self._rows = None
            self.refresh()
            return
        now = self.rows(size.width, size.height)
        self._rows = now
        changed = [
            y
            for y in range(max(len(now), len(before)))
            if y >= len(now) or y >= len(before) or now[y] != before[y]
        ]
        for y in changed:
            self._strips.pop(y, None)
        regions: list[Region] = []
        for y in changed:
            if regions and regions[-1].bottom == y:
                last = regions[-1]
                regions[-1] = Region(0, last.y, size.width, last.height + 1)
            else:
                regions.append(Region(0, y, size.width, 1))
        if regions:
            self.refresh(*regions)

    def render_line(self, y: int) -> Strip:
        if self._diff_due:  # a frame came before the diff: the rows it finds changed come next
            self._redraw_changed_rows()
        size = self.size
        if self._rows is None or size != self._rows_size:
            self._rows = self.rows(size.width, size.height)
            self._rows_size = size
            self._strips.clear()
        strip = self._strips.get(y)
        if strip is None:
            styles = self._styles
            base = styles.get("")
            if base is None:
                base = styles[""] = self.rich_style
            if y >= len(self._rows):
                strip = Strip.blank(size.width, base)
            else:
                strip = self._row_strip(self._rows[y], size.width, base)
            self._strips[y] = strip
        return strip

    def _row_strip(self, row: Row, width: int, base: Style) -> Strip:
        """One drawn row as one Strip, `width` cells: each run in the widget's style with its
        component's on top, a short row ended in blanks of the background alone (as a Text is
        padded), a long one cut. What `Strip(...).apply_style(base).crop_extend(...)` makes, in
        one Strip instead of three or four (each with its seven caches): a live graph draws
        most of its rows again at each new sample."""
        styled = self._styled
        segments: list[Segment] = []
        length = 0
        for cells, component in row:
            if not cells:
                continue
            style = styled.get(component)
            if style is None:
                own = self._style(component, self._styles) if component else None
                style = styled[component] = base + own if own is not None else base
            segments.append(Segment(cells, style))
            length += cell_len(cells)
        if length > width:
            return Strip(segments, length).crop(0, width)
        if length < width:
            pad = styled.get("#pad")
            if pad is None:
                pad = styled["#pad"] = Style.from_color(bgcolor=base.bgcolor)
            segments.append(Segment(" " * (width - length), pad))
        return Strip(segments, width)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()  # the theme changed: the cached styles are stale
        self._styles.clear()
        self._styled.clear()

    def watch_live(self) -> None:
        self._changed()

    def _time_axis(self, plot_width: int) -> str:
        """Tick labels every TICK_COLUMNS columns from the left edge ("0s"), each the time after
        it at which its column begins, and always one at the right end, ending there: the time
        the plot reaches (an ended build's length; live, where the plot fills). A tick that
        would run into the end label gives way to it."""
        axis = [" "] * (AXIS_WIDTH - 1) + ["└"] + ["─"] * plot_width
        end = time_label(plot_width * self._column_s)
        end_start = max(AXIS_WIDTH, len(axis) - len(end))
        for offset in range(0, plot_width, TICK_COLUMNS):
            label = time_label(offset * self._column_s)
            start = AXIS_WIDTH + offset
            if start + len(label) < end_start:  # a cell of line before the end label
                axis[start : start + len(label)] = list(label)
        axis[end_start:] = list(end[: len(axis) - end_start])
        return "".join(axis)
