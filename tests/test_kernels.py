"""Which CPU kernels a model runs with: measured once per machine (editspec/kernels.py)."""

import json
import os
import subprocess
import sys

import pytest

from editspec import calibration, kernels
from editspec.decoding import DecodeOptions, Decoder


def measured(prefill_tokens_per_second, step, pass8, pass16):
    """A setting's measurement: one step costs `step`, passes grow linearly to `pass8` at 8 and `pass16` at 16."""
    costs = [0.0] + [step + (pass8 - step) * (m - 1) / 7 if m <= 8 else pass8 + (pass16 - pass8) * (m - 8) / 8
                     for m in range(1, 34)]  # fmt: skip
    return {"prefill_per_token": 1 / prefill_tokens_per_second, "verify_seconds": costs}


@pytest.mark.parametrize(
    "untiled, tiled, chosen",
    [
        # this AVX-512 machine: prompts 25% faster, passes of 16 a quarter cheaper
        (measured(145, 0.026, 0.111, 0.177), measured(181, 0.026, 0.114, 0.135), "1"),
        # the AVX2 machines editspec was tuned on: prompts 7% faster, passes of 8-16 20-40% dearer
        (measured(100, 0.033, 0.125, 0.218), measured(107, 0.033, 0.191, 0.251), "0"),
        # the tiny model (no K-quant weights): the same within the noise
        (measured(911, 0.0073, 0.0257, 0.0317), measured(921, 0.0073, 0.0255, 0.0315), "0"),
    ],
)
def test_the_kernels_that_make_a_typical_rewrite_shorter_are_chosen(untiled, tiled, chosen):
    entry = kernels.decide({"0": untiled, "1": tiled})
    assert entry["setting"] == chosen
    assert set(entry["modelled_seconds"]) == set(entry["pass_seconds"]) == {"0", "1"}


def in_a_new_process(env: dict, model) -> list[str]:
    code = (
        "import os, sys\nfrom editspec.backend import LlamaBackend\n"
        "b = LlamaBackend(sys.argv[1], n_ctx=256)\nprint(os.environ['GGML_CPU_TILED_MM'], b.identity()['tiled_matmul'])"
    )
    return subprocess.run(
        [sys.executable, "-c", code, str(model)], env=env, capture_output=True, text=True, check=True
    ).stdout.split()


def test_later_processes_start_with_the_stored_choice_and_the_users_setting_wins(backend, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != kernels.ENV}
    env["XDG_CACHE_HOME"] = str(tmp_path)
    assert in_a_new_process(env, backend.path) == ["0", "0"]  # nothing measured yet: as tuned
    key = kernels.choice_key(backend.path, os.cpu_count() or 1)
    calibration.atomic_update(tmp_path / "editspec" / "kernels.json", key, {"setting": "1"})
    assert in_a_new_process(env, backend.path) == ["1", "1"]
    assert in_a_new_process({**env, kernels.ENV: "0"}, backend.path) == ["0", "0"]


def test_the_first_calibration_measures_the_other_kernels_once(backend, tmp_path, monkeypatch):
    """In a cache with nothing measured: the decoder's calibration, then the other setting's in a child process
    (its calibration kept for processes that run with it); a second decoder measures nothing."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(kernels, "USER_SETTING", None)
    progress = []
    Decoder(backend, DecodeOptions(), on_calibrate=lambda done, total: progress.append((done, total)))
    entry = json.loads(kernels.choices_file().read_text())[kernels.choice_key(backend.path, backend.n_threads)]
    assert entry["setting"] in ("0", "1") and set(entry["modelled_seconds"]) == {"0", "1"}
    assert all(len(costs) == calibration.MAX_PASS for costs in entry["pass_seconds"].values())
    calibrated = {json.loads(k).get("tiled_matmul") for k in json.loads(calibration.cache_file().read_text())}
    assert calibrated == {"0", "1"}
    assert len([p for p in progress if p[0] == 0]) == 2  # this process's sweeps, then the child's
    monkeypatch.setattr(subprocess, "Popen", None)  # measured: never again
    Decoder(backend, DecodeOptions())


def test_other_kernels_that_fail_keep_this_setting_and_are_not_tried_again(backend, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(kernels, "USER_SETTING", None)
    monkeypatch.setattr(sys, "executable", "false")
    costs = [0.0] + [0.01 * m for m in range(1, 34)]
    entry = kernels.measure_other(backend, costs)
    assert entry["setting"] == backend.tiled_matmul and entry["other_failed"] == "exit code 1"
    assert kernels.measure_other(backend, costs) is None  # stored: not tried again


def test_a_users_setting_is_never_measured(backend, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(kernels, "USER_SETTING", "1")
    assert kernels.measure_other(backend, [0.0] + [0.01] * 33) is None
    assert not kernels.choices_file().exists()
