"""moesim from Python: the simulator the CLI runs, called in-process.

    import moesim
    result = moesim.run("scenarios/quickstart.yaml")          # a path, a YAML string or a dict
    result["runs"][0]["metrics"]                              # what result.json holds
    moesim.run(serving_scenario)["requests"]                  # per-request table (pandas)
    moesim.validate({"model": "mixtral-8x7b", "hardware": "dgx-h100"})
    moesim.sweep("scenarios/quickstart.yaml", {"workload.batch_size": [4, 8, 16]}, jobs=4)
    moesim.list("policies")
    moesim.cost.alltoall("dgx-h100", gpus=8, bytes=64 << 20)

A scenario that moesim rejects raises ScenarioError, whose `errors` are the
"FILE:LINE:COL: error: ..." lines the CLI prints. The simulator runs without the GIL, so threads
(sweep's `jobs`) simulate in parallel. Results are those of `moesim run`, byte for byte.
"""
import builtins
from builtins import zip as zip_
import concurrent.futures
import io
import json
import os
import pathlib
import tempfile
import warnings as _warnings

try:  # installed: the extension sits in the package
    from . import _moesim
except ImportError:  # the build tree: build/python/ on sys.path beside python/
    import _moesim

__version__ = _moesim.__version__
__all__ = ["run", "validate", "sweep", "list", "reference", "schema", "cost", "ScenarioError", "ScenarioWarning"]


class ScenarioError(ValueError):
    """A scenario moesim rejects; `errors` holds one "FILE:LINE:COL: error: ..." line per problem."""

    def __init__(self, errors):
        self.errors = builtins.list(errors)
        super().__init__("\n".join(self.errors))


class ScenarioWarning(UserWarning):
    """A warning moesim prints for a scenario or a run (FILE:LINE:COL: warning: ...)."""


def _source(scenario):
    """(YAML text, file name for messages, directory relative paths resolve against)."""
    if isinstance(scenario, dict):
        # JSON is YAML: the dict reaches the loader as the same mapping a YAML file would give.
        return json.dumps(scenario), "<dict>", os.getcwd()
    looks_like_path = isinstance(scenario, os.PathLike) or (
        isinstance(scenario, str) and "\n" not in scenario and ":" not in scenario)
    if looks_like_path:
        path = pathlib.Path(scenario)
        if path.is_dir():
            raise ScenarioError([f"{path}: error: is a directory, not a scenario file"])
        try:
            text = path.read_text()
        except OSError:
            raise ScenarioError([f"{path}: error: cannot read scenario file"]) from None
        return text, str(scenario), str(path.parent) if str(path.parent) else "."
    if isinstance(scenario, str):
        return scenario, "<string>", os.getcwd()
    raise TypeError(f"a scenario is a path, a YAML string or a dict, not {type(scenario).__name__}")


def _sets(sets):
    return [s if isinstance(s, str) else f"{s[0]}={_yaml_value(s[1])}" for s in (sets or ())]


def _yaml_value(v):
    return v if isinstance(v, str) else json.dumps(v)


def _warn(lines):
    for w in lines:
        _warnings.warn(w, ScenarioWarning, stacklevel=3)


def run(scenario, *, set=(), jobs=1, out=None):
    """Simulates every (policy, predictor) of `scenario` and returns result.json as a dict.

    `set`: overrides as `moesim run --set` takes them ("key.path=value", or (key, value) pairs).
    `out`: a folder to write result.json, scenario.resolved.yaml, requests.csv and traces into,
    as `moesim run --out` does. A serving scenario's result also carries "requests", the
    per-request table (requests.csv) as a pandas DataFrame.
    """
    text, file, base = _source(scenario)
    with tempfile.TemporaryDirectory(prefix="moesim-") as tmp:
        folder = pathlib.Path(out) if out is not None else pathlib.Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        try:
            result_text, resolved, warned = _moesim.run(text, file, base, _sets(set), str(folder), int(jobs))
        except _moesim.InputError as e:
            raise ScenarioError(str(e).splitlines()) from None
        _warn(warned)
        if out is not None:
            (folder / "result.json").write_text(result_text)
            (folder / "scenario.resolved.yaml").write_text(resolved)
        result = json.loads(result_text)
        csv = folder / result.get("requests_csv", "") if result.get("requests_csv") else None
        if csv is not None and csv.is_file():
            import pandas
            result["requests"] = pandas.read_csv(io.StringIO(csv.read_text()))
    return result


def validate(scenario, *, set=()):
    """Checks `scenario` as `moesim validate` does; returns its warnings, raises ScenarioError."""
    text, file, base = _source(scenario)
    try:
        return _moesim.validate(text, file, base, _sets(set))
    except _moesim.InputError as e:
        raise ScenarioError(str(e).splitlines()) from None


def _flatten(prefix, value, row):
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else k, v, row)
    elif not isinstance(value, builtins.list):
        row[prefix] = value


def _axes(axes):
    """Axes as `moesim sweep` takes them: "key=v1,v2" or "key=start:stop:step" strings, or a dict
    {key: [values]}."""
    if axes is None:
        return []
    if isinstance(axes, dict):
        return [f"{k}=" + ",".join(_yaml_value(v) for v in values) for k, values in axes.items()]
    return [str(a) for a in axes]


def _typed(text):
    """A point's YAML value as a number when it reads as one (for the table's columns)."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def sweep(scenario, grid, *, zip=None, set=(), jobs=None):  # noqa: A002 (the CLI's option)
    """Runs `scenario` at every point of a sweep and returns a pandas DataFrame: one row per point
    and run, with `point` (its index), the point's values, the run's labels and its metrics
    flattened to dotted columns (ttft_ms.p99, bytes.inter_node). `table.attrs["points"]` holds
    each point's overrides and whole runs (what the CLI sweep's results.jsonl lines hold).

    `grid`: axes whose values multiply ({"key.path": [values]}, or `moesim sweep --grid` strings
    such as "workload.routing.alpha=0.0:0.9:0.1"); `zip`: axes that advance together, as one more,
    innermost dimension (`--zip`). Points are those `moesim sweep` expands, in its order; they run
    on `jobs` threads (default: the CPUs), and the table does not depend on `jobs`."""
    import pandas
    fixed = _sets(set)
    try:
        points = _moesim.sweep_points(_axes(grid), _axes(zip), fixed)
    except _moesim.InputError as e:
        raise ScenarioError(str(e).splitlines()) from None

    def one(point):
        return run(scenario, set=fixed + [f"{k}={v}" for k, v in point])

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        results = [*pool.map(one, points)]
    rows, per_point = [], []
    for index, (point, result) in enumerate(zip_(points, results)):
        per_point.append({"point": index, "overrides": dict(point), "runs": result["runs"]})
        for r in result["runs"]:
            row = {"point": index, **{k: _typed(v) for k, v in point}}
            for k in ("policy", "label", "predictor", "predictor_label"):
                if k in r:
                    row[k] = r[k]
            _flatten("", r.get("metrics", {}), row)
            rows.append(row)
    table = pandas.DataFrame(rows)
    # Every point's runs whole (arrays such as per-GPU breakdowns are left out of the columns), as
    # the lines of the CLI sweep's results.jsonl.
    table.attrs["points"] = per_point
    return table


def list(kind):  # noqa: A001 (the CLI's verb)
    """The entries of one registry: models, hardware, gpus, policies, routing, predictors or
    engines; each a dict with name and description (and params, where entries take options)."""
    return _moesim.list(kind)


def reference():
    """The Markdown reference of every scenario key and registry (`moesim list --markdown`)."""
    return _moesim.reference_markdown()


def schema():
    """The JSON Schema of scenario files (`moesim schema`), as a dict."""
    return json.loads(_moesim.schema())


from . import cost  # noqa: E402 (moesim.cost.gemm / .alltoall: needs ScenarioError above)
