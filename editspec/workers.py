"""Where a batch's file jobs run: in this process, in local worker processes, or on a Ray cluster.

The planning, the per-file job (`batch.rewrite_source`) and the writing (`batch.finish_file`, by the driver
alone) are batch mode's own; only where a job runs changes. A worker holds one model, loaded once, receives a
file's planned content and the functions to rewrite, and sends back the new text and the per-function outcome:
workers need no shared file system. A job whose worker dies (or whose worker cannot run it) is given to another
worker once more; failing twice, it is reported, never retried forever.
"""

from __future__ import annotations

import concurrent.futures
import copy
import multiprocessing
import os
import queue as queue_module
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from .batch import Checkpoint, FileJob, FileOutcome, rewrite_source

MAX_ATTEMPTS = 2
CHECKPOINT_POLL_SECONDS = 0.25  # how often a pool of workers hands their checkpoints to the driver


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a worker needs to build the same decoder as the driver would (model names resolved by the
    driver, so that every machine loads the same model whatever its environment says)."""

    model: str | None
    draft_model: str | None
    threads: int | None
    gpu_layers: int | None
    temperature: float
    top_p: float
    seed: int | None
    max_tokens: int | None
    speculate: bool
    context_tokens: int
    prefix_cache_mb: int
    instruction: str
    verify_seconds: tuple[float, ...] | None = None  # the driver's calibration: every worker drafts alike
    policy_state: dict | None = None  # and the driver's acceptance estimates


@dataclass
class FileTask:
    index: int  # the job's place in the plan: the patch keeps the plan's order
    display: str
    path: str
    language: str
    content: bytes
    wanted: list[tuple[str, int]]
    attempts: int = 0
    resume: Checkpoint | None = None  # where an earlier run got to in this file


@dataclass
class TaskResult:
    index: int
    text: str
    outcome: FileOutcome


@dataclass
class WorkerStats:
    files: int = 0
    functions: int = 0
    tokens: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict:
        rate = self.tokens / self.seconds if self.seconds else 0.0
        per_minute = self.functions * 60 / self.seconds if self.seconds else 0.0
        return {
            "files": self.files,
            "functions": self.functions,
            "tokens": self.tokens,
            "seconds": round(self.seconds, 2),
            "tokens_per_second": round(rate, 1),
            "functions_per_minute": round(per_minute, 1),
        }


class BatchWorker:
    """One model, many files."""

    def __init__(self, spec: WorkerSpec):
        from .decoding import DecodeOptions, open_decoder
        from .rewrite import Rewriter

        options = DecodeOptions(
            speculate=spec.speculate,
            temperature=spec.temperature,
            top_p=spec.top_p,
            seed=spec.seed,
            max_tokens=spec.max_tokens,
        )
        decoder = open_decoder(
            spec.model,
            spec.draft_model,
            threads=spec.threads,
            options=options,
            prefix_cache_mb=spec.prefix_cache_mb,
            gpu_layers=spec.gpu_layers,
            verify_seconds=spec.verify_seconds,
            policy_state=spec.policy_state,
        )
        # No second look in a batch: across a tree, many definitions rightly need no change.
        self.rewriter = Rewriter(decoder, spec.context_tokens, second_look=False)
        self.instruction = spec.instruction
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        self.policy = copy.deepcopy(decoder.policy)

    def start_file(self) -> None:
        """Every file starts from the same model state, whichever worker runs it and whatever it ran before:
        no KV cache or kept prefixes from other files, the draft-length policy as it was at the start. So a
        file's rewrite is the same in this process, in a worker process or on a Ray node (greedy outputs
        depend, at near-ties, on how the KV cache was computed)."""
        decoder = self.rewriter.decoder
        for backend in (decoder.backend, decoder.draft_backend):
            if backend is None:
                continue
            backend.truncate(0)
            if getattr(backend, "prefix_cache", None) is not None:
                backend.prefix_cache.entries.clear()
        decoder.policy = copy.deepcopy(self.policy)

    @classmethod
    def with_rewriter(cls, rewriter, instruction: str) -> BatchWorker:
        """The in-process worker, around the driver's own (already loaded) model."""
        worker = cls.__new__(cls)
        worker.rewriter, worker.instruction, worker.name = rewriter, instruction, ""
        rewriter.decoder.learning = False  # fixed costs and estimates, as in the worker processes
        worker.policy = copy.deepcopy(rewriter.decoder.policy)
        return worker

    def run_reporting(self, task: FileTask, checkpoints) -> TaskResult:
        """`run`, putting each checkpoint on a queue (a Ray worker's way to hand them to its driver)."""
        return self.run(task, on_checkpoint=lambda c: checkpoints.put((task.index, task.attempts, c)))

    def run(self, task: FileTask, on_function=None, on_progress=None, on_checkpoint=None) -> TaskResult:
        from pathlib import Path

        from .locate import language_for
        from .rewrite import SourceFile

        t0 = time.monotonic()
        self.start_file()
        source = SourceFile.from_bytes(task.content, Path(task.path))
        text, outcome = rewrite_source(
            self.rewriter,
            source,
            language_for(None, task.language),
            [tuple(w) for w in task.wanted],
            self.instruction,
            task.display,
            on_function,
            on_progress,
            resume=task.resume,
            on_checkpoint=on_checkpoint,
        )
        outcome.worker = self.name
        outcome.seconds = time.monotonic() - t0
        return TaskResult(task.index, text, outcome)


def make_tasks(
    jobs: list[FileJob], displays: list[str], resumes: list[Checkpoint | None] | None = None
) -> list[FileTask]:
    resumes = resumes or [None] * len(jobs)
    tasks = []
    for i, (job, display, resume) in enumerate(zip(jobs, displays, resumes, strict=True)):
        wanted = [(t.name, t.line) for t in job.targets]
        tasks.append(FileTask(i, display, str(job.path), job.language.name, job.raw, wanted, resume=resume))
    return tasks


# A pool runs tasks and yields (task, TaskResult) as they finish, or (task, Exception) for a job that failed
# MAX_ATTEMPTS times; on_function(name, what, tokens) is called per function where the pool can (in-process), and
# on_checkpoint(task, Checkpoint) after each function of a file, so that an interrupted run keeps them.
@dataclass
class InProcessPool:
    spec: WorkerSpec
    worker: BatchWorker | None = None
    description: str = "in this process"

    def start(self) -> None:
        self.worker = self.worker or BatchWorker(self.spec)

    def run(
        self, tasks: list[FileTask], on_function: Callable | None = None, on_checkpoint: Callable | None = None
    ) -> Iterator[tuple[FileTask, object]]:
        for task in tasks:
            keep = (lambda checkpoint, task=task: on_checkpoint(task, checkpoint)) if on_checkpoint else None
            yield task, self.worker.run(task, on_function, on_checkpoint=keep)

    def close(self) -> None:
        pass


_local_worker: BatchWorker | None = None
_local_checkpoints = None  # the driver's queue of (task index, attempt, Checkpoint)


def _local_init(spec: WorkerSpec, driver: int, checkpoints=None) -> None:
    global _local_worker, _local_checkpoints
    _exit_with(driver)
    _local_worker = BatchWorker(spec)
    _local_checkpoints = checkpoints


def _exit_with(driver: int, interval: float = 0.5) -> None:
    """End this worker process when its driver is gone. A driver killed outright (SIGKILL, the OOM killer) cannot
    stop its pool, and its workers would wait on their job queue for ever, each holding a model in memory: the
    queue never reports its end, as every worker holds both ends of it."""

    def watch() -> None:
        while os.getppid() == driver:
            time.sleep(interval)
        os._exit(1)

    threading.Thread(target=watch, name="editspec-driver-watch", daemon=True).start()


def _local_run(task: FileTask) -> TaskResult:
    queue = _local_checkpoints
    keep = (lambda checkpoint: queue.put((task.index, task.attempts, checkpoint))) if queue is not None else None
    return _local_worker.run(task, on_checkpoint=keep)


def _take_checkpoint(task: FileTask | None, attempts: int, checkpoint: Checkpoint, on_checkpoint) -> None:
    """A checkpoint from a worker, handed to the driver (for a rerun after an interruption) unless the task has
    finished or moved on to another attempt since: checkpoints arrive on a queue of their own. A job given to
    another worker after its worker died starts where the job started, not from its checkpoints: within one run
    a file's rewrite is the same wherever it runs (see BatchWorker.start_file)."""
    if task is not None and task.attempts == attempts and on_checkpoint is not None:
        on_checkpoint(task, checkpoint)


@dataclass
class ProcessPool:
    """`--workers N`: N local processes, each with its own model (loaded once), one job each at a time."""

    spec: WorkerSpec
    workers: int
    executor: concurrent.futures.ProcessPoolExecutor | None = None
    description: str = ""
    checkpoints: object = None  # a queue the workers put their checkpoints on

    def start(self) -> None:
        self.description = f"{self.workers} local worker processes"
        self._new_executor()

    def _new_executor(self) -> None:
        context = multiprocessing.get_context("spawn")
        self.checkpoints = context.Queue()  # handed to each worker as it starts (a queue cannot go with a job)
        self.executor = concurrent.futures.ProcessPoolExecutor(
            max_workers=self.workers,
            mp_context=context,
            initializer=_local_init,
            initargs=(self.spec, os.getpid(), self.checkpoints),
        )

    def _drain(self, running: dict, on_checkpoint) -> None:
        by_index = {task.index: task for task in running.values()}
        while True:
            try:
                index, attempts, checkpoint = self.checkpoints.get_nowait()
            except (queue_module.Empty, OSError, ValueError):
                return
            _take_checkpoint(by_index.get(index), attempts, checkpoint, on_checkpoint)

    def run(
        self, tasks: list[FileTask], on_function: Callable | None = None, on_checkpoint: Callable | None = None
    ) -> Iterator[tuple[FileTask, object]]:
        queue = list(tasks)
        running: dict[concurrent.futures.Future, FileTask] = {}
        while queue or running:
            while queue and len(running) < self.workers:
                task = queue.pop(0)
                task.attempts += 1
                running[self.executor.submit(_local_run, task)] = task
            done, _ = concurrent.futures.wait(
                running, timeout=CHECKPOINT_POLL_SECONDS, return_when=concurrent.futures.FIRST_COMPLETED
            )
            self._drain(running, on_checkpoint)
            broken = False
            for future in done:
                task = running.pop(future)
                try:
                    yield task, future.result()
                except concurrent.futures.process.BrokenProcessPool as e:
                    broken = True
                    yield from _retry_or_fail(task, queue, e)
                except Exception as e:  # the job itself failed on its worker
                    yield from _retry_or_fail(task, queue, e)
            if broken:  # a worker died: every job on the pool is lost; start a new pool, give them out again
                for future, task in list(running.items()):
                    running.pop(future)
                    yield from _retry_or_fail(task, queue, RuntimeError("a worker process died"))
                self.close()
                self._new_executor()

    def close(self) -> None:
        if self.executor is not None:
            for process in list(getattr(self.executor, "_processes", {}).values()):
                process.kill()
            # Wait for the pool's manager thread (quick: its processes are gone). Left running, it can close its
            # wake-up pipe while the interpreter's exit writes to it: a traceback after the work is done
            # (Python 3.11, `OSError: [Errno 9] Bad file descriptor` in `concurrent.futures.process`).
            self.executor.shutdown(wait=True, cancel_futures=True)
        if self.checkpoints is not None:
            self.checkpoints.close()
            self.checkpoints.cancel_join_thread()  # its workers are gone: nothing more will be read


def _retry_or_fail(task: FileTask, queue: list[FileTask], error: Exception):
    if task.attempts < MAX_ATTEMPTS:
        queue.insert(0, task)
        return
    yield task, error


@dataclass
class RayPool:
    """`--ray [ADDRESS]`: one actor per worker on a Ray cluster (a local one, on loopback, without an
    address); each actor holds one model and takes one job at a time."""

    spec: WorkerSpec
    address: str | None
    workers: int | None
    actors: list = field(default_factory=list)
    checkpoints: object = None  # a Ray queue the workers put their checkpoints on
    started_local: bool = False
    description: str = ""

    def start(self) -> None:
        ray = import_ray()
        if not ray.is_initialized():
            if self.address:
                host = self.address.rsplit(":", 1)[0]
                loopback = host in ("127.0.0.1", "localhost")
                ray.init(address=self.address, _node_ip_address="127.0.0.1" if loopback else None,
                         log_to_driver=False)  # fmt: skip
            else:
                ray.init(_node_ip_address="127.0.0.1", include_dashboard=False, log_to_driver=False)
                self.started_local = True
        cpus = int(ray.cluster_resources().get("CPU", 1))
        threads = self.spec.threads or 1
        count = self.workers or max(1, cpus // threads)
        self._actor_class = ray.remote(num_cpus=threads)(BatchWorker)
        self.actors = [self._actor_class.remote(self.spec) for _ in range(count)]
        from ray.util.queue import Queue

        self.checkpoints = Queue(actor_options={"num_cpus": 0})  # takes no worker's CPU
        where = self.address or "a local Ray instance"
        self.description = f"{count} Ray workers on {where} ({cpus} CPUs, {threads} thread(s) each)"

    def _drain(self, running: dict, on_checkpoint) -> None:
        by_index = {task.index: task for task, _ in running.values()}
        try:
            waiting = self.checkpoints.qsize()
            arrived = self.checkpoints.get_nowait_batch(waiting) if waiting else []
        except Exception:  # the queue's actor is gone: the checkpoints are lost, the work goes on
            return
        for index, attempts, checkpoint in arrived:
            _take_checkpoint(by_index.get(index), attempts, checkpoint, on_checkpoint)

    def run(
        self, tasks: list[FileTask], on_function: Callable | None = None, on_checkpoint: Callable | None = None
    ) -> Iterator[tuple[FileTask, object]]:
        ray = import_ray()
        queue = list(tasks)
        idle = list(self.actors)
        running: dict = {}  # ObjectRef -> (task, actor)
        while queue or running:
            while queue and idle:
                task, actor = queue.pop(0), idle.pop(0)
                task.attempts += 1
                running[actor.run_reporting.remote(task, self.checkpoints)] = (task, actor)
            if not running:  # every worker died: stop here; the finished files are kept, a re-run resumes
                raise WorkersFailed("no Ray worker is left to run the remaining files")
            done, _ = ray.wait(list(running), num_returns=1, timeout=CHECKPOINT_POLL_SECONDS)
            self._drain(running, on_checkpoint)
            for ref in done:
                task, actor = running.pop(ref)
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayActorError as e:  # the worker (or its node) is gone: go on without it
                    if "creation task" in str(e):
                        raise WorkersFailed(f"a Ray worker could not start: {e}") from None
                    self.actors.remove(actor)
                    yield from _retry_or_fail(task, queue, e)
                    continue
                except ray.exceptions.RayError as e:
                    idle.append(actor)
                    yield from _retry_or_fail(task, queue, e)
                    continue
                idle.append(actor)
                yield task, result

    def close(self) -> None:
        ray = import_ray()
        for actor in self.actors:
            try:
                ray.kill(actor)
            except Exception:  # already gone
                pass
        self.actors = []
        if self.checkpoints is not None:
            try:
                self.checkpoints.shutdown(force=True)
            except Exception:  # already gone
                pass
            self.checkpoints = None
        if ray.is_initialized():
            ray.shutdown()


class RayMissing(Exception):
    pass


class WorkersFailed(Exception):
    """The workers cannot go on (none left, or none can start): the batch stops; finished files are kept."""


def import_ray():
    try:
        import ray
    except ImportError:
        raise RayMissing("--ray needs Ray: pip install 'editspec[ray]' (on every machine of the cluster)") from None
    return ray
