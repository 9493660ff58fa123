"""The command palette's provider of the current screen's own commands: every key it answers
to (from its bindings and the app's, navigation included) and what it lists in
`palette_commands()`: (title, help, callback)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider

Command = tuple[str, str, Callable[[], object]]


class ScreenCommands(Provider):
    """Offers the current screen's keys and its `palette_commands()`."""

    def _commands(self) -> Iterator[Command]:
        from workbench.tui.screens.help.help_screen import key_help_bindings

        screen = self.screen
        seen: set[str] = set()
        for title, help_text, callback in getattr(screen, "palette_commands", list)():
            seen.add(title)
            yield title, help_text, callback
        actions: set[str] = set()
        for key, description, tooltip, action, node in key_help_bindings(screen):
            title = f"{description} ({key})"
            actions.add(action)
            if title not in seen:
                seen.add(title)
                yield title, tooltip, partial(self.app.run_action, action, node)
        # The app's navigation even where a text field takes its keys (the settings form).
        for binding in self.app.BINDINGS:
            if isinstance(binding, Binding) and binding.action not in actions:
                actions.add(binding.action)
                run = partial(self.app.run_action, binding.action, self.app)
                yield binding.description, binding.tooltip or binding.description, run

    async def discover(self) -> Hits:
        for title, help_text, callback in self._commands():
            yield DiscoveryHit(title, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, callback in self._commands():
            # The help counts too: "hist" finds "History (h)", "debug" finds what mentions it.
            score = max(matcher.match(title), matcher.match(help_text) * 0.5)
            if score > 0:
                yield Hit(score, matcher.highlight(title), callback, help=help_text)
