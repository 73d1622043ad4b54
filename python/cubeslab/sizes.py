"""Sizes in bytes as people write them: ``1GiB``, ``512MiB``, ``2e9``."""

from __future__ import annotations

# Longest first, so that "mib" is not read as "b". A bare K, M, G or T is binary, as in most tools.
SIZE_UNITS = {"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40, "kb": 10**3, "mb": 10**6,
              "gb": 10**9, "tb": 10**12, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40,
              "b": 1}  # fmt: skip


def parse_size(text: str) -> int:
    """'1GiB', '512MiB', '2e9' → bytes; anything else is a ValueError that lists the units."""
    t = text.strip().lower().replace(" ", "")
    number, factor = t, 1
    for unit, f in SIZE_UNITS.items():
        if t.endswith(unit):
            number, factor = t[: -len(unit)], f
            break
    try:
        value = float(number) * factor
    except ValueError:
        raise ValueError(
            f"{text!r} is not a size; give bytes or a number with a unit: "
            "K, M, G, T (binary), KiB .. TiB, kB .. TB"
        ) from None
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{text!r}: a size must be a positive number of bytes")
    return int(value)


def size_text(n: int) -> str:
    """Bytes in the largest binary unit that divides them: 1073741824 → '1GiB'."""
    for unit in ("TiB", "GiB", "MiB", "KiB"):
        factor = SIZE_UNITS[unit.lower()]
        if n % factor == 0:
            return f"{n // factor}{unit}"
    return str(n)
