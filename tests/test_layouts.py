"""Layouts: hand-written expected FA indices for the paper's teachers and this book's models."""

import pytest

from hybridlib.layouts import LAYOUT_NAMES, PAPER_LAYOUTS, Layout, make_layout

# (n_layers, n_full) -> name -> expected FA layers, written out by hand from the definitions.
EXPECTED = {
    (36, 9): {  # Qwen3-4B, 25% budget
        "standard_periodic": (3, 7, 11, 15, 19, 23, 27, 31, 35),
        "reverse_periodic": (0, 4, 8, 12, 16, 20, 24, 28, 32),
        "sandwich": (0, 1, 2, 3, 4, 32, 33, 34, 35),
        "interleaved_sandwich": (0, 1, 2, 8, 18, 28, 33, 34, 35),
        "endpoint_spread": (0, 4, 9, 13, 18, 22, 26, 31, 35),
        "periodic_first_at_0": (0, 7, 11, 15, 19, 23, 27, 31, 35),
    },
    (40, 10): {  # Granite-4.1-3B, 25% budget
        "standard_periodic": (3, 7, 11, 15, 19, 23, 27, 31, 35, 39),
        "reverse_periodic": (0, 4, 8, 12, 16, 20, 24, 28, 32, 36),
        "sandwich": (0, 1, 2, 3, 4, 35, 36, 37, 38, 39),
        "interleaved_sandwich": (0, 1, 2, 3, 9, 20, 31, 37, 38, 39),
        "endpoint_spread": (0, 4, 9, 13, 17, 22, 26, 30, 35, 39),
        "periodic_first_at_0": (0, 7, 11, 15, 19, 23, 27, 31, 35, 39),
    },
    (30, 8): {  # SmolLM2-135M: 8 does not divide 30, blocks of 3,4,4,4,3,4,4,4
        "standard_periodic": (2, 6, 10, 14, 17, 21, 25, 29),
        "reverse_periodic": (0, 3, 7, 11, 15, 18, 22, 26),
        "sandwich": (0, 1, 2, 3, 26, 27, 28, 29),
        "interleaved_sandwich": (0, 1, 2, 7, 15, 23, 28, 29),
        "endpoint_spread": (0, 4, 8, 12, 17, 21, 25, 29),
        "periodic_first_at_0": (0, 6, 10, 14, 17, 21, 25, 29),
    },
    (18, 6): {  # Gemma 3 270M, one in three
        "standard_periodic": (2, 5, 8, 11, 14, 17),
        "reverse_periodic": (0, 3, 6, 9, 12, 15),
        "sandwich": (0, 1, 2, 15, 16, 17),
        "interleaved_sandwich": (0, 1, 5, 12, 16, 17),
        "endpoint_spread": (0, 3, 7, 10, 14, 17),
        "periodic_first_at_0": (0, 5, 8, 11, 14, 17),
    },
    (18, 4): {  # Gemma 3 270M, ~25% budget; odd sandwich split puts the extra FA layer at the start
        "standard_periodic": (3, 8, 12, 17),
        "reverse_periodic": (0, 4, 9, 13),
        "sandwich": (0, 1, 16, 17),
        "interleaved_sandwich": (0, 1, 9, 17),
        "endpoint_spread": (0, 6, 11, 17),
        "periodic_first_at_0": (0, 8, 12, 17),
    },
}


@pytest.mark.parametrize("shape", list(EXPECTED))
@pytest.mark.parametrize("name", LAYOUT_NAMES)
def test_expected_layouts(shape, name):
    assert make_layout(name, *shape) == EXPECTED[shape][name]


@pytest.mark.parametrize("shape", [(36, 9), (40, 10)])
def test_paper_alternatives_share_only_layer_0(shape):
    alternatives = [set(make_layout(n, *shape)) for n in PAPER_LAYOUTS[1:]]
    assert set.intersection(*alternatives) == {0}
    assert 0 not in make_layout("standard_periodic", *shape)


def test_first_at_0_is_a_single_change():
    std, moved = set(make_layout("standard_periodic", 36, 9)), set(make_layout("periodic_first_at_0", 36, 9))
    assert std - moved == {3} and moved - std == {0}


def test_layout_object():
    lay = Layout.from_name("reverse_periodic", 8, 2)
    assert lay.fa_layers == (0, 4) and lay.recurrent_layers == (1, 2, 3, 5, 6, 7)
    assert lay.pattern() == "A...A..." and lay.is_full_attention(4) and not lay.is_full_attention(5)
    assert Layout.from_list(5, [4, 0], n_full=2).fa_layers == (0, 4)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: make_layout("periodic", 36, 9), "allowed: standard_periodic, reverse_periodic"),
        (lambda: make_layout("sandwich", 36, 0), "n_full=0"),
        (lambda: make_layout("sandwich", 4, 5), "n_full=5"),
        (lambda: make_layout("endpoint_spread", 10, 1), "n_full >= 2"),
        (lambda: Layout.from_list(4, [0, 4]), "out of range"),
        (lambda: Layout.from_list(4, [1, 1]), "more than once"),
        (lambda: Layout.from_list(4, [0, 1], n_full=3), "budget n_full=3"),
        (lambda: Layout.from_list(0, []), "n_layers"),
    ],
)
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
