#!/usr/bin/env bash
# The declared dependency floor, installed and tested: a fresh virtual environment gets
# exactly the minimum versions pyproject.toml declares (numpy==, scipy==, threadpoolctl==
# read from its `dependencies`, so the floor is written in one place), then the package,
# then the drop-ins' and solve's tests run there against the installed package.  No
# optional extra is installed: the tests that need one skip, saying which.
#
#   scripts/floor_check.sh [WHEEL]   # WHEEL: a built wheel (.ci/run passes the one
#                                    # build_wheel.sh made); without it, `pip install .`
#
# Environment: PYTHON (default python3); EAGLE_FLOOR_VENV (default: a temporary folder).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
PY="${PYTHON:-python3}"
TARGET="${1:-.}"
if [[ "$TARGET" != "." ]]; then TARGET="$(cd "$(dirname "$TARGET")" && pwd)/$(basename "$TARGET")"; fi

# The floor: each `name>=X` of [project].dependencies becomes `name==X`.
mapfile -t PINS < <("$PY" - <<'PYEOF'
import re, sys, tomllib

with open("pyproject.toml", "rb") as f:
    deps = tomllib.load(f)["project"]["dependencies"]
for dep in deps:
    m = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)\s*>=\s*([0-9][0-9A-Za-z.]*)\s*", dep)
    if m is None:
        sys.exit(f"floor_check: dependency {dep!r} declares no '>=' floor")
    print(f"{m[1]}=={m[2]}")
PYEOF
)
echo "floor: ${PINS[*]}"

VENV="${EAGLE_FLOOR_VENV:-$(mktemp -d)/floor}"
"$PY" -m venv "$VENV"
VPY="$VENV/bin/python"
"$VPY" -m pip install -q --upgrade pip
# One resolver call: pip refuses if the package's own requirements contradict the pins.
"$VPY" -m pip install -q --only-binary numpy,scipy "${PINS[@]}" pytest hypothesis "$TARGET"
"$VPY" -m pip check

cd "$(mktemp -d)"  # not the checkout: the installed package must serve
"$VPY" - "${PINS[@]}" <<'PYEOF'
import sys
from importlib.metadata import version

for pin in sys.argv[1:]:
    name, want = pin.split("==")
    got = version(name)
    if got != want:
        sys.exit(f"floor_check: {name} {got} installed, the floor is {want}")
import eagle_sparse as es

backends = es.available_backends()
assert backends[0] == "native", backends
print("floor venv:", ", ".join(f"{p.split('==')[0]} {version(p.split('==')[0])}"
                               for p in sys.argv[1:]), "| backends", backends)
PYEOF

cd "$ROOT"
OPENBLAS_NUM_THREADS=1 "$VENV/bin/pytest" -q -p no:cacheprovider \
  tests/linalg tests/_solve/test_front.py tests/_lsq/test_sketch_solve.py \
  tests/integration/test_scipy_parity.py tests/test_config.py
