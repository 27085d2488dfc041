#!/usr/bin/env bash
# cibuildwheel's macOS before-all: an OpenMP runtime for the architecture being built and
# for the deployment target of the wheel (MACOSX_DEPLOYMENT_TARGET), where Homebrew's
# libomp serves neither (it is built for the runner's own architecture and macOS
# version, so delocate refuses it in an x86_64 or 11.0 wheel).  conda-forge's
# llvm-openmp is built per architecture for old deployment targets (10.13 on x86_64,
# 11.0 on arm64); micromamba installs it into $OPENMP_PREFIX, which
# [tool.cibuildwheel.macos] hands to CMake as OpenMP_ROOT.  Run on a runner of the
# architecture being built (the workflow's matrix: macos-13 x86_64, macos-14 arm64).
set -euo pipefail
PREFIX="${OPENMP_PREFIX:-$HOME/openmp}"
case "$(uname -m)" in
  arm64) PLATFORM=osx-arm64 ;;
  x86_64) PLATFORM=osx-64 ;;
  *) echo "unsupported architecture $(uname -m)" >&2; exit 1 ;;
esac
WORK="$(mktemp -d)"
curl -fsSL "https://micro.mamba.pm/api/micromamba/${PLATFORM}/latest" | tar -xj -C "$WORK" bin/micromamba
"$WORK/bin/micromamba" create -y -q -r "$WORK/root" -p "$PREFIX" -c conda-forge "llvm-openmp>=17"
ls "$PREFIX/lib/libomp.dylib" "$PREFIX/include/omp.h"
