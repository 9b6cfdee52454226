"""Pictures: ``host show --svg/--png`` and ``stats --svg/--png``.

The drawings are made by :mod:`vnuma.report.hostpicture` and
:mod:`vnuma.report.fleetpicture` from one read of the inventory; the PNG is
the SVG rendered by CairoSVG (cairo), at one pixel per SVG unit. A file is
written whole or not at all: into a temporary file beside it, then renamed.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from vnuma.errors import InvalidInputError
from vnuma.inventory.reading import open_reader
from vnuma.report.fleetpicture import fleet_svg
from vnuma.report.hostpicture import host_svg
from vnuma.services import Settings
from vnuma.services.stats import select


def host_picture(settings: Settings, name: str) -> str:
    """The drawing of host ``name`` and what its VMs hold, as SVG text.

    Raises:
        NotFoundError: unknown host.
    """
    with open_reader(settings.db_url) as reader:
        host, placements, tenants = reader.host_with_vms(name)
    return host_svg(host, placements, {t: tenant.isolation for t, tenant in tenants.items()})


def fleet_picture(settings: Settings, vm: str | None = None, host: str | None = None) -> str:
    """The fleet picture (SVG text) of the hosts ``stats`` reports on (all, ``host``, or ``vm``'s host).

    Raises:
        NotFoundError: unknown VM or host.
    """
    with open_reader(settings.db_url) as reader:
        snap = reader.snapshot()
    hosts, placements = select(snap, vm, host)
    return fleet_svg(hosts, placements, {name: t.isolation for name, t in snap.tenants.items()})


def svg_to_png(svg: str) -> bytes:
    """The SVG rendered to PNG by CairoSVG."""
    import cairosvg  # imported here: cairo is loaded only when a PNG is asked for

    png = cairosvg.svg2png(bytestring=svg.encode())
    assert isinstance(png, bytes)
    return png


def write_pictures(svg: str, svg_path: Path | None, png_path: Path | None) -> list[tuple[Path, int]]:
    """Write the SVG and/or its PNG; returns each path written with its size in bytes.

    Both are written to temporary files first and renamed only when both are
    complete, so a path that cannot be written leaves the other untouched too.

    Raises:
        InvalidInputError: a path that cannot be written (missing directory, no permission, a directory).
    """
    wanted = [(p, kind) for p, kind in ((svg_path, "svg"), (png_path, "png")) if p is not None]
    staged: list[tuple[Path, str, int]] = []
    try:
        for path, kind in wanted:
            data = svg.encode() if kind == "svg" else svg_to_png(svg)
            staged.append((path, _stage(path, data), len(data)))
        for path, tmp, _size in staged:
            os.replace(tmp, path)
    except OSError as err:
        raise InvalidInputError(f"{path}: cannot write the picture: {err.strerror}", hint=WRITABLE) from err
    finally:
        for _path, tmp, _size in staged:
            Path(tmp).unlink(missing_ok=True)
    return [(path, size) for path, _tmp, size in staged]


WRITABLE = "give a file name in an existing, writable directory"


def _stage(path: Path, data: bytes) -> str:
    """``data`` in a new temporary file beside ``path`` (mode 0644); its name."""
    if path.is_dir():
        raise InvalidInputError(f"{path}: is a directory, expected a picture file name", hint=WRITABLE)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
    except OSError:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp
