"""The adaptive draft length: no drafting where copies fail, long drafts where they hold."""

from editspec.policy import LEAD_AT_RISK, RISK_STEPS, AdaptiveDraftLength, run_bucket

# Shaped like this machine's measurements: a pass over 2 tokens costs two plain steps, over 33 about 16.
COSTS = [0.0] + [0.0066 * (1 if m == 1 else min(m, 2 + 0.45 * (m - 2))) for m in range(1, 34)]


def test_no_prior_evidence_means_cautious_drafting():
    policy = AdaptiveDraftLength(COSTS)
    assert policy.choose("lookup", run=1, available=32) == 0  # a one-token match is a guess


def test_learns_to_stop_drafting_when_copies_fail():
    policy = AdaptiveDraftLength(COSTS)
    for _ in range(50):
        policy.update("lookup", run=40, n_verified=8, n_accepted=0)
    assert policy.choose("lookup", run=40, available=32) == 0


def test_learns_long_drafts_when_copies_hold():
    policy = AdaptiveDraftLength(COSTS)
    for _ in range(30):
        policy.update("lookup", run=40, n_verified=32, n_accepted=32)
        policy.passed(33, 33)
    assert policy.choose("lookup", run=40, available=32) >= 16
    assert policy.choose("lookup", run=40, available=5) <= 5


def test_free_observations_teach_buckets_never_drafted():
    policy = AdaptiveDraftLength(COSTS)
    before = policy.acceptance(run=6)
    for _ in range(40):
        policy.update("lookup", run=6, n_verified=1, n_accepted=1)
    assert policy.acceptance(run=6) > max(before, 0.9)
    assert run_bucket(6) == run_bucket(7) != run_bucket(8)


def test_draft_model_pays_for_its_own_steps():
    cheap = AdaptiveDraftLength(COSTS, draft_step_seconds=0.0005)
    dear = AdaptiveDraftLength(COSTS, draft_step_seconds=0.0066)
    for p in (cheap, dear):
        for _ in range(30):
            p.update("model", 0, 8, 8)
    assert cheap.choose("model", 0, 32) > 0
    assert dear.choose("model", 0, 32) < cheap.choose("model", 0, 32)


def test_tokens_that_start_a_line_are_trusted_apart():
    """An edit begins at a line: the policy learns the acceptance of tokens that start one apart from the rest, and
    a draft crossing into a line where copies fail is verified only up to it."""
    policy = AdaptiveDraftLength(COSTS)
    starts = (False, False, False, True, False, False, False, False)
    for _ in range(60):  # copies hold inside lines and break where a new line starts
        policy.update("lookup", run=40, n_verified=8, n_accepted=3, line_starts=starts)
        policy.passed(9, 4)
        policy.update("lookup", run=40, n_verified=8, n_accepted=8)
        policy.passed(9, 9)
    assert policy.acceptance(40) > 0.95 > 0.3 > policy.acceptance(40, line_start=True)
    assert policy.choose("lookup", run=40, available=8, line_starts=starts) == 3
    assert policy.choose("lookup", run=40, available=8) == 8  # no line start in the draft: all of it


def _taught(run: int, acceptance: float, tokens: int = 300) -> AdaptiveDraftLength:
    """A policy that earlier requests taught: copies after a match of `run` are accepted at `acceptance`."""
    policy = AdaptiveDraftLength(COSTS)
    for i in range(tokens):
        policy.update("lookup", run=run, n_verified=1, n_accepted=int((i * acceptance) % 1 + acceptance >= 1))
    policy.start()
    return policy


def test_a_request_whose_copies_fail_stops_drafting_after_a_few():
    """The estimates (from code) say a copy after an 8-token match holds 90% of the time; a request where such
    copies keep failing (prose with a repeated phrase) stops drafting after a few free checks, though the
    estimates have barely moved, and the next request starts from the estimates again."""
    policy = _taught(run=8, acceptance=0.9)
    assert policy.choose("lookup", run=8, available=32) > 0
    for _ in range(6):  # the drafts' first tokens, checked for free against what the target wrote
        policy.update("lookup", run=8, n_verified=1, n_accepted=0)
    assert policy.request_factor() < 0.5
    assert policy.choose("lookup", run=8, available=32) == 0
    policy.start()  # the estimates alone, with those six failures learned, still draft
    assert policy.request_factor() == 1.0
    assert policy.choose("lookup", run=8, available=32) > 0


def test_a_request_that_behaves_as_estimated_drafts_as_before():
    policy = _taught(run=8, acceptance=0.9)
    untouched = _taught(run=8, acceptance=0.9)
    for i in range(40):  # accepted 9 times in 10, as the estimates say
        policy.update("lookup", run=8, n_verified=1, n_accepted=int(i % 10 != 0))
        untouched.update("lookup", run=8, n_verified=1, n_accepted=int(i % 10 != 0))
        untouched.start()
    assert policy.request_factor() > 0.9
    assert policy.choose("lookup", run=8, available=32) == untouched.choose("lookup", run=8, available=32) > 0


def test_a_request_that_beats_the_estimates_drafts_no_longer_for_it():
    """Long copies accepted more often than estimated say nothing about a request's short matches: the record
    only ever makes the policy more cautious."""
    policy = _taught(run=40, acceptance=0.6)
    before = policy.choose("lookup", run=40, available=32)
    for _ in range(20):
        policy.update("lookup", run=40, n_verified=1, n_accepted=1)
    taught = _taught(run=40, acceptance=0.6)  # the estimates as they were: only the record differs
    policy.tables = taught.tables
    assert policy.request_factor() == 1.0
    assert policy.choose("lookup", run=40, available=32) == before


def test_a_request_never_risks_more_than_its_lead_over_plain_decoding():
    """Long copies have held in earlier requests, so a long draft is worth it on average; but a new request has
    gained nothing yet, and a pass may lose at most LEAD_AT_RISK of its lead over plain decoding plus RISK_STEPS
    steps."""
    policy = AdaptiveDraftLength(COSTS)
    for _ in range(30):
        policy.update("lookup", run=40, n_verified=32, n_accepted=32)
    policy.start()
    step, risk = COSTS[1], RISK_STEPS * COSTS[1]
    k = policy.choose("lookup", run=40, available=32)
    assert 1 <= k < 8 and COSTS[k + 1] - step <= risk < COSTS[k + 2] - step
    policy.passed(k + 1, k + 1)  # all accepted: a lead, so a longer pass may be risked
    longer = policy.choose("lookup", run=40, available=32)
    assert longer > k and COSTS[longer + 1] - step <= LEAD_AT_RISK * policy.lead + risk < COSTS[longer + 2] - step
    lead = policy.lead
    policy.lead = COSTS[33] - step - risk  # the whole of this lead would just cover a pass over 33 tokens
    assert policy.choose("lookup", run=40, available=32) < 32
    policy.lead = lead
    policy.passed(33, 33)
    policy.passed(33, 33)
    assert policy.choose("lookup", run=40, available=32) == 32
    policy.passed(33, 1)  # long copies broke at once: behind plain again, short drafts only
    policy.passed(33, 1)
    policy.passed(33, 1)
    assert policy.lead < 0 and policy.choose("lookup", run=40, available=32) == k
    policy.start()
    assert policy.lead == 0 and policy.choose("lookup", run=40, available=32) == k


def test_a_pass_past_lengths_that_risk_too_much_is_still_chosen_where_the_costs_dip():
    """Costs are not monotone (kernels work in tiles of rows): a pass over 8 tokens can cost less than one over 6,
    so a length that risks too much does not rule out the longer ones."""
    step = 0.06
    dipped = [0.0] + [step * (1 + 0.6 * (m - 1)) for m in range(1, 34)]
    dipped[9] = step * (1 + RISK_STEPS) * 0.97  # 9 tokens within the cap, 4-8 beyond it
    policy = AdaptiveDraftLength(dipped)
    for _ in range(30):
        policy.update("lookup", run=40, n_verified=32, n_accepted=32)
    policy.start()
    assert all(dipped[m] - step > RISK_STEPS * step for m in range(5, 9))
    assert policy.choose("lookup", run=40, available=32) == 8


def test_copies_whose_place_is_a_guess_are_trusted_apart():
    """A weak copy (`Draft.weak`) is trusted less after a short match, and what weak copies teach leaves the
    estimates of copies of one place in the code as they were."""
    policy = AdaptiveDraftLength(COSTS)
    assert policy.acceptance(3, weak=True) < policy.acceptance(3) - 0.1
    strong = policy.acceptance(8)
    for _ in range(60):
        policy.update("lookup", run=8, n_verified=4, n_accepted=0, weak=True)
    assert policy.acceptance(8, weak=True) < 0.1 and policy.acceptance(8) == strong
    for _ in range(60):
        policy.update("lookup", run=8, n_verified=8, n_accepted=8)
        policy.passed(9, 9)
    policy.start()
    policy.passed(9, 9)
    assert policy.choose("lookup", run=8, available=8) > 0
    assert policy.choose("lookup", run=8, available=8, weak=True) == 0
