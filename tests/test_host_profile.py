"""Attributing a loop's per-token host time to transformers' functions, from cProfile statistics."""
import pytest

from collect.host_profile import OTHER, attribute, profile_call

GEN = "/site-packages/transformers/generation/utils.py"
GPT2 = "/site-packages/transformers/models/gpt2/modeling_gpt2.py"
MASK = "/site-packages/transformers/masking_utils.py"


def stats(tokens, forward_ms=5.0, mask_ms=0.2, prepare_ms=0.1, glue_ms=0.3):
    """What cProfile would see for a generate call of `tokens` tokens (ms per token, and the set-up of 2 ms)."""
    fwd = forward_ms * tokens
    return {(GEN, 2917, "_sample"): (1, (2.0 + tokens * (forward_ms + prepare_ms + glue_ms)) / 1e3),
            (GPT2, 647, "forward"): (tokens, fwd / 1e3),
            (GPT2, 262, "forward"): (12 * tokens, 0.8 * fwd / 1e3),   # a block's forward: nested, smaller
            (MASK, 865, "create_causal_mask"): (tokens, mask_ms * tokens / 1e3),
            (GEN, 648, "prepare_inputs_for_generation"): (tokens, prepare_ms * tokens / 1e3)}


def test_the_difference_of_two_calls_is_the_cost_of_the_extra_tokens():
    a = attribute(stats(17), stats(1), 16, "hf-generate")
    assert a.ms_per_token == pytest.approx(5.4)
    assert a.components["model forward"] == pytest.approx(5.0)  # the outermost forward, not a block's
    assert a.components["causal mask (inside the forward)"] == pytest.approx(0.2)
    assert a.components["prepare inputs"] == pytest.approx(0.1)
    assert a.components[OTHER] == pytest.approx(0.3)  # the mask is inside the forward: not subtracted twice
    assert a.calls_per_token["model forward"] == 1 and "logits processors" not in a.components


def test_a_loop_the_profile_does_not_contain_is_a_clear_error():
    with pytest.raises(ValueError, match="_sample"):
        attribute({}, {}, 16, "hf-generate")
    with pytest.raises(ValueError, match="at least 1"):
        attribute(stats(17), stats(1), 0, "hf-generate")


def test_profile_call_sees_python_functions():
    def inner():
        return sum(range(1000))

    st = profile_call(lambda: [inner() for _ in range(3)])
    hits = [v for (f, _, name), v in st.items() if name == "inner"]
    assert hits and hits[0][0] == 3


def test_a_component_called_per_token_is_kept_even_when_noise_makes_its_difference_negative():
    short = stats(1)
    long = dict(stats(17))
    long[(MASK, 865, "create_causal_mask")] = (17, 0.0)  # took less in the longer call: noise
    a = attribute(long, short, 16, "hf-generate")
    assert a.components["causal mask (inside the forward)"] == 0.0
    assert a.calls_per_token["causal mask (inside the forward)"] == 1.0


def test_a_loop_whose_longer_call_took_no_longer_is_noise_not_a_zero():
    # A 0 ms loop is a value the decode file refuses (its schema's range starts above 0): the baselines profile the
    # two calls again (collect.decode.baselines.PROFILE_TRIES pairs in all), then record the row as an error that says why.
    from collect.host_profile import NoisyProfile

    long = dict(stats(17))
    long[(GEN, 2917, "_sample")] = (1, stats(1)[(GEN, 2917, "_sample")][1])  # no longer than the short call
    with pytest.raises(NoisyProfile, match="took no longer"):
        attribute(long, stats(1), 16, "hf-generate")


def test_parts_that_add_up_to_more_than_the_loop_are_noise_not_an_attribution():
    """Run h100-20261205a's eager loop: its forward took 8.94 ms a token of a loop of 8.34. The remainder would have
    been clamped to 0, and the page would have split a difference that was noise; the pair is profiled again."""
    from collect.host_profile import PARTS_OVER_WHOLE, NoisyProfile

    long = dict(stats(17))
    forward = (GPT2, 647, "forward")
    over = stats(1)[forward][1] + 16 * 5.4e-3 * (PARTS_OVER_WHOLE + 0.05)  # the forward past the whole loop
    long[forward] = (17, over)
    with pytest.raises(NoisyProfile, match="more than the"):
        attribute(long, stats(1), 16, "hf-generate")
    long[forward] = (17, stats(1)[forward][1] + 16 * 5.4e-3)  # all of the loop, within the margin: kept
    assert attribute(long, stats(1), 16, "hf-generate").components[OTHER] == 0.0
