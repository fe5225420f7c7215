"""moesim from Python: the simulator the CLI runs, called in-process.

    import moesim
    result = moesim.run("scenarios/quickstart.yaml")          # a path, a YAML string or a dict
    result["runs"][0]["metrics"]                              # what result.json holds
    moesim.run(serving_scenario)["requests"]                  # per-request table (pandas)
    moesim.validate({"model": "mixtral-8x7b", "hardware": "dgx-h100"})
    moesim.sweep("scenarios/quickstart.yaml", {"workload.batch_size": [4, 8, 16]}, jobs=4)
    moesim.list("policies")
    moesim.cost.alltoall("dgx-h100", gpus=8, bytes=64 << 20)
    moesim.plan("scenarios/serving/plan-mixtral-h100.yaml", slo={"ttft_ms": 2000, "tpot_ms": 50})
    moesim.guideline("mixtral-8x7b", "dgx-h100", skewness=[1.5, 3.0])
    moesim.cost.dispatch("dgx-h100", tokens=4096, hidden=7168, top_k=8, experts=256)

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
__all__ = ["run", "validate", "sweep", "plan", "guideline", "list", "reference", "schema", "cost", "ScenarioError",
           "ScenarioWarning"]


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


def _cli(args):
    """Runs `moesim ARGS...` in-process: its stdout; ScenarioError on bad input (exit 2)."""
    code, out, err = _moesim.cli([str(a) for a in args])
    lines = [line for line in err.splitlines() if line.strip()]
    if code == 2:
        raise ScenarioError(lines)
    if code != 0:
        raise RuntimeError("\n".join(lines) or f"moesim exited with {code}")
    _warn([line for line in lines if ": warning: " in line])
    return out


def _flag_value(value):
    """A keyword argument as the CLI option's text: lists joined by commas, booleans lower-case,
    an SLO dict as key=value pairs."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, (builtins.list, tuple)):
        return ",".join(_flag_value(v) for v in value)
    return str(value)


def _flags(options):
    """Keyword arguments as CLI options: max_num_seqs=[64, 128] -> --max-num-seqs 64,128."""
    args = []
    for key, value in options.items():
        if value is None:
            continue
        args += ["--" + key.replace("_", "-"), _flag_value(value)]
    return args


def _scenario_file(scenario, folder):
    """A path for `scenario` (a path is used as is; YAML text or a dict is written into `folder`,
    so relative paths inside it resolve there)."""
    if isinstance(scenario, (str, os.PathLike)) and "\n" not in str(scenario) and pathlib.Path(scenario).exists():
        return str(scenario)
    text, _, _ = _source(scenario)
    path = pathlib.Path(folder) / "scenario.yaml"
    path.write_text(text)
    return str(path)


def plan(scenario, *, out=None, set=(), jobs=None, **options):  # noqa: A002 (the CLI's option)
    """The deployment planner (`moesim plan`): searches parallelism, policies, batch limits and
    prefill/decode splits for the best goodput at the SLO. Returns plan.csv as a pandas DataFrame
    (one row per candidate); `attrs` holds `table` (plan.txt), `best` (best.yaml's text, or None)
    and `out` (the folder written: `out`, or a temporary one).

    Options are the CLI's, with underscores: objective, slo ({"ttft_ms": .., "tpot_ms": ..} or
    "ttft_ms=..,tpot_ms=.."), percentile, gpu_hour_cost, policies, max_gpus, gpus_per_instance,
    max_num_seqs, max_batched_tokens (lists), disaggregation, two_batch_overlap, finalists,
    estimate_layer_sampling, estimate_span."""
    import pandas
    folder = pathlib.Path(out) if out else pathlib.Path(tempfile.mkdtemp(prefix="moesim-plan-"))
    folder.mkdir(parents=True, exist_ok=True)
    args = ["plan", _scenario_file(scenario, folder), "--out", str(folder), "--quiet"] + _flags(options)
    for s in _sets(set):
        args += ["--set", s]
    if jobs:
        args += ["--jobs", str(int(jobs))]
    _cli(args)
    table = pandas.read_csv(folder / "plan.csv")
    table.attrs["table"] = (folder / "plan.txt").read_text() if (folder / "plan.txt").exists() else ""
    table.attrs["best"] = (folder / "best.yaml").read_text() if (folder / "best.yaml").exists() else None
    table.attrs["out"] = str(folder)
    return table


def guideline(model, hardware, *, set=(), jobs=None, curves=False, **options):  # noqa: A002
    """MoE-GPS's guideline (`moesim guideline`): over skewness x bandwidth, which strategy
    (no prediction, distribution-only, token-to-expert at each accuracy) gives the fastest layer.
    Returns the decision CSV as a pandas DataFrame; with `curves`, `attrs["curves"]` holds the
    latency curves. Options are the CLI's, with underscores: skewness, bandwidth_GBps, accuracies
    (lists or "start:stop:step"), batch_size, seq_len, batches, warmup_batches, seed,
    assumptions, without."""
    import pandas
    with tempfile.TemporaryDirectory(prefix="moesim-guideline-") as folder:
        decisions = pathlib.Path(folder) / "guideline.csv"
        args = ["guideline", "--model", model, "--hardware", hardware, "--out", str(decisions), "--quiet"]
        if curves:
            args += ["--curves", str(pathlib.Path(folder) / "curves.csv")]
        args += _flags(options)
        for s in _sets(set):
            args += ["--set", s]
        if jobs:
            args += ["--jobs", str(int(jobs))]
        _cli(args)
        table = pandas.read_csv(decisions)
        if curves:
            table.attrs["curves"] = pandas.read_csv(pathlib.Path(folder) / "curves.csv")
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
