"""Every check before work (issue 48): a bad value, form or combination stops at once with one line naming the
parameter and what is allowed, before anything trains; Papermill's forms of a value are read as the runner's."""

import json
import os
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace

import pytest

from hybridlib import book
from hybridlib.findings import CHAPTERS, chapter, notebook_params, sync_parameter_cells
from hybridlib.findings.layout import replicates
from hybridlib.findings.layout import spec as layout_spec
from hybridlib.params import RECORDS_ONLY_ENV, ParameterError, assigned_names, may_train
from hybridlib.paths import REPO_ROOT
from hybridlib.train import distill

LAYOUT = chapter("layout_distillation")
GIB = 2**30


@pytest.fixture
def no_work(monkeypatch) -> Iterator[None]:
    """Training and chapter execution fail the test if reached; the checks must answer within 10 s."""

    def forbidden(*args, **kwargs):
        raise AssertionError("work started before the parameters were checked")

    for module, name in ((distill, "distill_layout"), (replicates, "train"), (book, "run_chapter")):
        monkeypatch.setattr(module, name, forbidden)
    start = time.monotonic()
    yield
    assert time.monotonic() - start < 10


@pytest.fixture
def cpu_only(monkeypatch) -> None:
    """A machine without CUDA, whatever this one has: 23 GiB of RAM."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    sysconf = os.sysconf
    pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": 23 * GIB // 4096}
    monkeypatch.setattr(os, "sysconf", lambda key: pages[key] if key in pages else sysconf(key))


def runner_error(capsys, argv: list[str]) -> str:
    """The runner's whole stderr for ``argv``, which must fail with exit status 2 and one line."""
    assert book.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    return err.removeprefix("error: ").strip()


def refusal(call: Callable[[], object]) -> str:
    with pytest.raises(ParameterError) as err:
        call()
    assert "\n" not in str(err.value)
    return str(err.value)


@pytest.mark.parametrize(
    "layouts, message",
    [
        (["sandwich"], "parameter 'layouts' must include the baseline 'standard_periodic'"),
        ([], "parameter 'layouts' must include the baseline 'standard_periodic'"),
        (
            ["standard_periodic"],
            "parameter 'layouts' needs at least one FA-first layout (reverse_periodic, sandwich, "
            "interleaved_sandwich, endpoint_spread)",
        ),
        (["standard_periodic", "periodic_first_at_0"], "needs at least one FA-first layout"),
        (["sandwich", "sandwich", "standard_periodic"], "parameter 'layouts' names 'sandwich' twice"),
    ],
)
def test_layout_sets_are_refused_before_training(no_work, capsys, tmp_path, layouts, message):
    assert message in refusal(lambda: LAYOUT.resolve("seminar", {"layouts": layouts}))
    assert message in refusal(lambda: notebook_params(LAYOUT.name, {"layouts": layouts}))
    argv = ["run", LAYOUT.name, "-p", f"layouts={json.dumps(layouts)}", "--out", str(tmp_path)]
    assert message in runner_error(capsys, argv)


def test_a_baseline_and_one_fa_first_layout_are_enough():
    layouts = ["sandwich", "standard_periodic"]
    assert LAYOUT.resolve("seminar", {"layouts": layouts})["layouts"] == layouts


def test_duplicate_probed_layouts_are_refused():
    assert "names 'reverse_periodic' twice" in refusal(
        lambda: chapter("softcka").resolve("seminar", {"layouts": ["reverse_periodic"] * 2})
    )


def test_a_step_larger_than_the_run_is_refused_with_the_range(no_work, cpu_only, capsys, tmp_path):
    # seminar: train_tokens 16384, seq_len 128 -> at most 16384 // 128 = 128 sequences a step
    message = "parameter 'batch_size' must be in [1, 128] (batch_size x seq_len=128 tokens a step <= "
    message += "train_tokens=16384), got 1000000000"
    assert refusal(lambda: LAYOUT.resolve("seminar", {"batch_size": 1_000_000_000})) == message
    argv = ["run", LAYOUT.name, "-p", "batch_size=1000000000", "--out", str(tmp_path)]
    assert runner_error(capsys, argv) == message
    assert LAYOUT.resolve("seminar", {"batch_size": 128})["batch_size"] == 128
    assert "parameter 'seq_len' must be <= train_tokens=100" in refusal(
        lambda: LAYOUT.resolve("seminar", {"train_tokens": 100})
    )


def test_a_step_larger_than_the_memory_is_refused_with_the_range(no_work, cpu_only):
    # tiny teacher on the CPU: 8 layers x 128 x 4 bytes of residual stream + 2 x 8192 x 4 bytes of logits a token
    per_sequence = (8 * 128 * 4 + 2 * 8192 * 4) * 128
    high = 23 * GIB // per_sequence
    assert high == 2770  # 23 GiB / 8.5 MiB = 2770.8
    big = {"train_tokens": 10**12, "budgets": [10**12], "batch_size": high + 1}  # budgets: each >= one step
    message = refusal(lambda: LAYOUT.resolve("seminar", big))
    assert message.startswith(f"parameter 'batch_size' must be in [1, {high}] (a step holds at least 8.5 MiB")
    assert "23.0 GiB" in message
    assert LAYOUT.resolve("seminar", big | {"batch_size": high})["batch_size"] == high


def test_the_gpu_preset_needs_cuda(no_work, cpu_only, capsys, tmp_path):
    message = "preset 'gpu' needs a CUDA GPU and torch sees none here"
    for argv in (["run", "--preset", "gpu"], ["run", LAYOUT.name, "--preset", "gpu"]):
        assert runner_error(capsys, [*argv, "--out", str(tmp_path)]).startswith(message)
    assert refusal(lambda: notebook_params(LAYOUT.name, {"preset": "gpu"})).startswith(message)
    assert refusal(lambda: notebook_params("efficiency", {"preset": "paper"})).startswith(
        "preset 'paper' needs a CUDA GPU"
    )


def test_the_effective_fa_layer_count_is_said_when_the_fraction_rounds(monkeypatch, capsys, tmp_path):
    note = "fa_fraction=0.3 of tiny-teacher's 8 layers is 2.4 layers: 2 kept as full attention (25.0%, rounded half up)"
    assert LAYOUT.notes(LAYOUT.resolve("seminar", {"fa_fraction": 0.3})) == [note]
    assert LAYOUT.notes(LAYOUT.resolve("seminar", {"fa_fraction": 0.25})) == []  # 2 of 8 exactly
    assert LAYOUT.notes(LAYOUT.resolve("seminar", {"fa_fraction": 0.375})) == []  # 3 of 8 exactly
    assert LAYOUT.notes(LAYOUT.resolve("gpu")) == [
        "fa_fraction=0.25 of smollm2-135m's 30 layers is 7.5 layers: 8 kept as full attention (26.7%, rounded half up)"
    ]
    ran = []
    monkeypatch.setattr(book, "run_chapter", lambda spec, *a, **k: ran.append(spec.name) or "skipped")
    assert book.main(["run", LAYOUT.name, "--no-deps", "-p", "fa_fraction=0.3", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.index(f"layout_distillation: {note}") < out.index("[1/1]") and ran == [LAYOUT.name]


@pytest.mark.parametrize(
    "given, read",
    [
        (
            '["sandwich","standard_periodic"]',
            ["sandwich", "standard_periodic"],
        ),  # Papermill -p: a JSON string
        ("[sandwich, standard_periodic]", ["sandwich", "standard_periodic"]),  # a YAML string
        (("sandwich", "standard_periodic"), ["sandwich", "standard_periodic"]),
    ],
)
def test_a_list_may_come_as_yaml_or_json_text(given, read):
    assert LAYOUT.resolve("seminar", {"layouts": given})["layouts"] == read


def test_a_bare_item_for_a_list_is_refused_with_the_yaml_forms(no_work, capsys, tmp_path):
    message = (
        "parameter 'layouts' must be a list, got 'sandwich'; write it as a YAML list: runner -p 'layouts=[sandwich]', "
        "Papermill -p layouts '[sandwich]' or -y 'layouts: [sandwich]'"
    )
    assert refusal(lambda: notebook_params(LAYOUT.name, {"layouts": "sandwich"})) == message
    assert (
        runner_error(capsys, ["run", LAYOUT.name, "-p", "layouts=sandwich", "--out", str(tmp_path)])
        == message
    )
    assert "got 512; write it as a YAML list: runner -p 'bench_lengths=[512]'" in refusal(
        lambda: chapter("efficiency").resolve("seminar", {"bench_lengths": 512})
    )


@pytest.mark.parametrize("given", [1e5, 100000.0, "1e5", "1e+05", "100000", "100000.0"])
def test_an_integral_float_or_number_text_is_read_as_an_int(given):
    value = LAYOUT.resolve("seminar", {"train_tokens": given})["train_tokens"]
    assert value == 100_000 and type(value) is int


@pytest.mark.parametrize(
    "given, message",
    [
        (100000.5, "parameter 'train_tokens' must be of type int, got float 100000.5"),
        ("1e5.5", "parameter 'train_tokens' must be of type int, got str '1e5.5'"),
        ("many", "parameter 'train_tokens' must be of type int, got str 'many'"),
        (True, "parameter 'train_tokens' must be of type int, got bool True"),
    ],
)
def test_a_non_integral_value_for_an_int_is_refused(no_work, given, message):
    assert refusal(lambda: notebook_params(LAYOUT.name, {"train_tokens": given})) == message


def test_number_text_and_non_finite_floats():
    assert LAYOUT.resolve("seminar", {"fa_fraction": "0.3"})["fa_fraction"] == 0.3
    assert LAYOUT.resolve("seminar", {"fa_fraction": 1})["fa_fraction"] == 1.0
    assert refusal(lambda: LAYOUT.resolve("seminar", {"lr_rest": float("inf")})) == (
        "parameter 'lr_rest' must be a finite number, got inf"
    )


def test_runner_reads_papermill_forms(monkeypatch, tmp_path):
    seen = {}
    monkeypatch.setattr(
        book, "run_chapter", lambda spec, preset, over, *a, **k: seen.update(over) or "skipped"
    )
    argv = ["run", LAYOUT.name, "--no-deps", "--out", str(tmp_path), "-p", "train_tokens=1e5"]
    assert book.main([*argv, "-p", 'layouts=["sandwich","standard_periodic"]']) == 0
    assert seen == {
        "train_tokens": "1e5",
        "layouts": ["sandwich", "standard_periodic"],
    }  # resolved in the notebook
    assert LAYOUT.resolve("seminar", seen)["train_tokens"] == 100_000


def test_a_misspelt_parameter_stops_with_its_near_match(no_work, capsys, tmp_path):
    message = "has no parameter 'fa_fration' (did you mean 'fa_fraction'?)"
    injected = "# Parameters\nfa_fration = 0.3\n"  # Papermill's injected cell, in IPython's history
    namespace = {"In": ["", "# Parameters (None = the preset's value)\nfa_fraction = None\n", injected]}
    assert message in refusal(lambda: notebook_params(LAYOUT.name, namespace | {"fa_fration": 0.3}))
    err = runner_error(capsys, ["run", LAYOUT.name, "-p", "fa_fration=0.3", "--out", str(tmp_path)])
    assert err.startswith("no chosen chapter has a parameter 'fa_fration' (did you mean 'fa_fraction'?)")
    assert "did you mean" not in refusal(lambda: LAYOUT.param("zzz"))


def test_injected_names_are_read_from_the_parameter_cells_only():
    sources = [
        "",
        "# Parameters\na = 1\nb, c = 2, 3\nPAPERMILL_INPUT_PATH = 'x'\n",
        "d = 4",
        5,
        "# Parameters\ne =",
    ]
    assert assigned_names(sources) == ["a", "PAPERMILL_INPUT_PATH"]
    namespace = {
        "In": ["# Parameters\npreset = 'seminar'\nPAPERMILL_OUTPUT_PATH = 'out.ipynb'\nseq_len = 64\n"]
    }
    assert notebook_params(LAYOUT.name, namespace | {"seq_len": 64})["seq_len"] == 64


def test_the_papermill_spelling_in_the_runner_is_refused_with_the_runners(no_work, capsys, tmp_path):
    err = runner_error(capsys, ["run", "-p", "layouts", '["sandwich"]', "--out", str(tmp_path)])
    assert err == (
        "-p expects name=value in one argument (e.g. -p 'layouts=[sandwich, standard_periodic]'), got 'layouts'"
    )


def test_the_preset_is_chosen_with_the_preset_option(no_work, capsys, tmp_path):
    err = runner_error(capsys, ["run", "-p", "preset=gpu", "--out", str(tmp_path)])
    assert (
        err
        == "-p preset=gpu: choose the preset with --preset gpu (allowed: seminar, gpu, paper), not with -p"
    )


def test_a_parameter_error_is_one_line_in_a_notebook():
    err = ParameterError("parameter 'x' must be >= 1, got 0")
    assert err._render_traceback_() == ["ParameterError: parameter 'x' must be >= 1, got 0"]


def test_notebook_parameter_cells_say_what_the_specs_allow():
    assert sync_parameter_cells(REPO_ROOT / "notebooks") == [], (
        'regenerate them: python -c "from hybridlib.findings import sync_parameter_cells as s; '
        "from hybridlib.paths import REPO_ROOT; s(REPO_ROOT / 'notebooks', write=True)\""
    )
    cell = LAYOUT.parameters_cell().splitlines()
    assert (
        "fa_fraction = None  # float (in (0.0, 1.0]): share of layers kept full attention (rounded half up)"
        in cell
    )
    assert len(cell) == 2 + len(LAYOUT.params)
    for spec in CHAPTERS.values():
        assert "(min " not in spec.parameters_cell()


def test_teacher_shapes_match_their_configs():
    from hybridlib.models import describe
    from hybridlib.paths import cache_dir

    offline = [
        name
        for name in ("tiny-teacher", "smollm2-135m", "gemma3-270m")
        if any(cache_dir("models", name).iterdir())
    ]
    if not offline:
        pytest.skip("no offline teacher prepared (make data)")
    for name in offline:
        card = describe(name)
        assert layout_spec.SHAPES[name] == layout_spec.Shape(card.n_layers, card.hidden_size, card.vocab_size)
    assert set(layout_spec.SHAPES) == set(LAYOUT.param("teacher").choices)


@pytest.mark.slow
def test_papermill_stops_at_the_first_cell_with_one_line(tmp_path):
    """The chapter run by plain Papermill with a misspelt parameter: the error is the start cell's one line and no
    later cell ran."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    out = tmp_path / "out.ipynb"
    with pytest.raises(PapermillExecutionError) as err:
        papermill.execute_notebook(
            str(REPO_ROOT / "notebooks" / LAYOUT.notebook),
            str(out),
            parameters={"fa_fration": 0.3},
            cwd=str(REPO_ROOT / "notebooks"),
            kernel_name="python3",
            progress_bar=False,
        )
    assert err.value.ename == "ParameterError"
    assert "did you mean 'fa_fraction'" in err.value.evalue
    cells = [c for c in json.loads(out.read_text())["cells"] if c["cell_type"] == "code"]
    failed = [c for c in cells if any(o["output_type"] == "error" for o in c["outputs"])]
    assert len(failed) == 1 and "notebook.start" in "".join(failed[0]["source"])
    (error,) = [o for o in failed[0]["outputs"] if o["output_type"] == "error"]
    assert error["traceback"] == [f"ParameterError: {err.value.evalue}"]
    assert failed[0]["metadata"]["papermill"]["duration"] < 10
    later = cells[cells.index(failed[0]) + 1 :]
    assert later and all(c["execution_count"] is None for c in later)


@pytest.mark.parametrize("name", sorted(CHAPTERS))
def test_papermill_reads_every_parameter_of_the_parameters_cell(name, caplog):
    """Papermill's own inspection (``papermill --help-notebook``) parses each parameter line; a comment with an
    ``=`` sign (``>= 1``) makes it skip the line with a warning."""
    import papermill

    spec = CHAPTERS[name]
    found = papermill.inspect_notebook(str(REPO_ROOT / "notebooks" / spec.notebook))
    assert set(found) == {"preset", *(p.name for p in spec.params)}
    assert "Unable to parse" not in caplog.text


def test_records_only_lets_a_cuda_preset_judge_the_student_chapters_on_a_cpu(
    no_work, cpu_only, monkeypatch, capsys
):
    """``--records-only`` on a CPU: the gpu preset passes the device check for the chapters that read the layout
    chapter's students, each executed with $HYBRIDLIB_RECORDS_ONLY set (their students looked up, never trained),
    and the variable gone after; another chapter is refused before any work."""
    assert refusal(lambda: book.run(["efficiency"], "gpu", {}, records_only=True)) == (
        "--records-only runs only the chapters that read the layout chapter's students "
        "(layout_distillation, softcka, first_fa), not efficiency"
    )
    assert "not lolcats" in runner_error(capsys, ["run", "lolcats", "--preset", "gpu", "--records-only"])
    seen = []
    monkeypatch.setattr(
        book, "run_chapter", lambda spec, *a, **k: seen.append((spec.name, os.environ.get(RECORDS_ONLY_ENV)))
    )
    monkeypatch.delenv(RECORDS_ONLY_ENV, raising=False)
    book.run([], "gpu", {}, records_only=True)
    assert seen == [("layout_distillation", "1"), ("softcka", "1"), ("first_fa", "1")]
    assert RECORDS_ONLY_ENV not in os.environ
    assert refusal(lambda: book.run(["first_fa"], "gpu", {})).startswith("preset 'gpu' needs a CUDA GPU")
    monkeypatch.setenv(RECORDS_ONLY_ENV, "1")
    assert notebook_params(LAYOUT.name, {"preset": "gpu"})["precision"] == "bf16"


def test_records_only_looks_students_up_without_training(monkeypatch):
    """Under $HYBRIDLIB_RECORDS_ONLY every arm, learning-rate check, other teacher and budget student of the layout
    chapter is asked for with train=False (the chapter's precision among its settings); without it with train=True."""
    asked = []

    def distill_layout(teacher, layout, **kwargs):
        asked.append((teacher, kwargs["train"], kwargs["precision"]))
        return SimpleNamespace(final=lambda metric: 1.0)

    monkeypatch.setattr(replicates, "distill_layout", distill_layout)
    params = LAYOUT.resolve("gpu", {"seeds": 2, "budget_seeds": 1})
    for env, train in (("1", False), ("", True)):
        monkeypatch.setenv(RECORDS_ONLY_ENV, env)
        asked.clear()
        replicates.train(params)
        replicates.train_lr_check(params, "sandwich")
        replicates.train_other_teachers(params, "sandwich")
        replicates.train_budgets(params, [params["budgets"][0]], progress=False)
        n = 7 * 2 + 2 * 2 + 2 + 3  # arms x seeds, lr check, other teacher, the smallest budget's 3 arms
        assert (
            asked
            == [("smollm2-135m", train, "bf16")] * (n - 5)
            + [("gemma3-270m", train, "bf16")] * 2
            + [("smollm2-135m", train, "bf16")] * 3
        )
        assert [may_train(t) for t in (None, True, False)] == [train, True, False]
    assert replicates.recipe(LAYOUT.resolve("seminar"))["precision"] == "fp32"
