"""Set-up shared by moesim's notebooks: where the data and plots go, and how moesim is run.

Each notebook locates the repository itself (env MOESIM_SOURCE_ROOT, else its own parent folder),
puts ROOT/notebooks on sys.path and calls `setup(ROOT)`. Environment variables:

  MOESIM_BIN               the moesim binary (default ROOT/build/moesim)
  MOESIM_RESULTS_DIR       where the notebooks keep moesim's output (default ROOT/results)
  MOESIM_PLOTS_DIR         where the PNGs go (default RESULTS/plots)
  MOESIM_NOTEBOOK_QUICK=1  small grids, for tests (seconds); data in separate *-quick folders
  MOESIM_NOTEBOOK_REFRESH=1  rerun moesim even where its output is already there

Relative paths in these variables are taken from the repository root. The binary is needed only
when data is missing or a refresh is asked for: existing results plot without a build. Sweeps and
runs go through the Python module (`import moesim`, from ROOT/python and the extension built
beside the binary) when it is built, else through the binary; plans and guidelines, which the
module does not offer yet, always run the binary.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pandas as pd


def env_flag(name: str) -> bool:
    """True when the variable is set to anything but empty, 0, false or no."""
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def _path_from_env(name: str, root: Path, default: Path) -> Path:
    value = os.environ.get(name)
    if not value:
        return default
    p = Path(value).expanduser()
    return (p if p.is_absolute() else root / p).resolve()


@dataclass
class Config:
    root: Path
    moesim: Path
    results: Path
    plots: Path
    quick: bool
    refresh: bool
    module: object = None  # the `moesim` Python module when it is built: sweeps and runs go through it


    def data_dir(self, name: str) -> Path:
        """RESULTS/name, or RESULTS/name-quick in quick mode (a sweep refuses a directory that
        holds another grid, so quick and full data never share one)."""
        return self.results / (name + "-quick" if self.quick else name)

    def plot_path(self, name: str) -> Path:
        self.plots.mkdir(parents=True, exist_ok=True)
        return self.plots / name

    def describe(self) -> str:
        return "\n".join([
            f"repository : {self.root}",
            f"moesim     : {self.moesim}" + ("" if self.moesim.exists() else "  (not built)"),
            f"results    : {self.results}",
            f"plots      : {self.plots}",
            f"mode       : {'quick' if self.quick else 'full'}{', refresh' if self.refresh else ''}",
            f"runs       : {'in-process (import moesim)' if self.module is not None else 'the moesim binary'}",
        ])


def setup(root: Path) -> Config:
    root = Path(root).resolve()
    if not (root / "meson.build").exists() or not (root / "notebooks").is_dir():
        raise FileNotFoundError(
            f"{root} is not the moesim repository (no meson.build and notebooks/ there): "
            "set MOESIM_SOURCE_ROOT to the repository root")
    results = _path_from_env("MOESIM_RESULTS_DIR", root, root / "results")
    moesim = _path_from_env("MOESIM_BIN", root, root / "build" / "moesim")
    return Config(
        root=root,
        moesim=moesim,
        results=results,
        plots=_path_from_env("MOESIM_PLOTS_DIR", root, results / "plots"),
        quick=env_flag("MOESIM_NOTEBOOK_QUICK"),
        refresh=env_flag("MOESIM_NOTEBOOK_REFRESH"),
        module=_import_module(root, moesim),
    )


def _import_module(root: Path, binary: Path):
    """`import moesim` from the package in ROOT/python and the extension built beside the binary
    (BUILD/python); None when it is not built (no pybind11), and the CLI is used instead."""
    import sys

    for path in (root / "python", binary.parent / "python"):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
    try:
        import moesim
    except ImportError:
        return None
    return moesim


def require_binary(cfg: Config) -> Path:
    if not (cfg.moesim.is_file() and os.access(cfg.moesim, os.X_OK)):
        raise FileNotFoundError(
            f"moesim binary not found at {cfg.moesim}: build it (`make build`) or set MOESIM_BIN")
    return cfg.moesim


def subcommands(cfg: Config) -> list[str]:
    """The subcommands `moesim --help` lists."""
    out = subprocess.run([str(require_binary(cfg)), "--help"], capture_output=True, text=True, check=True).stdout
    names, inside = [], False
    for line in out.splitlines():
        if line.startswith("Subcommands:"):
            inside = True
        elif inside and line.strip():
            names.append(line.split()[0])
    return names


def require_subcommand(cfg: Config, name: str) -> None:
    have = subcommands(cfg)
    if name not in have:
        raise RuntimeError(
            f"{cfg.moesim} has no `{name}` subcommand (it has: {', '.join(have)}): "
            f"build a moesim that includes `moesim {name}` (`make build` on a branch that has it), "
            "or point MOESIM_BIN at one")


def run_moesim(cfg: Config, args: list[str]) -> str:
    """Runs moesim from the repository root; raises with its output when it fails."""
    cmd = [str(require_binary(cfg))] + [str(a) for a in args]
    print("$", shlex.join(cmd), flush=True)
    p = subprocess.run(cmd, cwd=cfg.root, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"moesim exited {p.returncode}: {shlex.join(cmd)}\n{p.stdout}{p.stderr}")
    if p.stdout.strip():
        print(p.stdout.strip())
    return p.stdout


def needs_run(cfg: Config, *outputs: Path) -> bool:
    """True when an output is missing or MOESIM_NOTEBOOK_REFRESH asks for a rerun."""
    return cfg.refresh or not all(Path(o).exists() for o in outputs)


STAMP = ".moesim-command.json"


def _stamp(args: list[str], inputs: list[Path]) -> dict:
    """What produced a folder's data: the command, and the hash of each input file it read."""
    import hashlib

    return {"command": args,
            "inputs": {str(p): hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in inputs}}


def produce(cfg: Config, out: Path, args: list, outputs: list[Path], *, inputs: list[Path] = (),
            also_remove: list[Path] = (), stdout_to: Path | None = None, action=None) -> None:
    """Runs `moesim ARGS` (its outputs in the folder `out`) unless the outputs are there. A stamp
    in `out` records the command and the hashes of its `inputs` (scenario files): outputs of
    another command (another grid, quick vs full) or of an edited scenario are redone, while
    outputs without a stamp (put there by hand) are used as they are. Before a run the outputs
    and `also_remove` are deleted (a sweep resumes from, or refuses, an existing directory).
    `stdout_to` keeps what moesim printed. `action` (returning the text to keep) produces the
    outputs in-process instead of running the CLI; `args` then only name what it does."""
    import json

    args = [str(a) for a in args]
    inputs = [cfg.root / p for p in inputs]
    stamp = out / STAMP
    stale = stamp.exists() and json.loads(stamp.read_text()) != _stamp(args, inputs)
    if not needs_run(cfg, *outputs) and not stale:
        print(f"using {', '.join(str(o) for o in outputs)} (MOESIM_NOTEBOOK_REFRESH=1 reruns)")
        return
    if action is None:
        require_subcommand(cfg, args[0])
    for f in [stamp, *outputs, *also_remove]:
        Path(f).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    stdout = run_moesim(cfg, args) if action is None else action()
    if stdout_to is not None:
        Path(stdout_to).write_text(stdout)
    missing = [str(o) for o in outputs if not Path(o).exists()]
    if missing:
        raise RuntimeError(f"moesim {args[0]} succeeded but did not write {missing}")
    stamp.write_text(json.dumps(_stamp(args, inputs), indent=1))


def sweep(cfg: Config, scenario: str, out: Path, grid: list[str], sets: list[str],
          zips: list[str] = ()) -> Path:
    """`moesim sweep SCENARIO --grid ... --zip ... --set ... --out OUT`; returns OUT/results.csv.
    The `zips` lists advance together (one more dimension, innermost)."""
    args = ["sweep", scenario, "--out", out]
    for g in grid:
        args += ["--grid", g]
    for z in zips:
        args += ["--zip", z]
    for s in sets:
        args += ["--set", s]
    if cfg.module is not None:
        # In-process: the same points and metrics as the CLI's sweep, as a DataFrame.
        def action():
            print(f"moesim.sweep({scenario!r}, grid={list(grid)}, zip={list(zips)}, set={list(sets)})", flush=True)
            table = cfg.module.sweep(cfg.root / scenario, list(grid), zip=list(zips), set=list(sets))
            table.to_csv(out / "results.csv", index=False)
            with open(out / "results.jsonl", "w") as f:
                for point in table.attrs["points"]:
                    f.write(json.dumps(point) + "\n")
            return ""
        produce(cfg, out, ["python"] + args, [out / "results.csv", out / "results.jsonl"], inputs=[scenario],
                action=action)
        return out / "results.csv"
    produce(cfg, out, args, [out / "results.csv", out / "results.jsonl"], inputs=[scenario],
            also_remove=[out / "sweep.json"])
    return out / "results.csv"


def resolved_scenario(cfg: Config, scenario: str, sets: list[str], out: Path) -> dict:
    """The fully resolved scenario (presets expanded: model and hardware names, batch) that
    `moesim run` writes next to result.json."""
    import yaml  # python3-yaml

    args = ["run", scenario, "--out", out, "-q"]
    for s in sets:
        args += ["--set", s]
    resolved = out / "scenario.resolved.yaml"
    if cfg.module is not None:
        def action():
            cfg.module.run(cfg.root / scenario, set=list(sets), out=out)
            return ""
        produce(cfg, out, ["python"] + args, [resolved], inputs=[scenario], action=action)
    else:
        produce(cfg, out, args, [resolved], inputs=[scenario])
    with open(resolved) as f:
        return yaml.safe_load(f)


# `moesim guideline` (MoE-GPS §4): the strategies it compares and their colours in every plot.
STRATEGIES = ["none", "distribution-only", "token-to-expert"]
STRATEGY_COLORS = {"none": "#9e9e9e", "distribution-only": "#1f77b4", "token-to-expert": "#ff7f0e"}
GUIDELINE_COLUMNS = ["skewness", "bandwidth_GBps", "none_ms", "distribution_only_ms", "token_to_expert_ms",
                     "best_accuracy", "winner", "distribution_only_saving", "token_to_expert_saving",
                     "saving_difference"]
CURVES_COLUMNS = ["skewness", "bandwidth_GBps", "strategy", "accuracy", "layer_ms", "attention_ms", "ffn_ms",
                  "communication_ms", "overhead_ms", "idle_ms", "prediction_error"]
GUIDELINE_MODEL, GUIDELINE_HARDWARE = "mixtral-8x7b", "hgx-a100-4gpu-nvlink"


def guideline(cfg: Config) -> tuple[pd.DataFrame, pd.DataFrame]:
    """guideline.csv and curves.csv of `moesim guideline` for Mixtral-8x7B on 4x A100 (MoE-GPS's
    set-up), made under RESULTS/guideline/ (guideline-quick/ in quick mode) when missing. The
    guideline and latency_breakdown notebooks share them (one command, so one set of data)."""
    out = cfg.data_dir("guideline")
    table, curves, printed = out / "guideline.csv", out / "curves.csv", out / "decision_map.txt"
    args = ["guideline", "--model", GUIDELINE_MODEL, "--hardware", GUIDELINE_HARDWARE,
            "--out", table, "--curves", curves]
    if cfg.quick:
        args += ["--skewness", "1.0:3.0:1.0", "--bandwidth-GBps", "32,600", "--accuracies", "0.5:1.0:0.25",
                 "--set", "model.layers=2"]
    try:
        produce(cfg, out, args, [table, curves], stdout_to=printed)
    except RuntimeError as e:
        if "no `guideline` subcommand" in str(e):
            raise RuntimeError(f"{e}. Without it, the notebook plots guideline.csv and curves.csv placed "
                               f"in {out} (MOESIM_NOTEBOOK_REFRESH unset)") from None
        raise
    g = read_csv(table, GUIDELINE_COLUMNS)
    c = read_csv(curves, CURVES_COLUMNS)
    for name, df in (("guideline.csv", g), ("curves.csv", c)):
        unknown = set(df["winner" if name == "guideline.csv" else "strategy"]) - set(STRATEGIES)
        if unknown:
            raise ValueError(f"{out / name}: unknown strategies {sorted(unknown)} (expected {STRATEGIES})")
    return g, c


def guideline_setup_text(cfg: Config) -> str:
    """The set-up `moesim guideline` printed as its first line (model, hardware, batch, policy),
    for plot titles; the model and hardware alone when its output is not there."""
    printed = cfg.data_dir("guideline") / "decision_map.txt"
    prefix = "moesim guideline: "
    lines = printed.read_text().splitlines() if printed.exists() else []
    text = lines[0][len(prefix):] if lines and lines[0].startswith(prefix) else \
        f"{GUIDELINE_MODEL} on {GUIDELINE_HARDWARE}"
    return text + (" — quick mode" if cfg.quick else "")


def read_csv(path: Path, columns: list[str]) -> pd.DataFrame:
    """A CSV with at least these columns and one row, or an error that says what is wrong."""
    df = pd.read_csv(path)
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing columns {missing} (has {list(df.columns)})")
    if df.empty:
        raise ValueError(f"{path}: no rows")
    return df


def save(fig, cfg: Config, name: str) -> Path:
    """Writes the figure as a PNG under the plots folder and shows it (inline in Jupyter, embedded
    in an executed notebook) without needing a display."""
    import matplotlib.pyplot as plt
    from IPython.display import Image, display

    path = cfg.plot_path(name)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    print("wrote", path)
    display(Image(filename=str(path)))
    return path
