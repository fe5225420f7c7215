"""The Python module (`import moesim`) gives the CLI's answers: result.json, the resolved scenario
and requests.csv byte for byte, the CLI's located errors as ScenarioError, a dict scenario the
same results as its YAML, sweeps independent of their thread count, and the GIL released while a
scenario simulates.

Run by `meson test` (suite `python`) with the build tree's module on PYTHONPATH and MOESIM set to
the CLI built beside it; by hand:
    PYTHONPATH=python:build/python MOESIM=build/moesim python3 -m pytest tests/python
"""
import json
import os
import pathlib
import subprocess
import threading

import pytest
import yaml

import moesim

ROOT = pathlib.Path(__file__).resolve().parents[2]
CLI = os.environ.get("MOESIM", str(ROOT / "build" / "moesim"))
QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"
SERVING = ROOT / "scenarios" / "serving" / "mixtral-dgx-a100.yaml"
SERVING_SETS = ["workload.requests=340"]
# That short run never reaches a steady state, and says so (test_warnings_are_python_warnings).
pytestmark = pytest.mark.filterwarnings("ignore::moesim.ScenarioWarning")


def cli(*args, check=True):
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, check=check)


@pytest.mark.parametrize("scenario,sets", [(QUICKSTART, []), (SERVING, SERVING_SETS)])
def test_run_writes_the_cli_files_byte_for_byte(tmp_path, scenario, sets):
    overrides = [a for s in sets for a in ("--set", s)]
    cli("run", scenario, "-q", "--jobs", "1", "--out", tmp_path / "cli", *overrides)
    result = moesim.run(scenario, set=sets, out=tmp_path / "py")
    for name in ("result.json", "scenario.resolved.yaml", "requests.csv"):
        made = tmp_path / "cli" / name
        if name == "requests.csv" and not made.exists():
            continue
        assert (tmp_path / "py" / name).read_bytes() == made.read_bytes(), name
    assert len(result["runs"]) >= 1


def test_serving_result_carries_the_requests_table():
    result = moesim.run(SERVING, set=SERVING_SETS)
    requests = result["requests"]
    assert len(requests) == 340 * len(result["runs"])
    assert {"ttft_ms", "tpot_ms"} <= set(requests.columns)


def test_errors_are_the_cli_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: mixtral-9x7b\nhardware: dgx-h100\nworkload: {batch_size: 0}\n")
    printed = cli("validate", bad, check=False)
    assert printed.returncode == 2
    with pytest.raises(moesim.ScenarioError) as caught:
        moesim.validate(bad)
    assert caught.value.errors == [line for line in printed.stderr.splitlines() if ": error: " in line]
    assert len(caught.value.errors) == 2
    with pytest.raises(moesim.ScenarioError):
        moesim.run(bad)
    with pytest.raises(moesim.ScenarioError, match="cannot read scenario file"):
        moesim.run(tmp_path / "missing.yaml")
    with pytest.raises(TypeError):
        moesim.run(42)


@pytest.mark.filterwarnings("default::moesim.ScenarioWarning")
def test_warnings_are_python_warnings():
    with pytest.warns(moesim.ScenarioWarning, match="never reached a steady state"):
        moesim.run(SERVING, set=SERVING_SETS)
    # validate returns its warnings rather than raising them
    assert any("no 'workload' section" in w for w in moesim.validate({"model": "mixtral-8x7b", "hardware": "dgx-h100"}))


def test_a_dict_is_its_yaml():
    scenario = yaml.safe_load(QUICKSTART.read_text())
    scenario["workload"]["batches"] = 2
    from_dict = moesim.run(scenario)
    from_yaml = moesim.run(yaml.safe_dump(scenario))
    assert from_dict == from_yaml
    assert from_dict["runs"][0]["metrics"] == moesim.run(QUICKSTART, set=["workload.batches=2"])["runs"][0]["metrics"]


def test_sweep_is_a_table_independent_of_threads():
    grid = {"workload.batch_size": [4, 8], "seed": [1, 2]}
    one = moesim.sweep(QUICKSTART, grid, jobs=1)
    two = moesim.sweep(QUICKSTART, grid, jobs=2)
    runs = len(moesim.run(QUICKSTART)["runs"])
    assert len(one) == 4 * runs
    assert list(one["workload.batch_size"][::runs]) == [4, 4, 8, 8]
    assert one.equals(two)


def test_the_gil_is_released_while_simulating():
    done = threading.Event()
    ticks = 0

    def simulate():
        moesim.run(SERVING, set=SERVING_SETS)
        done.set()

    worker = threading.Thread(target=simulate)
    worker.start()
    while not done.is_set():  # counts only while this thread holds the GIL
        ticks += 1
    worker.join()
    assert ticks > 10000


def test_registries_reference_and_schema_match_the_cli():
    names = [p["name"] for p in moesim.list("policies")]
    assert "eplb" in names and all("params" in p for p in moesim.list("policies"))
    assert [m["name"] for m in moesim.list("models")] == [
        line.split()[0] for line in cli("list", "models").stdout.splitlines() if line.strip()]
    with pytest.raises(ValueError):
        moesim.list("nonsense")
    assert moesim.reference() == cli("list", "--markdown").stdout
    assert moesim.schema()["title"] == "moesim scenario"


def test_cost_queries_are_the_cli_json():
    args = ["--gpu", "H100-SXM-80GB", "--m", "4096", "--n", "2048", "--k", "7168", "--dtype", "fp8", "--json", "--explain"]
    assert moesim.cost.gemm("H100-SXM-80GB", 4096, 2048, 7168, dtype="fp8", explain=True) == json.loads(
        cli("cost", "gemm", *args).stdout)
    for kind in ("allreduce", "allgather", "alltoall", "sendrecv"):
        printed = cli("cost", kind, "--hardware", "2x-dgx-h100", "--gpus", "16", "--bytes", str(8 << 20),
                      "--network-model", "analytic", "--json")
        got = getattr(moesim.cost, kind)("2x-dgx-h100", 16, 8 << 20, network_model="analytic")
        assert got == json.loads(printed.stdout), kind
    attention = cli("cost", "attention", "--gpu", "H100-SXM-80GB", "--phase", "decode", "--batch", "8", "--seq", "4096",
                    "--heads", "32", "--kv-heads", "8", "--head-dim", "128", "--kv-dtype", "fp8", "--json", "--explain")
    assert moesim.cost.attention("H100-SXM-80GB", "decode", 8, 4096, 32, 8, 128, kv_dtype="fp8",
                                 explain=True) == json.loads(attention.stdout)
    mla = cli("cost", "mla", "--gpu", "B200-180GB", "--phase", "prefill", "--batch", "2", "--seq", "2048", "--heads", "16",
              "--json")
    assert moesim.cost.mla("B200-180GB", "prefill", 2, 2048, 16) == json.loads(mla.stdout)
    moe = cli("cost", "moe", "--gpu", "H100-SXM-80GB", "--tokens", "256", "--hidden", "4096", "--inter", "14336",
              "--top-k", "2", "--experts", "8", "--distribution", "power-law:1.2", "--json")
    assert moesim.cost.moe("H100-SXM-80GB", 256, 4096, 14336, 2, 8, distribution="power-law:1.2") == json.loads(moe.stdout)
    for bad in (lambda: moesim.cost.gemm("H100-SXM-80GB", 0, 1, 1), lambda: moesim.cost.alltoall("dgx-h100", 99, 1),
                lambda: moesim.cost.attention("H100-SXM-80GB", "decode", 8, 4096, 32, 5, 128),
                lambda: moesim.cost.allreduce("dgx-h100", 8, float("nan")), lambda: moesim.cost.gemm("no-such-gpu", 1, 1, 1)):
        with pytest.raises(moesim.ScenarioError):
            bad()


def test_sweep_table_is_the_cli_sweeps(tmp_path):
    cli("sweep", QUICKSTART, "--grid", "workload.batch_size=4:8:4", "--zip", "seed=1,2", "--zip", "workload.seq_len=64,128",
        "--out", tmp_path / "cli")
    import numpy
    import pandas
    printed = pandas.read_csv(tmp_path / "cli" / "results.csv")
    table = moesim.sweep(QUICKSTART, ["workload.batch_size=4:8:4"], zip={"seed": [1, 2], "workload.seq_len": [64, 128]})
    assert list(table.columns) == list(printed.columns)
    numbers = printed.select_dtypes("number").columns
    # results.csv prints 17 significant digits; the module keeps the doubles
    assert numpy.allclose(printed[numbers].to_numpy(), table[numbers].to_numpy(dtype=float), rtol=1e-12, atol=0)
    assert (printed["label"] == table["label"]).all()
    with pytest.raises(moesim.ScenarioError, match="never reaches stop"):
        moesim.sweep(QUICKSTART, ["seed=1:5:-1"])


PLAN_SCENARIO = {
    "name": "plan", "seed": 4, "model": {"preset": "mixtral-8x7b", "layers": 2}, "hardware": "dgx-a100",
    "workload": {"kind": "serving", "requests": 60, "warmup_requests": 10,
                 "arrival": {"process": "poisson", "rate_per_s": 40},
                 "prompt_tokens": {"dist": "uniform", "min": 32, "max": 400},
                 "output_tokens": {"dist": "uniform", "min": 1, "max": 40}, "routing": {"kind": "zipf", "s": 0.8}},
    "serving": {"max_num_seqs": 16, "max_batched_tokens": 1024, "slo": {"ttft_ms": 200, "tpot_ms": 30}},
    "policy": "static-ep",
}


def test_plan_gives_the_cli_plan_csv(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(PLAN_SCENARIO))
    cli("plan", scenario, "--max-gpus", "2", "--finalists", "2", "--jobs", "1", "-q", "--out", tmp_path / "cli")
    table = moesim.plan(scenario, max_gpus=2, finalists=2, jobs=1, out=tmp_path / "py")
    assert (tmp_path / "py" / "plan.csv").read_bytes() == (tmp_path / "cli" / "plan.csv").read_bytes()
    assert len(table) == len((tmp_path / "cli" / "plan.csv").read_text().splitlines()) - 1
    assert table.attrs["table"] == (tmp_path / "cli" / "plan.txt").read_text()
    # A dict scenario plans the same as its file.
    again = moesim.plan(PLAN_SCENARIO, max_gpus=2, finalists=2, jobs=1)
    assert again.equals(table)
    with pytest.raises(moesim.ScenarioError, match="--objective"):
        moesim.plan(scenario, objective="fastest", max_gpus=2)


def test_guideline_gives_the_cli_decisions(tmp_path):
    options = ["--skewness", "1.5,3.0", "--bandwidth-GBps", "100", "--accuracies", "0.8,1.0", "--batches", "1",
               "--warmup-batches", "0", "--jobs", "1"]
    cli("guideline", "--model", "mixtral-8x7b", "--hardware", "dgx-a100", "-q", "--out", tmp_path / "g.csv", *options)
    table = moesim.guideline("mixtral-8x7b", "dgx-a100", skewness=[1.5, 3.0], bandwidth_GBps=100,
                             accuracies=[0.8, 1.0], batches=1, warmup_batches=0, jobs=1)
    import pandas
    assert table.equals(pandas.read_csv(tmp_path / "g.csv"))
    assert len(table.index) > 0
    with pytest.raises(moesim.ScenarioError, match="unknown"):
        moesim.guideline("no-such-model", "dgx-a100")


@pytest.mark.parametrize("op", ["dispatch", "combine"])
def test_deepep_cost_is_the_cli_json(op):
    args = ["--hardware", "dgx-h100", "--tokens", "4096", "--hidden", "7168", "--top-k", "8", "--experts", "256",
            "--kernel", "deepep-normal"]
    expected = json.loads(cli("cost", op, *args, "--json").stdout)
    got = getattr(moesim.cost, op)("dgx-h100", tokens=4096, hidden=7168, top_k=8, experts=256, kernel="deepep-normal")
    assert got == expected
    with pytest.raises(moesim.ScenarioError):
        moesim.cost.dispatch("no-such-cluster", tokens=1, hidden=128, top_k=1, experts=8)
