#!/usr/bin/env bash
# Compile and link the CUDA part of eagle_sparse (the module eagle_sparse._cuda) with nvcc,
# on a machine with or without a GPU.
#
#   scripts/build_cuda.sh            # CMake build of the _cuda target in build/cuda, then load it
#   scripts/build_cuda.sh --install  # pip install . with EAGLE_CUDA=ON into the current Python
#
# Needs nvcc (CUDA 13) and cuBLAS: the nvidia-cublas wheel (installed here if missing; CUDA 13
# puts it under site-packages/nvidia/cu13) or a toolkit that has it.  The build must see the
# environment's packages, hence --no-build-isolation.  Without a GPU the module still loads
# and reports its build (device_count() is 0).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"
command -v nvcc >/dev/null || { echo "nvcc not found: install the CUDA 13 toolkit" >&2; exit 1; }
"$PY" -c "import nvidia, os, sys; sys.exit(0 if any(os.path.isfile(os.path.join(p, 'cu13', 'include', 'cublas_v2.h')) for p in nvidia.__path__) else 1)" 2>/dev/null \
  || "$PY" -m pip install nvidia-cublas
"$PY" -m pip install -q scikit-build-core pybind11 cmake ninja
if [[ "${1:-}" == "--install" ]]; then
  "$PY" -m pip install --no-build-isolation -Ccmake.define.EAGLE_CUDA=ON -Cbuild-dir=build/cuda-install .
  "$PY" -c "import json, eagle_sparse; print(json.dumps(eagle_sparse.show_config(mode='dicts')['cuda'], indent=1))"
  exit 0
fi
cmake -S . -B build/cuda -G Ninja -DEAGLE_CUDA=ON -DPython_EXECUTABLE="$(command -v "$PY")" \
  -Dpybind11_DIR="$("$PY" -m pybind11 --cmakedir)"
cmake --build build/cuda --target _cuda
"$PY" - <<'PYEOF'
import glob, importlib.util, sys
path = glob.glob("build/cuda/_cuda*.so")[0]
spec = importlib.util.spec_from_file_location("_cuda", path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
print(f"built {path}: {mod.build_info()}; CUDA devices visible: {mod.device_count()}")
PYEOF
