"""How a graph session picks its attention config and launch from timings of the captured step
(kernels.decode.session.pick_attention): which choices are timed together, and which one wins."""
import pytest

from kernels.decode.split_kv_config import LAUNCH_CHOICES, PLAIN_LAUNCH
from kernels.decode.session import pick_attention


class Timings:
    """A stand-in for timing captured steps: fixed ms per choice, and a record of each round."""

    def __init__(self, ms):
        self.ms = ms
        self.rounds = []

    def __call__(self, choices):
        self.rounds.append(list(choices))
        return {c: self.ms[c] for c in choices}


def _ms(configs, slow_launch=1.0):
    """ms per choice: config i takes 10 + i plainly, and `slow_launch` more as a PDL dependent."""
    return {(i, how): 10.0 + i + (0 if how == PLAIN_LAUNCH else slow_launch) for i in range(configs)
            for how in LAUNCH_CHOICES}


def test_every_config_runs_plainly_then_the_fastest_runs_every_launch():
    ms = _ms(5)
    ms[(3, PLAIN_LAUNCH)] = 5.0  # config 3 is the fastest plain
    t = Timings(ms)
    best, times = pick_attention(5, LAUNCH_CHOICES, t)
    assert t.rounds == [[(i, PLAIN_LAUNCH) for i in range(5)], [(3, how) for how in LAUNCH_CHOICES]]
    assert best == (3, PLAIN_LAUNCH)
    assert set(times) == {(i, PLAIN_LAUNCH) for i in range(5)} | {(3, how) for how in LAUNCH_CHOICES}


def test_a_launch_wins_only_against_its_own_round():
    ms = _ms(3)
    ms[(1, PLAIN_LAUNCH)] = 5.0
    ms[(1, LAUNCH_CHOICES[2])] = 4.0  # the late-trigger PDL launch beats the plain one, side by side
    calls = []

    def measure(choices):
        calls.append(choices)
        # The second round re-times the plain capture: a slower round must not keep the first's time.
        return {c: ms[c] + (1.5 if len(calls) == 2 and c[1] == PLAIN_LAUNCH else 0.0) for c in choices}

    best, times = pick_attention(3, LAUNCH_CHOICES, measure)
    assert best == (1, LAUNCH_CHOICES[2])
    assert times[(1, PLAIN_LAUNCH)] == 6.5  # the second round's time where a choice ran in both


def test_one_config_times_only_the_launches_and_one_launch_only_the_configs():
    t = Timings(_ms(1, slow_launch=-2.0))
    best, _ = pick_attention(1, LAUNCH_CHOICES, t)
    assert t.rounds == [[(0, how) for how in LAUNCH_CHOICES]] and best[1] != PLAIN_LAUNCH
    t = Timings(_ms(4))
    best, times = pick_attention(4, (PLAIN_LAUNCH,), t)  # a GPU without programmatic dependent launch
    assert t.rounds == [[(i, PLAIN_LAUNCH) for i in range(4)]] and best == (0, PLAIN_LAUNCH) and len(times) == 4


def test_nothing_to_choose_from_is_refused():
    with pytest.raises(ValueError, match="nothing to choose from"):
        pick_attention(0, LAUNCH_CHOICES, Timings({}))
    with pytest.raises(ValueError, match="nothing to choose from"):
        pick_attention(2, (), Timings({}))
