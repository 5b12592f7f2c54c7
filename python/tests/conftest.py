"""pytest setup for the pure-Python tests: python/ goes on sys.path so that `mscclrt._sync`,
`mscclrt._tuner` and `mscclrt._table` import without installing the package (and without
importing anything that loads libmscclrt)."""
import os
import sys

_PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _PYTHON_DIR not in sys.path:
    sys.path.insert(0, _PYTHON_DIR)
