#!/usr/bin/env bash
# Does `pip install -e '.[test]'` (what `make test` installs) resolve for a stranger: a fresh virtual
# environment, pip's stock settings, stock PyPI? A machine's own pip configuration (a local wheel
# folder, an extra index, a constraint file) can hide a clash of pins, so all of it is switched off:
# no config file, and none of the variables that add a package source or a constraint. Prints what
# pip would install for the pinned packages, or pip's own error; exits non-zero when it does not resolve.
# Run by .ci/run; run it by hand after changing a pin in pyproject.toml.
set -euo pipefail
cd "$(dirname "$0")/.."

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv"

stock() {
  env -u PIP_FIND_LINKS -u PIP_CONSTRAINT -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL -u PIP_NO_INDEX \
    PIP_CONFIG_FILE=/dev/null "$@"
}

left="$(stock "$tmp/venv/bin/python" -m pip config list | cut -d= -f1 | paste -sd' ' -)"
echo "check_test_install: pip $("$tmp/venv/bin/python" -m pip --version | cut -d' ' -f2) in a fresh venv; settings left: ${left:-none}"
if ! stock "$tmp/venv/bin/python" -m pip install --quiet --dry-run --ignore-installed \
     --report "$tmp/report.json" '.[test]' 2>"$tmp/err"; then
  cat "$tmp/err" >&2
  echo "check_test_install: the test extra does not resolve on stock PyPI; fix the pins in pyproject.toml" >&2
  exit 1
fi
"$tmp/venv/bin/python" - "$tmp/report.json" <<'EOF'
import json, sys

report = json.load(open(sys.argv[1]))
got = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in report["install"]}
wanted = ("torch", "triton", "numpy", "pytest", "pytest-xdist", "playwright", "transformers", "nbclient")
print("check_test_install: resolves on stock PyPI:", ", ".join(f"{n} {got[n]}" for n in wanted if n in got),
      f"({len(got)} packages)")
EOF
