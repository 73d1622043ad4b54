"""Mass-spectrometry imaging: imzML in (`ingest`), and stores read in MSI terms (`MsiCube`)."""

from .cube import MsiCube
from .ingest import ingest_imzml, is_imzml

__all__ = ["MsiCube", "ingest_imzml", "is_imzml"]
