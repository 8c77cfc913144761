"""collect/energy.py on the CPU: NVML stood in for by a fake library, CUDA by fake events."""
import ctypes

import pytest

from collect import energy


class FakeNVML:
    """The NVML calls Meter makes. The energy counter advances `step_mj` every `reads_per_step` reads, as the
    driver's counter moves in steps; `broken` names a call that fails."""

    def __init__(self, step_mj=100, reads_per_step=3, broken=None):
        self.energy, self.reads, self.step_mj, self.reads_per_step = 1_000_000, 0, step_mj, reads_per_step
        self.broken = broken

    def _ret(self, name):
        return 999 if name == self.broken else 0

    def nvmlInit_v2(self):
        return self._ret("init")

    def nvmlErrorString(self, ret):
        return b"Not Supported"

    def nvmlDeviceGetHandleByPciBusId_v2(self, bus, handle):
        return 999  # the CPU's torch has no device: Meter falls back to the index

    def nvmlDeviceGetHandleByIndex_v2(self, index, handle):
        return self._ret("handle")

    def nvmlDeviceGetTotalEnergyConsumption(self, handle, out):
        self.reads += 1
        if self.reads % self.reads_per_step == 0:
            self.energy += self.step_mj
        out._obj.value = self.energy
        return self._ret("energy")

    def nvmlDeviceGetEnforcedPowerLimit(self, handle, out):
        out._obj.value = 700_000  # milliwatts
        return 0

    def nvmlDeviceGetClockInfo(self, handle, clock, out):
        assert clock == energy.NVML_CLOCK_SM
        out._obj.value = 1755
        return 0


class FakeCuda:
    """Events that are done at once; the timed pair says 2 ms a call over the calls issued between them."""

    def __init__(self):
        self.calls = 0

    def synchronize(self):
        pass

    def Event(self, enable_timing=False):
        cuda = self

        class Event:
            def record(self):
                self.at = cuda.calls

            def query(self):
                return True

            def elapsed_time(self, other):
                return 2.0 * (other.at - self.at)

        return Event()


def test_power_and_energy_per_call_come_from_the_counter_window_and_the_calls_in_it(monkeypatch):
    monkeypatch.setattr(energy, "WARM_S", 0.01)
    monkeypatch.setattr(energy, "CLOCK_EVERY_S", 0.0)
    meter = energy.Meter(lib=FakeNVML())
    cuda = FakeCuda()

    def call():
        cuda.calls += 1

    r = meter.measure(call, window_s=0.05, cuda=cuda)
    assert r.calls > 0 and r.ms_per_call == pytest.approx(2.0)
    assert r.window_s >= 0.05 and r.watts > 0
    assert r.mj_per_call == pytest.approx(r.watts * 2.0)  # W x ms = mJ
    assert r.sm_clock_mhz == 1755 and r.power_limit_w == 700.0
    row = r.fields()
    assert row["board_power_w"] == r.watts and row["energy_mj_per_call"] == r.mj_per_call and r.calls > 0
    # the reading's names are the bench row's own fields, which the power case sets
    from collect.schema.bench import BenchRow
    assert set(row) <= set(BenchRow.__dataclass_fields__)


@pytest.mark.parametrize("broken, where", [("init", "nvmlInit_v2"), ("handle", "NVML handle"),
                                           ("energy", "energy counter")])
def test_a_failing_nvml_call_is_named_with_the_drivers_reason(broken, where):
    with pytest.raises(energy.EnergyUnavailable, match=f"{where}.*Not Supported"):
        energy.Meter(lib=FakeNVML(broken=broken))


def test_no_nvml_library_says_it_comes_with_the_driver(monkeypatch):
    def missing(name):
        raise OSError(name)

    monkeypatch.setattr(ctypes, "CDLL", missing)
    with pytest.raises(energy.EnergyUnavailable, match="comes with the driver"):
        energy.Meter()
