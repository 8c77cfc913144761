"""The Pages workflow holds the least it needs: actions pinned to commit SHAs, no stored credentials,
write permissions on the deploy job only, and no event text expanded inside a shell script."""
import re

import pytest
import yaml

from conftest import ROOT

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
PINNED = re.compile(r"^[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}$")
VERSION_COMMENT = re.compile(r"uses:\s*\S+@[0-9a-f]{40}\s+#\s*v\d+(\.\d+){0,2}\s*$")


def _load(path):
    # YAML 1.1 reads the key `on` as True; the workflow means the string.
    data = yaml.load(path.read_text(), Loader=yaml.BaseLoader)
    return data


def _steps(data):
    for name, job in data.get("jobs", {}).items():
        for step in job.get("steps", []):
            yield name, job, step


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_every_action_is_pinned_to_a_commit_with_its_version_in_a_comment(path):
    data = _load(path)
    uses = [step["uses"] for _, _, step in _steps(data) if "uses" in step]
    assert uses, f"{path.name} uses no action"
    for u in uses:
        assert PINNED.match(u), f"{path.name}: {u} is not pinned to a full commit SHA"
    lines = [line for line in path.read_text().splitlines() if re.search(r"\buses:", line)]
    for line in lines:
        assert VERSION_COMMENT.search(line), f"{path.name}: no '# vX.Y.Z' comment on: {line.strip()}"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_checkout_keeps_no_credentials(path):
    for _, _, step in _steps(_load(path)):
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step.get("with", {}).get("persist-credentials") == "false", f"{path.name}: persist-credentials"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_write_permissions_only_where_used(path):
    data = _load(path)
    assert data.get("permissions") in ({}, "{}", None) or all(
        v in ("read", "none") for v in data["permissions"].values()), f"{path.name}: workflow-wide write permission"
    for name, job in data["jobs"].items():
        perms = job.get("permissions")
        assert perms is not None, f"{path.name}: job {name} inherits permissions instead of stating them"
        writes = {k for k, v in (perms or {}).items() if v == "write"}
        deploys = any(s.get("uses", "").startswith("actions/deploy-pages@") for s in job.get("steps", []))
        assert writes == ({"pages", "id-token"} if deploys else set()), f"{path.name}: job {name} writes {writes}"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_no_event_text_is_expanded_inside_a_script(path):
    for name, _, step in _steps(_load(path)):
        assert "${{" not in step.get("run", ""), f"{path.name}: job {name} expands an expression inside run:"
