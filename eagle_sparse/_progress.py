"""Progress reporting for long solves: silent by default.

Every solver logs one DEBUG line per iteration on the ``eagle_sparse``
logger (free when DEBUG is off).  With ``show=True`` the solve is made
visible: a ``tqdm`` progress bar when tqdm is installed (optional), else
INFO lines on the ``eagle_sparse`` logger, sent to stderr for the duration of
the solve when logging is not configured at all.
"""

from __future__ import annotations

import logging
import sys

logger = logging.getLogger("eagle_sparse")


def _tqdm():
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm


class Progress:
    """Per-iteration reporter handed to the EAGLE drivers (``update``/``close``)."""

    def __init__(self, show: bool, desc: str, total: int | None = None, *, bar: bool = True):
        self.show = bool(show)
        self.desc = desc
        self.bar = None
        self._handler = None
        if not self.show:
            return
        tqdm = _tqdm() if bar else None
        if tqdm is not None:
            self.bar = tqdm(total=total, desc=desc, leave=False, file=sys.stderr)
        elif not logging.getLogger().handlers and not logger.handlers:
            self._handler = logging.StreamHandler(sys.stderr)
            self._handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
            logger.addHandler(self._handler)
            self._old_level = logger.level
            logger.setLevel(logging.INFO)

    @property
    def active(self) -> bool:
        """Whether :meth:`update` shows or logs anything (callers may skip it if not)."""
        return self.show or logger.isEnabledFor(logging.DEBUG)

    def update(self, iteration: int, value: float | None = None) -> None:
        """One iteration done; ``value`` is its residual measure (``None``: not known,
        as inside SciPy's Krylov loops)."""
        if self.bar is not None:
            if value is not None:
                self.bar.set_postfix_str(f"residual {value:.2e}", refresh=False)
            self.bar.update(1)
            return
        if not self.active:
            return
        log = logger.info if self.show else logger.debug
        if value is None:
            log("%s: iteration %d", self.desc, iteration)
        else:
            log("%s: iteration %d, residual %.3e", self.desc, iteration, value)

    def close(self, message: str = "") -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        if self.show and message:
            logger.info("%s: %s", self.desc, message)
        if self._handler is not None:
            logger.removeHandler(self._handler)
            logger.setLevel(self._old_level)
            self._handler = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
