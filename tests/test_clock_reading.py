"""A phase's clock readings judged against the device's maximum SM clock (render/clock_reading.py)."""
from types import SimpleNamespace

import pandas as pd

from render.clock_reading import overshoot, overshoot_words

DEVICE = SimpleNamespace(sm_clock_max_mhz=1980.0)


def test_a_reading_past_the_maximum_is_said_with_its_size_as_the_rests_clock_not_the_calls():
    # run h100-20261205b: a median of 2,082 MHz on a 1,980 MHz device, 5.2% above it
    rows = pd.DataFrame({"sm_clock_mhz": [1822.0, 2082.0], "sm_clock_max_mhz": [1900.0, None]})
    assert overshoot(rows, DEVICE) == (2082.0, 1980.0)
    words = overshoot_words(rows, DEVICE)
    assert ("are of the rest before each call, not of the call: the highest, 2,082 MHz, lies 5.2% above the device's "
            "reported maximum of 1,980 MHz, so a gap between two readings of that size or less need not be one "
            "between the calls' own clocks.") in words
    # a single sample past it counts too, though every median stays under
    assert overshoot(pd.DataFrame({"sm_clock_mhz": [1900.0], "sm_clock_max_mhz": [2000.0]}), DEVICE) == (2000.0, 1980.0)


def test_readings_under_the_maximum_or_without_one_say_nothing():
    under = pd.DataFrame({"sm_clock_mhz": [1822.0, 1979.9]})
    assert overshoot(under, DEVICE) is None and overshoot_words(under, DEVICE) == ""
    assert overshoot(pd.DataFrame({"sm_clock_mhz": [2100.0]}), SimpleNamespace(sm_clock_max_mhz=None)) is None
    assert overshoot(pd.DataFrame({"sm_clock_mhz": [None]}), DEVICE) is None
    assert overshoot(pd.DataFrame(), DEVICE) is None
