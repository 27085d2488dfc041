"""eagle_sparse.backends._device: which compiled CUDA code runs on which device."""

from __future__ import annotations

import pytest

from eagle_sparse.backends import _device


def test_parse_archs_reads_cmakes_spelling():
    info = "CUDA runtime 13.0, cuBLAS 13.0, archs 75-real,80-real,90a-real,120-real,120-virtual"
    assert _device.parse_archs(info) == [(75, "sass"), (80, "sass"), (90, "exact"),
                                         (120, "sass"), (120, "ptx")]
    assert _device.parse_archs("archs 80,90") == [(80, "both"), (90, "both")]
    assert _device.parse_archs("archs unknown") == []


@pytest.mark.parametrize(("archs", "cc", "runs"), [
    ("80-real", 80, True),
    ("80-real", 86, True),     # SASS runs on later minors of its major
    ("86-real", 80, False),    # ... not on earlier ones
    ("80-real", 90, False),    # ... nor on another major
    ("80-virtual", 90, True),  # PTX is compiled by the driver for any later device
    ("90-virtual", 80, False),
    ("90a-real", 90, True),    # arch-specific code: its own device only
    ("90a-real", 100, False),
    ("75-real,120-virtual", 121, True),
    ("75-real,80-real,120-real", 70, False),
    ("80,90", 89, True),       # a bare number is SASS and PTX
])
def test_runs_on(archs, cc, runs):
    assert _device.runs_on(_device.parse_archs(f"archs {archs}"), cc) is runs


def test_a_module_without_code_for_the_device_is_not_used():
    class Module:
        @staticmethod
        def build_info():
            return "CUDA runtime 13.0, cuBLAS 13.0, archs 80-real,90-real"

    caps = {0: "90", 1: "75"}

    class Dev:
        def __init__(self, i):
            self.compute_capability = caps[i]

    class Runtime:
        @staticmethod
        def getDeviceCount():
            return 2

    class Cuda:
        runtime = Runtime
        Device = Dev

    class Cupy:
        cuda = Cuda

    why = _device._module_fits_devices(Module, Cupy)
    assert "device 1 has 7.5" in why and "CuPy formulas serve" in why
    caps[1] = "90"
    assert _device._module_fits_devices(Module, Cupy) == ""


def test_executors_keep_their_identity_through_pickle_and_copy():
    import copy
    import pickle

    from eagle_sparse.backends import CUDA, HOST

    for ex in (HOST, CUDA):
        assert pickle.loads(pickle.dumps(ex)) is ex
        assert copy.deepcopy(ex) is ex
