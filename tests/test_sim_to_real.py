"""The sim-to-real metrics as the SimplerEnv paper defines them (issue 14, point 4: "Its tests check
both metrics on hand-computed cases"), and the shipped reference rates."""

import pytest

from evaluator.protocol.sim_to_real import NotComparable, compare, mmrv, pearson, reference


def test_pearson_on_a_hand_computed_case():
    # S = (0.1, 0.5, 0.9): deviations (-0.4, 0, 0.4); R = (0.2, 0.3, 0.7): deviations (-0.2, -0.1, 0.3)
    # sum of products 0.08 + 0 + 0.12 = 0.2; sqrt(0.32 * 0.14) = 0.211660; r = 0.944911
    assert pearson([0.1, 0.5, 0.9], [0.2, 0.3, 0.7]) == pytest.approx(0.2 / (0.32 * 0.14) ** 0.5)
    assert pearson([0.1, 0.5, 0.9], [0.2, 0.3, 0.7]) == pytest.approx(0.944911, abs=1e-6)
    assert pearson([0.0, 1.0], [1.0, 0.0]) == pytest.approx(-1.0)


def test_pearson_is_undefined_when_one_side_has_no_spread():
    assert pearson([0.5, 0.5, 0.5], [0.1, 0.2, 0.3]) is None


def test_mmrv_is_zero_when_simulation_ranks_as_the_real_robot():
    assert mmrv([0.1, 0.4, 0.8], [0.2, 0.5, 0.9]) == 0.0


def test_mmrv_on_a_hand_computed_case():
    # S = (0.9, 0.5, 0.1), R = (0.3, 0.6, 0.2): pairs ordered differently: (0, 1) only, |0.3 - 0.6| = 0.3.
    # Policy 0: max 0.3; policy 1: max 0.3; policy 2: none (0). MMRV = 0.6 / 3 = 0.2.
    assert mmrv([0.9, 0.5, 0.1], [0.3, 0.6, 0.2]) == pytest.approx(0.2)
    # Every pair reversed: S = (0.1, 0.2, 0.3), R = (0.9, 0.5, 0.0).
    # Policy 0: max(|0.9-0.5|, |0.9-0.0|) = 0.9; 1: max(0.4, 0.5) = 0.5; 2: max(0.9, 0.5) = 0.9 -> 2.3 / 3.
    assert mmrv([0.1, 0.2, 0.3], [0.9, 0.5, 0.0]) == pytest.approx(2.3 / 3)


def test_a_tie_in_simulation_counts_as_a_violation_where_the_real_robot_orders_the_pair():
    # (S_i < S_j) != (R_i < R_j): for i=0, j=1 S ties (False) but R_0 < R_1 (True): |0.2 - 0.6| = 0.4;
    # for i=1, j=0: False != False, no violation. MMRV = (0.4 + 0) / 2 = 0.2.
    assert mmrv([0.5, 0.5], [0.2, 0.6]) == pytest.approx(0.2)


def test_compare_uses_the_policies_with_both_rates_and_refuses_fewer_than_two():
    result = compare("t", {"a": 0.1, "b": 0.5, "c": 0.9, "only-sim": 0.3}, {"a": 0.2, "b": 0.3, "c": 0.7, "z": 0.1})
    assert result.policies == ("a", "b", "c") and result.mmrv == 0.0
    assert result.pearson == pytest.approx(0.944911, abs=1e-6)
    with pytest.raises(NotComparable, match="1 policies"):
        compare("t", {"a": 0.1}, {"a": 0.2, "b": 0.3})
    with pytest.raises(NotComparable, match="not a number in"):
        compare("t", {"a": 0.1, "b": 1.5}, {"a": 0.2, "b": 0.3})


def test_the_reference_rates_cite_their_source_and_cover_the_reference_policies():
    data = reference()
    assert "arXiv:2405.05941" in data["source"]["paper"] and data["source"]["commit"]
    assert data["real"]["google_robot_pick_coke_can"]["rt-1-converged"] == 0.853
    assert set(data["real"]["widowx_spoon_on_towel"]) == {"rt-1-x", "octo-base", "octo-small"}
    # The paper's own simulated rates against the real ones: a coke-can ranking close to the real robot's.
    coke = compare(
        "google_robot_pick_coke_can",
        data["simulated_visual_matching"]["google_robot_pick_coke_can"],
        data["real"]["google_robot_pick_coke_can"],
    )
    assert len(coke.policies) == 6 and coke.pearson > 0.8 and coke.mmrv < 0.1
