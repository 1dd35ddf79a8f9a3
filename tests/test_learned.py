"""What rewrites teach about a model is kept: acceptance estimates and the verify costs rounds really took."""

import json

import pytest

from editspec import calibration
from editspec.calibration import OnlineCosts
from editspec.decoding import DecodeOptions, Decoder
from editspec.policy import AdaptiveDraftLength

TRUE = [0.0] + [0.03 * (1 + 0.3 * (m - 1)) for m in range(1, 34)]  # a pass over m tokens, in seconds


def test_a_calibration_taken_on_a_busy_machine_corrects_itself_from_the_rounds():
    # Long passes measured ~1.8x too dear: a policy believing that never drafts long, so the correction has to
    # come from the short rounds it does run.
    inflated = [c * (1.0 + 0.8 * min(1.0, m / 16)) for m, c in enumerate(TRUE)]
    costs = OnlineCosts(inflated)
    assert costs.costs()[1:] == pytest.approx(inflated[1:])  # no evidence: the calibration
    for _ in range(100):
        for m in (1, 2, 3, 5, 8):
            costs.observe(m, TRUE[m])
    learned = costs.costs()
    for m in (8, 16, 24, 33):
        assert abs(learned[m] - TRUE[m]) < 0.5 * abs(inflated[m] - TRUE[m]), m  # at least halfway to the truth


class TimedBackend:
    """Passes that take `seconds(m)` on a clock of its own; the evaluations numbered in `slowed` take
    `factor` times as long (a busy spell of the machine, or a lucky fast one)."""

    n_vocab = 100

    def __init__(self, seconds, slowed=(), factor=3.0):
        self.seconds, self.slowed, self.factor = seconds, set(slowed), factor
        self.now, self.count, self.lengths = 0.0, 0, []

    def prefill(self, tokens):
        pass

    def evaluate(self, tokens):
        self.count += 1
        self.lengths.append(len(tokens))
        self.now += self.seconds(len(tokens)) * (self.factor if self.count in self.slowed else 1.0)

    def truncate(self, n_tokens):
        pass


def dipped(m: int) -> float:
    """Shaped like the coder model here: 0.6 steps a token, and dips at 12, 16 and 32 tokens."""
    return 0.06 * (1 + 0.6 * (m - 1)) * {12: 0.9, 16: 0.8, 32: 0.9}.get(m, 1.0)


def test_the_calibration_measures_every_length_and_keeps_the_dips():
    backend = TimedBackend(dipped)
    costs = calibration.measure_verify_seconds(backend, clock=lambda: backend.now)
    assert costs[1:] == pytest.approx([dipped(m) for m in range(1, 34)])
    assert costs[16] < costs[15] and costs[32] < costs[31] and costs[12] < costs[11]
    sweeps = [backend.lengths[i : i + 33] for i in range(0, len(backend.lengths), 33)]
    assert len(sweeps) == calibration.SWEEPS and all(sorted(s) == list(range(1, 34)) for s in sweeps)
    assert len({tuple(s) for s in sweeps}) == len(sweeps)  # each sweep in its own order


def test_the_calibration_reports_its_progress_and_the_bar_shows_it():
    """Two minutes on the coder model at a first run: a bar with the time left, after the assembly's bar."""
    import io

    from rich.console import Console

    from editspec.display import PrepareBar

    backend = TimedBackend(dipped)
    seen: list[tuple[int, int]] = []
    calibration.measure_verify_seconds(backend, clock=lambda: backend.now, on_progress=lambda d, t: seen.append((d, t)))
    total = seen[0][1]
    assert seen[0] == (0, total) and seen[-1] == (total, total) and len(seen) == 1 + len(backend.lengths)
    assert all(a[0] < b[0] for a, b in zip(seen, seen[1:], strict=False))
    for terminal in (True, False):
        out = io.StringIO()
        console = Console(file=out, force_terminal=terminal, width=100)
        with PrepareBar(console) as assembly, PrepareBar(console, measuring=True) as measuring:
            for done in (0, 50, 100):
                assembly.update(done, 100)
            for done, of in seen:  # a second live display while the first is open would raise
                measuring.update(done, of)
        assert out.getvalue().count(calibration.MEASURING) == 1, out.getvalue()
        if terminal:
            assert "measuring this machine's verify costs (once)" in out.getvalue()


@pytest.mark.parametrize("factor", [3.0, 0.3])
def test_a_busy_or_lucky_spell_as_long_as_a_sweep_does_not_move_the_calibration(factor):
    backend = TimedBackend(dipped, slowed=range(50, 83), factor=factor)
    costs = calibration.measure_verify_seconds(backend, clock=lambda: backend.now)
    assert costs[1:] == pytest.approx([dipped(m) for m in range(1, 34)])


def test_learning_online_keeps_the_calibrations_dips():
    costs = OnlineCosts([0.0] + [dipped(m) for m in range(1, 34)])
    for _ in range(100):  # the machine runs 30% slower than when calibrated
        for m in (2, 4, 8, 25):
            costs.observe(m, dipped(m) * 1.3)
    learned = costs.costs()
    assert learned[8] == pytest.approx(dipped(8) * 1.3, rel=0.05)
    assert learned[16] < learned[15] and learned[32] < learned[31] and learned[12] < learned[11]


def test_a_dip_the_calibration_saw_by_chance_is_corrected_by_the_rounds_of_that_length():
    wrong = [0.0] + [dipped(m) for m in range(1, 34)]
    wrong[19] *= 0.8  # five noisy sweeps made 19 tokens look cheap, so the policy now runs passes of 19
    costs = OnlineCosts(wrong)
    for _ in range(60):
        for m in range(2, 26):
            costs.observe(m, dipped(m))
    learned = costs.costs()
    assert learned[19] == pytest.approx(dipped(19), rel=0.05)
    assert learned[16] < learned[15] and learned[16] == pytest.approx(dipped(16), rel=0.05)
    for m in (17, 18, 20, 21):  # the lengths beside it keep theirs
        assert learned[m] == pytest.approx(dipped(m), rel=0.05), m


def test_one_round_that_waited_on_another_process_moves_little():
    costs = OnlineCosts(TRUE)
    for _ in range(50):
        costs.observe(4, TRUE[4])
    costs.observe(4, TRUE[4] * 100)  # the machine was busy for this one
    assert costs.costs()[4] == pytest.approx(TRUE[4], rel=0.05)


def test_evidence_is_dropped_with_a_new_calibration():
    costs = OnlineCosts(TRUE)
    for _ in range(50):
        costs.observe(2, TRUE[2] * 2)
    state = json.loads(json.dumps(costs.state()))
    assert OnlineCosts(TRUE, state).costs() == pytest.approx(costs.costs())
    other = [c * 1.5 for c in TRUE]
    assert OnlineCosts(other, state).costs()[1:] == pytest.approx(other[1:])


def test_policy_state_round_trips_and_bad_state_is_ignored():
    policy = AdaptiveDraftLength(TRUE)
    for _ in range(30):
        policy.update("lookup", 10, 8, 8)
        policy.update("lookup", 1, 4, 0)
    state = json.loads(json.dumps(policy.state()))
    fresh = AdaptiveDraftLength(TRUE)
    fresh.load(state)
    assert fresh.state() == policy.state()
    untaught = AdaptiveDraftLength(TRUE)
    for p in (policy, fresh, untaught):  # well ahead of plain in this request: the estimates alone decide
        p.passed(33, 330)
    assert fresh.choose("lookup", 10, 32) == policy.choose("lookup", 10, 32)
    assert fresh.choose("lookup", 10, 32) != untaught.choose("lookup", 10, 32)
    for bad in (None, {}, {"successes": [1], "trials": [1], "model": [1, 2]}, {**state, "trials": [0] * 13}):
        prior = AdaptiveDraftLength(TRUE)
        prior.load(bad)
        assert prior.state() == AdaptiveDraftLength(TRUE).state()


def test_a_decoder_starts_from_what_earlier_requests_taught(backend):
    prompt = backend.tokenize("def add(a, b):\n    return a + b\n\nRepeat the code above exactly:\n")
    first = Decoder(backend, DecodeOptions(max_tokens=40))
    untaught = first.policy.state()
    first.decode(prompt)
    taught = first.policy.state()
    assert taught != untaught
    entry = json.loads(calibration.learned_file().read_text())[json.dumps(backend.identity(), sort_keys=True)]
    assert entry["acceptance"] == taught and sum(w for _, w in entry["costs"]["evidence"]) > 0
    second = Decoder(backend, DecodeOptions(max_tokens=40))
    assert second.policy.state() == taught
    assert second.verify_seconds == pytest.approx(first.verify_seconds, rel=1e-4)
    # A decoder given its costs and estimates (a batch worker) neither loads nor saves.
    fixed = Decoder(backend, DecodeOptions(max_tokens=40), verify_seconds=TRUE, policy_state=untaught)
    assert fixed.policy.state() == untaught and not fixed.learning
    before = calibration.learned_file().read_text()
    fixed.decode(prompt)
    assert calibration.learned_file().read_text() == before and fixed.verify_seconds == TRUE


def test_a_state_saved_before_line_starts_or_weak_copies_keeps_their_prior():
    policy = AdaptiveDraftLength(TRUE)
    for _ in range(20):
        policy.update("lookup", run=40, n_verified=8, n_accepted=2, line_starts=(False, False, True))
        policy.update("lookup", run=3, n_verified=4, n_accepted=0)
        policy.update("lookup", run=3, n_verified=4, n_accepted=4, weak=True)
    state = json.loads(json.dumps(policy.state()))
    old = {k: v for k, v in state.items() if not k.startswith("line_start")}
    fresh = AdaptiveDraftLength(TRUE)
    fresh.load(old)
    assert fresh.acceptance(3) == pytest.approx(policy.acceptance(3), abs=1e-4)
    assert fresh.acceptance(3) < AdaptiveDraftLength(TRUE).acceptance(3) - 0.3
    assert fresh.acceptance(40, line_start=True) == AdaptiveDraftLength(TRUE).acceptance(40, line_start=True)
    assert policy.acceptance(3, weak=True) > AdaptiveDraftLength(TRUE).acceptance(3, weak=True) + 0.3
    before_weak = AdaptiveDraftLength(TRUE)
    before_weak.load({k: v for k, v in state.items() if not k.startswith("weak_")})
    assert before_weak.acceptance(3) == pytest.approx(policy.acceptance(3), abs=1e-4)
    assert before_weak.acceptance(3, weak=True) == AdaptiveDraftLength(TRUE).acceptance(3, weak=True)
    fresh.load(state)
    assert fresh.state() == policy.state()
    prior = AdaptiveDraftLength(TRUE)
    prior.load({**state, "line_start_trials": [0] * 13})  # a damaged part spoils the whole state
    assert prior.state() == AdaptiveDraftLength(TRUE).state()


def test_what_one_cpu_measured_and_learned_stays_with_that_cpu(backend, monkeypatch):
    # A cache directory that moves to another kind of machine, or that a cluster's unlike nodes share: costs
    # measured on one CPU would mislead the draft-length policy on the other.
    from editspec import models

    measured = []
    monkeypatch.setattr(
        calibration, "measure_verify_seconds", lambda b, on_progress=None: measured.append(models.cpu_info()) or TRUE
    )
    monkeypatch.setattr(models, "cpu_info", lambda: ("First CPU", "fpu sse2 avx2"))
    assert calibration.verify_seconds(backend) == TRUE and len(measured) == 1
    calibration.LearnedState(backend).save({"acceptance": "first"})
    monkeypatch.setattr(models, "cpu_info", lambda: ("Second CPU", "fpu sse2 avx512f"))
    other = [c * 2 for c in TRUE]
    monkeypatch.setattr(calibration, "measure_verify_seconds", lambda b, on_progress=None: measured.append(2) or other)
    assert calibration.verify_seconds(backend) == other and len(measured) == 2  # measured afresh, not reused
    assert calibration.LearnedState(backend).load() == {}
    monkeypatch.setattr(models, "cpu_info", lambda: ("First CPU", "fpu sse2 avx2"))
    assert calibration.verify_seconds(backend) == TRUE and len(measured) == 2  # each CPU keeps its own
    assert calibration.LearnedState(backend).load() == {"acceptance": "first"}


def test_kv_states_on_disk_are_kept_apart_per_cpu(backend, monkeypatch, tmp_path):
    # A state computed by another CPU's kernels is not the one this CPU would compute: a restored prompt would not
    # answer as a cold one does.
    from editspec import models

    monkeypatch.setattr(models, "cpu_info", lambda: ("First CPU", "fpu sse2 avx2"))
    first = backend.states_dir(tmp_path)
    assert backend.states_dir(tmp_path) == first
    monkeypatch.setattr(models, "cpu_info", lambda: ("First CPU", "fpu sse2 avx2 avx512f"))
    assert backend.states_dir(tmp_path) != first
    assert backend.states_dir(tmp_path).parent == first.parent == tmp_path
