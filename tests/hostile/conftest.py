import pytest

from conftest import mkdocs_build
from hostile import corpus


@pytest.fixture(scope="session")
def hostile_site(tmp_path_factory):
    """The hostile corpus built with `mkdocs build --strict` (shared by the site and browser tests)."""
    root = tmp_path_factory.mktemp("hostile")
    c = corpus.hostile_data(root / "data")
    site = root / "site"
    # The attacked run has a failed and a stopped phase, so it is narrated by name, not as the newest complete one.
    proc = mkdocs_build(site, data_dir=c.data_dir, narrated=c.narrated)
    assert proc.returncode == 0, f"the hostile run must build:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return c, site
