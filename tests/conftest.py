"""Session order: tests marked ``after_notebooks`` run last, after nbval has executed the notebooks (which
rewrite ``data/results/<chapter>/seminar.json``), so they can compare the fresh results with the committed
ones read while the tests were collected."""


def pytest_collection_modifyitems(session, config, items):
    late = [item for item in items if item.get_closest_marker("after_notebooks")]
    if late:
        items[:] = [item for item in items if not item.get_closest_marker("after_notebooks")] + late
