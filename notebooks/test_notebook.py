"""Executes one notebook headless in quick mode, its data and plots in a temporary directory, and
checks that it wrote the PNGs it is expected to (Meson suite `notebooks`).

  test_notebook.py --moesim BUILD/moesim NOTEBOOK.ipynb EXPECTED.png...
  test_notebook.py --clean DIR                  # DIR/*.ipynb carry no outputs (commit them cleared)

Run it with the interpreter that has nbconvert (Debian's /usr/bin/python3). Exit 77 (skipped)
only when nbconvert is not installed; every other problem fails.
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SKIP = 77


def check_clean(folder):
    """Fails when a notebook in `folder` has outputs or execution counts (commit them cleared)."""
    dirty = []
    notebooks = sorted(Path(folder).glob("*.ipynb"))
    if not notebooks:
        print(f"no notebooks in {folder}", file=sys.stderr)
        return 1
    for path in notebooks:
        nb = json.loads(Path(path).read_text())
        for i, cell in enumerate(nb["cells"]):
            if cell.get("outputs") or cell.get("execution_count") is not None:
                dirty.append(f"{path}: cell {i} has outputs or an execution count")
    print(f"{len(notebooks)} notebooks: {', '.join(p.name for p in notebooks)}")
    for d in dirty:
        print(d, file=sys.stderr)
    if dirty:
        print("clear them (Jupyter: Edit > Clear All Outputs; or /usr/bin/python3 -m nbconvert "
              "--clear-output --inplace NOTEBOOK) before committing", file=sys.stderr)
    return 1 if dirty else 0


def execute(notebook, moesim, expected):
    if importlib.util.find_spec("nbconvert") is None:
        print(f"{sys.executable} has no nbconvert (Debian: apt-get install jupyter-nbconvert; "
              "`make deps` installs it): skipped")
        return SKIP
    notebook = Path(notebook).resolve()
    root = Path(os.environ.get("MOESIM_SOURCE_ROOT") or notebook.parent.parent).resolve()
    with tempfile.TemporaryDirectory(prefix="moesim-notebook-") as tmp:
        tmp = Path(tmp)
        env = dict(os.environ,
                   MOESIM_SOURCE_ROOT=str(root),
                   MOESIM_BIN=str(Path(moesim).resolve()),
                   MOESIM_RESULTS_DIR=str(tmp / "results"),
                   MOESIM_PLOTS_DIR=str(tmp / "plots"),
                   MOESIM_NOTEBOOK_QUICK="1",
                   MOESIM_NOTEBOOK_REFRESH="1",
                   PYDEVD_DISABLE_FILE_VALIDATION="1",
                   JUPYTER_RUNTIME_DIR=str(tmp / "jupyter-runtime"),  # kernel connection files
                   MPLBACKEND="Agg")
        cmd = [sys.executable, "-m", "nbconvert", "--to", "notebook", "--execute",
               "--ExecutePreprocessor.timeout=240", "--output-dir", str(tmp / "executed"), str(notebook)]
        print("$", " ".join(cmd), flush=True)
        start = time.monotonic()
        p = subprocess.run(cmd, env=env, cwd=root)
        print(f"nbconvert exited {p.returncode} after {time.monotonic() - start:.1f} s")
        if p.returncode != 0:
            return 1
        failed = 0
        for name in expected:
            png = tmp / "plots" / name
            if not png.is_file():
                print(f"FAIL: {name} was not written (plots: {sorted(os.listdir(tmp / 'plots'))})")
                failed = 1
            elif png.read_bytes()[:8] != b"\x89PNG\r\n\x1a\n" or png.stat().st_size < 5000:
                print(f"FAIL: {name} is not a PNG with a plot in it ({png.stat().st_size} bytes)")
                failed = 1
            else:
                print(f"ok: {name} ({png.stat().st_size} bytes)")
        return failed


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--moesim", help="the moesim binary")
    ap.add_argument("--clean", action="store_true", help="only check that the notebooks in DIR carry no outputs")
    ap.add_argument("notebook", nargs="+", help="the notebook, then the PNG names it must write; with --clean, DIR")
    args = ap.parse_args()
    if args.clean:
        return check_clean(args.notebook[0])
    if not args.moesim:
        ap.error("--moesim is required to execute a notebook")
    return execute(args.notebook[0], args.moesim, args.notebook[1:])


if __name__ == "__main__":
    sys.exit(main())
