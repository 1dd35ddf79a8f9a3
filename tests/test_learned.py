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
    assert all(learned[m] <= learned[m + 1] for m in range(1, 33))


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


def test_a_state_saved_before_line_starts_keeps_their_prior():
    policy = AdaptiveDraftLength(TRUE)
    for _ in range(20):
        policy.update("lookup", run=40, n_verified=8, n_accepted=2, line_starts=(False, False, True))
        policy.update("lookup", run=3, n_verified=4, n_accepted=0)
    state = json.loads(json.dumps(policy.state()))
    old = {k: v for k, v in state.items() if not k.startswith("line_start")}
    fresh = AdaptiveDraftLength(TRUE)
    fresh.load(old)
    assert fresh.acceptance(3) == pytest.approx(policy.acceptance(3), abs=1e-4)
    assert fresh.acceptance(3) < AdaptiveDraftLength(TRUE).acceptance(3) - 0.3
    assert fresh.acceptance(40, line_start=True) == AdaptiveDraftLength(TRUE).acceptance(40, line_start=True)
    fresh.load(state)
    assert fresh.state() == policy.state()
    prior = AdaptiveDraftLength(TRUE)
    prior.load({**state, "line_start_trials": [0] * 13})  # a damaged part spoils the whole state
    assert prior.state() == AdaptiveDraftLength(TRUE).state()
