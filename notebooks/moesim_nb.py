"""Set-up shared by moesim's notebooks: where the data and plots go, and how moesim is run.

Each notebook locates the repository itself (env MOESIM_SOURCE_ROOT, else its own parent folder),
puts ROOT/notebooks on sys.path and calls `setup(ROOT)`. Environment variables:

  MOESIM_BIN               the moesim binary (default ROOT/build/moesim)
  MOESIM_RESULTS_DIR       where the notebooks keep moesim's output (default ROOT/results)
  MOESIM_PLOTS_DIR         where the PNGs go (default RESULTS/plots)
  MOESIM_NOTEBOOK_QUICK=1  small grids, for tests (seconds); data in separate *-quick folders
  MOESIM_NOTEBOOK_REFRESH=1  rerun moesim even where its output is already there

Relative paths in these variables are taken from the repository root. The binary is needed only
when data is missing or a refresh is asked for: existing results plot without a build.
"""

from __future__ import annotations

import os
import shlex
import shutil
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
        ])


def setup(root: Path) -> Config:
    root = Path(root).resolve()
    if not (root / "meson.build").exists() or not (root / "notebooks").is_dir():
        raise FileNotFoundError(
            f"{root} is not the moesim repository (no meson.build and notebooks/ there): "
            "set MOESIM_SOURCE_ROOT to the repository root")
    results = _path_from_env("MOESIM_RESULTS_DIR", root, root / "results")
    return Config(
        root=root,
        moesim=_path_from_env("MOESIM_BIN", root, root / "build" / "moesim"),
        results=results,
        plots=_path_from_env("MOESIM_PLOTS_DIR", root, results / "plots"),
        quick=env_flag("MOESIM_NOTEBOOK_QUICK"),
        refresh=env_flag("MOESIM_NOTEBOOK_REFRESH"),
    )


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


def require_subcommand(cfg: Config, name: str, why: str = "") -> None:
    have = subcommands(cfg)
    if name not in have:
        raise RuntimeError(
            f"{cfg.moesim} has no `{name}` subcommand (it has: {', '.join(have)}). "
            f"Build a moesim that includes `moesim {name}`, or point MOESIM_BIN at one. {why}".strip())


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


def produce(cfg: Config, out: Path, args: list, outputs: list[Path]) -> None:
    """Runs `moesim ARGS` into the folder `out` (emptied first: a sweep resumes from, or refuses,
    an existing directory) unless its outputs are there. A stamp in `out` records the command:
    outputs of another command (other grid, quick vs full) are redone, while outputs without a
    stamp (put there by hand) are used as they are."""
    import json

    args = [str(a) for a in args]
    stamp = out / STAMP
    stale = stamp.exists() and json.loads(stamp.read_text()) != args
    if not needs_run(cfg, *outputs) and not stale:
        print(f"using {', '.join(str(o) for o in outputs)} (MOESIM_NOTEBOOK_REFRESH=1 reruns)")
        return
    require_binary(cfg)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    run_moesim(cfg, args)
    missing = [str(o) for o in outputs if not Path(o).exists()]
    if missing:
        raise RuntimeError(f"moesim {args[0]} succeeded but did not write {missing}")
    stamp.write_text(json.dumps(args))


def sweep(cfg: Config, scenario: str, out: Path, grid: list[str], sets: list[str]) -> Path:
    """`moesim sweep SCENARIO --grid ... --set ... --out OUT`; returns OUT/results.csv."""
    args = ["sweep", scenario, "--out", out]
    for g in grid:
        args += ["--grid", g]
    for s in sets:
        args += ["--set", s]
    produce(cfg, out, args, [out / "results.csv", out / "results.jsonl"])
    return out / "results.csv"


def resolved_scenario(cfg: Config, scenario: str, sets: list[str], out: Path) -> dict:
    """The fully resolved scenario (presets expanded: model and hardware names, batch) that
    `moesim run` writes next to result.json."""
    import yaml  # python3-yaml

    args = ["run", scenario, "--out", out, "-q"]
    for s in sets:
        args += ["--set", s]
    resolved = out / "scenario.resolved.yaml"
    produce(cfg, out, args, [resolved])
    with open(resolved) as f:
        return yaml.safe_load(f)


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
