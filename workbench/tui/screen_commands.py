"""The command palette's provider of the current screen's own commands."""

from __future__ import annotations

from textual.command import Hit, Hits, Provider


class ScreenCommands(Provider):
    """Offers what the current screen lists in `palette_commands()`: (title, help, callback)."""

    async def search(self, query: str) -> Hits:
        commands = getattr(self.screen, "palette_commands", None)
        if commands is None:
            return
        matcher = self.matcher(query)
        for title, help_text, callback in commands():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), callback, help=help_text)
