"""Device comparison (docs/compare.md): every run in data/runs and every published reference in data/reference,
with the same charts overlaid per device.

References are figures transcribed from a write-up, not re-measured here. They are drawn grey,
dashed and with open markers, and the legend, every caption and a banner say they are published.
Line charts carry a device selector. Past MAX_SHOWN devices, only the narrated run, the references
and the newest runs are drawn at first, so the page stays readable as runs accumulate.

One module per section of the page, in its order: history.py (the opening and the run history), before_after.py
(the previous kernel version), glance.py (what is compared, at a glance), devices.py (ceilings, the forward pass,
bytes moved and occupancy), decode.py. common.py holds the devices and their rows, charts.py the two kinds of chart.
"""
from __future__ import annotations

from .before_after import BeforeAfter
from .decode import Decode
from .devices import Devices
from .glance import Glance
from .history import History


class ComparePage(History, BeforeAfter, Glance, Devices, Decode):
    """The Device comparison page's context: each `{{ compare.xxx() }}` in the template is a method of one section."""
