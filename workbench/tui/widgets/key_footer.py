"""The footer of every screen: all its keys when they fit; when they do not (80 columns), the
compact style, then the keys the screen names in `FOOTER_GIVES_WAY_FIRST` (in that order: what
the screen shows another way, like a filter field's "/" placeholder), then the app's navigation
keys (history, settings, patches) before any of the screen's own; `? Help` and `q Quit` always
stay: the help lists every key."""

from __future__ import annotations

from collections.abc import Sequence

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

# Kept whatever the width: the way to every other key, and the way out.
ALWAYS = ("help", "quit")


def key_width(key_display: str, description: str, compact: bool) -> int:
    """Cells one FooterKey takes, its margin included (Textual's footer styles)."""
    if compact:
        return len(key_display) + 1 + len(description) + 1
    return len(key_display) + 2 + len(description) + 1


# What gives way when the keys do not fit, highest rank first: the screen's FOOTER_GIVES_WAY_FIRST
# (ranks above NAVIGATION, the first named highest), the app's navigation, the screen's own.
KEEP, SCREEN, NAVIGATION = 0, 1, 2
PALETTE_WIDTH = len("^p palette") + 4


def choose_keys(keys: Sequence[tuple[str, str, int]], width: int) -> tuple[list[int], bool, bool]:
    """Which keys a footer `width` cells wide shows, given (key shown, description, rank) in
    footer order: (indices kept, compact, whether the palette's key shows too). The highest
    rank gives way first, the rightmost key first within a rank; KEEP never does."""
    every = list(range(len(keys)))
    for compact in (False, True):
        total = sum(key_width(key, text, compact) for key, text, _ in keys)
        if total + PALETTE_WIDTH <= width:
            return every, compact, True
        if total <= width:
            return every, compact, False
    kept = list(every)
    total = sum(key_width(key, text, True) for key, text, _ in keys)
    for rank in sorted({rank for _, _, rank in keys} - {KEEP}, reverse=True):
        for index in reversed(every):
            if total <= width:
                return kept, True, False
            if keys[index][2] == rank:
                kept.remove(index)
                total -= key_width(keys[index][0], keys[index][1], True)
    return kept, True, False


def rank_of(binding: Binding, of_the_app: bool, gives_way_first: Sequence[str]) -> int:
    """How soon a key gives way in a narrow footer (see `choose_keys`)."""
    if binding.action in ALWAYS:
        return KEEP
    if binding.action in gives_way_first:
        return NAVIGATION + len(gives_way_first) - list(gives_way_first).index(binding.action)
    return NAVIGATION if of_the_app else SCREEN


class KeyFooter(Footer):
    """A Footer that never cuts a key off mid-word (see the module's docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self._width = 0
        self._keys: list[tuple[str, str, int]] = []  # (key shown, description, rank) composed
        self._composed: tuple[list[int], bool, bool] | None = None  # what choose_keys said

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        screen, app = self.screen, self.app
        first: Sequence[str] = getattr(screen, "FOOTER_GIVES_WAY_FIRST", ())
        shown: dict[str, tuple[Binding, bool, str, int]] = {}
        for node, binding, enabled, tooltip in screen.active_bindings.values():
            if binding.show and binding.action not in shown:
                shown[binding.action] = (
                    binding,
                    enabled,
                    tooltip,
                    rank_of(binding, node is app, first),
                )
        # Help and quit at the right, where they are looked for.
        entries = sorted(shown.values(), key=lambda entry: entry[3] == KEEP)
        self._keys = [(app.get_key_display(b), b.description, rank) for b, _, _, rank in entries]
        kept, compact, palette = self._composed = choose_keys(
            self._keys, self._width or app.size.width
        )
        self.compact = compact
        for index in kept:
            binding, enabled, tooltip, _ = entries[index]
            yield FooterKey(
                binding.key,
                app.get_key_display(binding),
                binding.description,
                binding.action,
                disabled=not enabled,
                tooltip=tooltip or binding.tooltip,
            ).data_bind(compact=Footer.compact)
        found = screen.active_bindings.get(app.COMMAND_PALETTE_BINDING)
        if palette and found is not None and self.show_command_palette:
            _node, binding, enabled, _tooltip = found
            yield FooterKey(
                binding.key,
                app.get_key_display(binding),
                binding.description,
                binding.action,
                classes="-command-palette",
                disabled=not enabled,
                tooltip=binding.tooltip or binding.description,
            )

    def on_resize(self, event: events.Resize) -> None:
        if event.size.width != self._width:
            self._width = event.size.width
            # Only when other keys fit: a recompose restyles every key (issue 23: a layout
            # that moved the footer by a scrollbar's width cost 60 ms a second on the VM).
            if self._bindings_ready and choose_keys(self._keys, self._width) != self._composed:
                self.call_after_refresh(self.recompose)
