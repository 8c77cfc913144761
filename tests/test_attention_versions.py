"""The record of kernel versions (kernels/attention/versions.py): complete, dated, ordered, and
each version still runnable as recorded (numerics through Triton's interpreter, tiny shapes)."""
import datetime

import pytest
import torch

from kernels.attention import hopper as H
from kernels.attention import versions as V
from kernels.attention import reference_attention

pytestmark = [
    pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:divide by zero encountered in log2:RuntimeWarning"),
]


def test_registry_tells_a_complete_story():
    names = list(V.VERSIONS)
    assert names[0] == "v0-portable" and V.FINAL_VERSION in names
    assert len(set(names)) == len(names)
    today = datetime.date.today()
    for i, (name, v) in enumerate(V.VERSIONS.items()):
        assert v.name == name and name.startswith(f"v{i}-")
        # None: flash_attention's own choice per shape (what ships)
        assert v.change and v.prediction and v.path in ("portable", "hopper", "gluon", None)
        assert datetime.date.fromisoformat(v.predicted_at) <= today
        # A prediction compares against something measured before it: SDPA or an earlier version.
        assert v.baseline == "sdpa" or v.baseline in names[:i], f"{name}: baseline {v.baseline!r}"
        assert set(v.predicted_speedup) <= {"non-causal", "causal"} and v.predicted_speedup
        for lo, hi in v.predicted_speedup.values():
            assert 0 < lo <= hi
        assert v.maskings and set(v.maskings) <= {"non-causal", "causal"}
        assert set(v.predicted_speedup) <= set(v.maskings)
        for masking in v.maskings:
            causal = masking == "causal"
            cfg = v.config_for(causal)
            if v.features is None or callable(v.features):  # a per-shape choice: the path picks the config
                assert cfg is None
                continue
            assert cfg is not None, f"{name} needs a fixed config for {masking}"
            if v.path == "gluon":  # the Gluon path's config names one of its recorded steps
                from kernels.attention.gluon_versions import get_version as gluon_step

                gluon_step(cfg["version"])  # raises if unknown
                continue
            H._config_from(cfg, causal)  # raises if unusable
    assert [v.name for v in V.VERSIONS.values() if v.role == "t4-fix"] == ["v2-wide"]


def test_versions_run_their_own_path():
    assert V.get_version("v0-portable").requires_hopper is False
    assert all(v.requires_hopper for n, v in V.VERSIONS.items() if n != "v0-portable")
    assert V.get_version(V.FINAL_VERSION).features is None  # the journey ends at what ships
    with pytest.raises(ValueError, match="unknown kernel version"):
        V.get_version("v99-magic")


def test_final_version_is_what_the_public_function_runs():
    final = V.get_version(V.FINAL_VERSION)
    assert final.features is None or final.features == H.BEST


def test_v7_keeps_its_own_choice_so_it_can_still_be_timed_as_it_was():
    assert not V.v7_features(True, 4096).persistent and V.v7_features(False, 4096).persistent
    assert V.v7_features(True, H.SPLIT_FROM_SEQ_LEN).causal_split
    assert V.get_version("v7-default").features_for(True, 4096) == V.v7_features(True, 4096)


@pytest.mark.parametrize("name", [n for n, v in V.VERSIONS.items() if v.path == "hopper"])
def test_every_recorded_hopper_version_still_runs_as_recorded(name):
    # Deleting an experiment switch must not strand a recorded version: each one runs with its own
    # Features (at the interpreter's tile size) and matches the reference, on a ragged length.
    version = V.get_version(name)
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 2, 37, 16, generator=g).half() for _ in range(3))
    for masking in version.maskings:
        causal = masking == "causal"
        out = H.run_for_test(q, k, v, causal, features=version.features_for(causal, q.shape[2]))
        err = (out.double() - reference_attention(q, k, v, causal)).abs().max().item()
        assert err < 4e-3, f"{name} {masking}: max error {err:.2e}"


def test_every_record_of_the_notes_file_belongs_to_a_version_and_reads_back_whole():
    from kernels.notes import load_notes, parse_notes

    notes = load_notes("kernels.attention")
    steps = {v.configs[False]["version"] for v in V.VERSIONS.values() if v.path == "gluon"}
    own = {n for n, v in V.VERSIONS.items() if v.path != "gluon"}
    assert set(notes) == own | steps
    assert all(w["change"] and w["prediction"] and w["predicted_at"] for w in notes.values())
    text = "# t\n\n## a\n\nPredicted at: 2026-01-02\n\n### Change\n\none\ntwo\n\n### Prediction\n\nthree\n"
    assert parse_notes(text) == {"a": {"predicted_at": "2026-01-02", "change": "one two", "prediction": "three",
                                       "outcome": ""}}
