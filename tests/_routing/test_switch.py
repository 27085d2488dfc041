"""eagle_sparse._routing.switch: cg's switching rules, as pure functions of counts."""

from __future__ import annotations

import math

import pytest

from eagle_sparse._routing import switch


def test_no_alternative_is_chosen_below_the_saving():
    # a direct solve that costs nothing still waits for CG's remaining time to exceed
    # its margin and the minimum saving
    assert switch.choose(switch.MIN_SAVING_S / 2, 1e-6, 1.0, 16, 10**6, direct=0.0) is None


def test_the_cheaper_alternative_wins_with_its_margin():
    n = switch.SWITCH_MIN_N
    k = switch.MULTILEVEL_FIRST_CHECK
    per = 1e-4
    ml = switch.multilevel_cost(per)
    # remaining time far above both: the cheaper one is named
    assert switch.choose(100 * ml, per, 10.0, k, n, direct=ml / 2) == "direct"
    assert switch.choose(100 * ml, per, 10.0, k, n, direct=ml * 2) == "multilevel"
    # the direct solve is weighed with its own (larger) margin
    d = 1.0
    just_below = switch.DIRECT_MARGIN * d * 0.99
    assert switch.choose(just_below, per, 10.0, 16, 100, direct=d) is None
    assert switch.choose(switch.DIRECT_MARGIN * d * 1.01 + switch.MIN_SAVING_S, per, 10.0,
                         16, 100, direct=d) == "direct"


def test_the_multilevel_preconditioner_waits_for_its_iteration_and_size():
    per = 1e-4
    big = 1e3
    assert switch.choose(big, per, 10.0, switch.MULTILEVEL_FIRST_CHECK - 1,
                         switch.SWITCH_MIN_N, direct=None) is None
    assert switch.choose(big, per, 10.0, switch.MULTILEVEL_FIRST_CHECK,
                         switch.SWITCH_MIN_N - 1, direct=None) is None
    assert switch.choose(big, per, 10.0, switch.MULTILEVEL_FIRST_CHECK,
                         switch.SWITCH_MIN_N, direct=None) == "multilevel"


def test_rent_before_buying():
    """No switch before CG has run for RENT_FRACTION of the alternative's cost."""
    d = 1.0
    remaining = 100.0
    assert switch.choose(remaining, 1e-4, switch.RENT_FRACTION * d * 0.9, 16, 100,
                         direct=d) is None
    assert switch.choose(remaining, 1e-4, switch.RENT_FRACTION * d, 16, 100,
                         direct=d) == "direct"


@pytest.mark.parametrize("envelope", [True, False])
def test_the_direct_solve_is_weighed_only_where_it_may_pay(envelope):
    limit = switch.PLAN_MAX_N if envelope else switch.SPLU_MAX_N
    assert not switch.direct_worth_weighing(switch.MIN_SAVING_S, 100, 500, envelope=envelope)
    assert switch.direct_worth_weighing(1e3, 100, 500, envelope=envelope)
    assert not switch.direct_worth_weighing(1e3, limit + 1, 5 * limit, envelope=envelope)


def test_factors_that_do_not_fit_cost_infinity():
    from eagle_sparse._system._validation import MAX_FACTOR_BYTES

    assert switch.envelope_cost(10, 1e3, MAX_FACTOR_BYTES + 1) == math.inf
    assert switch.splu_cost(MAX_FACTOR_BYTES // 24 + 1, 1e3) == math.inf
    assert 0 < switch.envelope_cost(10, 1e3, 100) < 1
    assert 0 < switch.splu_cost(10, 1e3) < 1


def test_small_systems_are_not_watched():
    assert not switch.watched(switch.WATCH_MIN_N - 1)
    assert switch.watched(switch.WATCH_MIN_N)


def test_pyamg_is_weighed_from_its_own_iteration_with_its_own_margin():
    n, nnz = 10**6, 5 * 10**6
    cost = switch.amg_cost(n, nnz, 1)
    assert switch.amg_cost(n, nnz, 2) < cost  # (BSR set-up: fewer, denser entries)
    per = 1e-3
    k = switch.AMG_FIRST_CHECK
    above = switch.AMG_MARGIN * cost * 1.01 + switch.MIN_SAVING_S
    assert switch.choose(above, per, 10.0, k, n, None, cost, amg=True) == "multilevel"
    assert switch.choose(above, per, 10.0, k - 1, n, None, cost, amg=True) is None
    assert switch.choose(switch.AMG_MARGIN * cost * 0.99, per, 10.0, k, n, None, cost,
                         amg=True) is None
    # rent before buying holds for it too
    assert switch.choose(above, per, switch.RENT_FRACTION * cost * 0.9, k, n, None, cost,
                         amg=True) is None


def test_amg_cost_grows_with_the_entries():
    assert switch.amg_cost(10**5, 10**6, 1) < switch.amg_cost(10**5, 2 * 10**6, 1)
    assert switch.amg_cost(10**5, 10**6, 1) > 0


def test_a_switch_is_undone_only_where_clearly_slower():
    assert not switch.undo(1.0, math.nan)
    assert not switch.undo(1.0, switch.UNDO_FACTOR * 0.99)
    assert switch.undo(1.0, switch.UNDO_FACTOR * 1.01)


def test_a_factor_beyond_the_bound_costs_infinity():
    assert math.isinf(switch.envelope_cost(10, 10.0, 1000, bound=999))
    assert math.isfinite(switch.envelope_cost(10, 10.0, 1000, bound=1000))
    assert math.isinf(switch.splu_cost(100, 10.0, bound=24 * 100 - 1))
    # an alternative that does not fit is never chosen
    assert switch.choose(1e9, 1e-3, 1e3, 16, 100, direct=math.inf) is None
    assert switch.choose(1e9, 1e-3, 1e3, switch.MULTILEVEL_FIRST_CHECK, 10**6, None,
                         math.inf) is None


def test_nodes_of_three_unknowns_are_priced_at_more_iterations():
    assert switch.amg_iterations(1) < switch.amg_iterations(2) < switch.amg_iterations(3)
    assert switch.amg_iterations(6) == switch.amg_iterations(3)
    n, nnz = 10**5, 3 * 10**6
    assert switch.amg_cost(n, nnz, 3) > switch.amg_cost(n, nnz, 2)


def test_the_multilevel_waits_for_a_steady_residual():
    n, k = 10**6, switch.MULTILEVEL_FIRST_CHECK
    assert switch.choose(1e3, 1e-4, 10.0, k, n, None) == "multilevel"
    assert switch.choose(1e3, 1e-4, 10.0, k, n, None, steady=False) is None
    # the factorisation, whose cost is exact, is weighed either way
    assert switch.choose(1e3, 1e-4, 10.0, k, n, 1.0, steady=False) == "direct"


def test_the_cheapest_amg_cost_bounds_every_node_size():
    n, nnz = 10**5, 10**6
    low = switch.amg_cost(n, nnz, 1, cheapest=True)
    assert all(low <= switch.amg_cost(n, nnz, b) for b in (1, 2, 3, 6))
