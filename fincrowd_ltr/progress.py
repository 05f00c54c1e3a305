"""Progress with an estimate for long steps (tqdm on stderr; silent when disabled)."""

from __future__ import annotations


class Progress:
    """A counted step with a bar and time estimate."""

    def __init__(self, total: int, what: str, enabled: bool = True, unit: str = "") -> None:
        self._bar = None
        if enabled and total:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, desc=what, unit=unit or " steps", mininterval=1.0)

    def update(self, n: int = 1) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
