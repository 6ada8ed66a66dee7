"""The scale harness lives under benchmarks/, beside the package: importable from the checkout."""

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[3])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
