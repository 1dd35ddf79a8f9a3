"""Batch mode's three ways to run (in this process, --workers N, --ray): the same patch, nothing lost when a
worker dies, a file changed meanwhile skipped; on a real Ray cluster of two nodes on loopback, with `tiny`."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from editspec.cli import EXIT_INPUT, main
from tests.raw_lsp import ROOT

SAMPLES = ROOT / "samples"
INSTRUCTION = "Add a one-line comment at the top of the body."
RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
# Every driver here reads one calibration (the workers take their driver's), so their patches can be compared.
CACHE = tempfile.mkdtemp(prefix="editspec-workers-cache-")
ray = pytest.importorskip("ray", reason="pip install 'editspec[ray]'")


def make_tree(root: Path, copies: int = 1) -> Path:
    tree = root / "tree"
    tree.mkdir(parents=True)
    for n in range(copies):
        suffix = f"_{n}" if copies > 1 else ""
        shutil.copy(SAMPLES / "stack.go", tree / f"stack{suffix}.go")
        shutil.copy(SAMPLES / "cart.js", tree / f"cart{suffix}.js")
    return tree


def batch(tree: Path, *extra: str, timeout: float = 300) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "editspec.cli", "batch", str(tree), "-i", INSTRUCTION, "-q", "--threads", "1",
               "--max-tokens", "60", "--state", str(tree.parent / f"state{abs(hash(extra))}.json"), *extra]  # fmt: skip
    env = dict(os.environ, **RAY_ENV, XDG_CACHE_HOME=CACHE)
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, cwd=tree.parent)


@pytest.fixture(scope="module", autouse=True)
def one_calibration():
    """The drivers' calibration, measured here in one sweep instead of five (what it says does not matter here,
    only that every run reads the same one): half a minute less."""
    from editspec import calibration
    from editspec.backend import LlamaBackend

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", CACHE)
        mp.setattr(calibration, "SWEEPS", 1)
        backend = LlamaBackend("tiny", n_threads=1)
        try:
            calibration.verify_seconds(backend)
        finally:
            backend.close()


@pytest.fixture(scope="module")
def in_process_patch(tmp_path_factory):
    tree = make_tree(tmp_path_factory.mktemp("inproc"))
    run = batch(tree)
    assert run.returncode == 0, run.stderr
    assert run.stdout.count("+++ ") >= 1, "tiny rewrote nothing: the comparison would be empty"
    return run.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ray_cluster():
    """Two Ray nodes on this machine, loopback only; stopped at the end."""
    ray_cli = str(Path(sys.executable).parent / "ray")
    port = free_port()
    temp = tempfile.mkdtemp(prefix="/tmp/rt")
    env = dict(os.environ, **RAY_ENV)
    common = ["--node-ip-address", "127.0.0.1", "--num-cpus", "1", "--object-store-memory", str(200 << 20)]
    head = [ray_cli, "start", "--head", "--port", str(port), "--include-dashboard", "false", "--temp-dir", temp]
    subprocess.run(head + common + ["--disable-usage-stats"], env=env, check=True, timeout=120, capture_output=True)
    try:
        subprocess.run([ray_cli, "start", "--address", f"127.0.0.1:{port}", *common], env=env, check=True,
                       timeout=120, capture_output=True)  # fmt: skip
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([ray_cli, "stop", "--force"], env=env, timeout=120, capture_output=True)
        shutil.rmtree(temp, ignore_errors=True)


def test_workers_give_the_in_process_patch(tmp_path, in_process_patch):
    run = batch(make_tree(tmp_path), "--workers", "2", "--json", str(tmp_path / "report.json"))
    assert run.returncode == 0, run.stderr
    assert run.stdout == in_process_patch
    workers = json.loads((tmp_path / "report.json").read_text())["workers"]
    assert len(workers) == 2 and all(w["functions"] > 0 and w["tokens_per_second"] > 0 for w in workers.values())


def test_ray_cluster_gives_the_in_process_patch(tmp_path, in_process_patch, ray_cluster):
    run = batch(make_tree(tmp_path), "--ray", ray_cluster, "--json", str(tmp_path / "report.json"))
    assert run.returncode == 0, run.stderr
    assert run.stdout == in_process_patch
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["where"].startswith(f"2 Ray workers on {ray_cluster}") and len(report["workers"]) == 2


@pytest.fixture(scope="module")
def applied_in_process(tmp_path_factory):
    """The two-copy tree as an in-process `batch --apply` leaves it: what a run with workers must leave too."""
    tree = make_tree(tmp_path_factory.mktemp("expected"), copies=2)
    assert batch(tree, "--apply").returncode == 0
    return {p.name: p.read_text() for p in tree.iterdir()}


@pytest.mark.parametrize("where", ["workers", "ray"])
def test_killing_a_worker_loses_nothing_and_a_rerun_completes(tmp_path, request, where, applied_in_process):
    tree = make_tree(tmp_path, copies=2)
    originals = {p.name: p.read_text() for p in tree.iterdir()}
    expected = applied_in_process
    assert expected != originals  # the run changes something, or "nothing lost" would say nothing
    state = tmp_path / "kill-state.json"
    command = [sys.executable, "-m", "editspec.cli", "batch", str(tree), "-i", INSTRUCTION, "-q", "--threads", "1",
               "--max-tokens", "60", "--apply", "--state", str(state)]  # fmt: skip
    command += ["--workers", "2"] if where == "workers" else ["--ray", request.getfixturevalue("ray_cluster")]
    env = dict(os.environ, **RAY_ENV, XDG_CACHE_HOME=CACHE)
    driver = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.time() + 120
    while time.time() < deadline and driver.poll() is None and not state.exists():
        time.sleep(0.1)
    assert driver.poll() is None, "the run ended before a worker could be killed"
    find = ["-P", str(driver.pid), "-f", "spawn_main"] if where == "workers" else ["-f", "ray::BatchWorker"]
    workers = subprocess.run(["pgrep", *find], capture_output=True, text=True).stdout.split()
    assert workers, "no worker process found"
    os.kill(int(workers[0]), signal.SIGKILL)
    _, err = driver.communicate(timeout=300)
    # Whatever the run managed, every file is as it was or fully rewritten...
    for name, text in originals.items():
        assert (tree / name).read_text() in (text, expected[name]), name
    if driver.returncode != 0:  # ... and running the same command again finishes the job
        rerun = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
        assert rerun.returncode == 0, rerun.stderr
    # (The killed worker's file is given to another worker: usually the first run finishes it all.)
    assert {p.name: p.read_text() for p in tree.iterdir()} == expected, err


def test_workers_end_when_their_driver_is_killed(tmp_path):
    """SIGKILL leaves the driver no time to stop its pool: its workers must not live on, each holding a model."""
    tree = make_tree(tmp_path, copies=2)
    state = tmp_path / "s.json"
    command = [sys.executable, "-m", "editspec.cli", "batch", str(tree), "-i", INSTRUCTION, "-q", "--threads", "1",
               "--max-tokens", "60", "--state", str(state), "--workers", "2"]  # fmt: skip
    driver = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env=dict(os.environ, XDG_CACHE_HOME=CACHE))  # fmt: skip
    try:
        deadline = time.time() + 120
        workers: list[str] = []
        while time.time() < deadline and driver.poll() is None and len(workers) < 2:
            found = subprocess.run(["pgrep", "-P", str(driver.pid), "-f", "spawn_main"], capture_output=True, text=True)
            workers = found.stdout.split()
            time.sleep(0.1)
        assert driver.poll() is None and len(workers) == 2, "the run ended before its workers could be seen"
        driver.kill()
        driver.wait(10)
        deadline = time.time() + 15
        alive = workers
        while time.time() < deadline and alive:
            alive = [w for w in workers if os.path.exists(f"/proc/{w}") and "Z" not in _state(w)]
            time.sleep(0.2)
        assert not alive, f"workers {alive} outlived their driver"
    finally:
        driver.kill()
        for w in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(w), signal.SIGKILL)


def _state(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


@pytest.mark.parametrize("where", ["workers", "ray"])
def test_a_file_changed_on_disk_during_a_run_is_skipped(tmp_path, request, where):
    tree = make_tree(tmp_path, copies=2)
    mode = ["--workers", "2"] if where == "workers" else ["--ray", request.getfixturevalue("ray_cluster")]
    command = [sys.executable, "-m", "editspec.cli", "batch", str(tree), "-i", INSTRUCTION, "--threads", "1",
               "--max-tokens", "60", "--apply", "--state", str(tmp_path / "s.json"), *mode]  # fmt: skip
    env = dict(os.environ, **RAY_ENV, XDG_CACHE_HOME=CACHE)
    driver = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    line = ""
    deadline = time.time() + 120
    while time.time() < deadline and "running on" not in line:
        line = driver.stderr.readline()
        assert line or driver.poll() is None, "the run ended early"
    edited = tree / "stack_1.go"  # planned last: not finished yet
    edited.write_text(edited.read_text() + "\n// the user's edit\n")
    _, err = driver.communicate(timeout=300)
    assert driver.returncode == 0, err
    assert edited.read_text().endswith("// the user's edit\n")
    assert "skipped" in err and "stack_1.go" in err and "changed on disk" in err


def test_without_ray_installed_ray_is_one_clear_line(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as if not installed
    tree = make_tree(tmp_path)
    result = CliRunner().invoke(main, ["batch", str(tree), "-i", "x", "--ray"])
    assert result.exit_code == EXIT_INPUT
    assert (
        result.output.strip()
        == "editspec: --ray needs Ray: pip install 'editspec[ray]' (on every machine of the cluster)"
    )


def test_ray_workers_hand_over_a_part_way_file_for_the_rerun(tmp_path, ray_cluster):
    """Ctrl-C while Ray workers are inside files: the functions they finished are in the state (sent back on a
    queue as they go), and the rerun goes on from them."""
    tree = make_tree(tmp_path, copies=2)
    state = tmp_path / "ray-state.json"
    command = [sys.executable, "-m", "editspec.cli", "batch", str(tree), "-i", INSTRUCTION, "-q", "--threads", "1",
               "--max-tokens", "60", "--apply", "--state", str(state), "--ray", ray_cluster]  # fmt: skip
    env = dict(os.environ, **RAY_ENV, XDG_CACHE_HOME=CACHE)
    driver = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    deadline, kept = time.time() + 180, 0
    while time.time() < deadline and driver.poll() is None and not kept:
        with contextlib.suppress(OSError, ValueError):
            partial = json.loads(state.read_text()).get("partial", {}).values()
            # Two functions left at least: the file is not finished before the key press lands.
            kept = sum(len(p["planned"]) - len(p["pending"]) for p in partial if len(p["pending"]) >= 2)
        time.sleep(0.02)
    assert driver.poll() is None, "the run ended before a file was part-way through"
    driver.send_signal(signal.SIGINT)
    _, err = driver.communicate(timeout=120)
    assert driver.returncode == 130 and "(kept for the rerun)" in " ".join(err.split()), err
    rerun = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert "part-way through" in " ".join(rerun.stderr.split()), rerun.stderr
    assert not state.exists()
