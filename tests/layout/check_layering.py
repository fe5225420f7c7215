#!/usr/bin/env python3
"""The include direction the design promises: a folder includes only its own headers and those of
the layers below it, never above or beside it.

    core -> sim -> hardware, models -> calibrate, predictors -> policies -> serving -> app -> python

and inside app/, its rooms:

    scenario -> run -> sweep -> plan -> cli

(`calibrate` reads measurements into hardware profiles; `policies` read predictors' forecasts;
`tests` and the fuzz targets may include anything.) Policies and predictors decide and never
time: none of them turns a number into simulated time itself (us_to_ticks, ms_to_ticks,
seconds_to_ticks); host work goes to the host cost model (hardware/host_cost.hpp). Prints every
violation as FILE:LINE: and exits 1 when there is one.

    check_layering.py SOURCE_ROOT
"""
import pathlib
import re
import sys

LEVEL = {"core": 0, "sim": 1, "hardware": 2, "models": 2, "calibrate": 3, "predictors": 3, "policies": 4,
         "serving": 5, "app": 6, "python": 7}
APP_ROOM = {"scenario": 0, "run": 1, "sweep": 2, "plan": 3, "cli": 4}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/(?:([a-z_]+)/)?')
TIMING = re.compile(r'\b(us_to_ticks|ms_to_ticks|seconds_to_ticks)\s*\(')
DECIDE_ONLY = {"policies", "predictors"}


def violations(root):
    for path in sorted(root.glob("*/**/*.[ch]pp")):
        rel = path.relative_to(root)
        folder = rel.parts[0]
        if folder not in LEVEL:
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            code = line.split("//", 1)[0]
            if folder in DECIDE_ONLY and TIMING.search(code):
                yield f"{rel}:{number}: {folder}/ turns a number into simulated time ({TIMING.search(code).group(1)}); " \
                      "emit host work (hardware/host_cost.hpp) or take the time from hardware/"
            m = INCLUDE.match(line)
            if m and folder == "app" and m.group(1) == "app" and len(rel.parts) > 2:
                room, target_room = rel.parts[1], m.group(2)
                if room in APP_ROOM and target_room in APP_ROOM and APP_ROOM[target_room] > APP_ROOM[room]:
                    yield f"{rel}:{number}: app/{room}/ includes app/{target_room}/, a room above it"
                continue
            if not m or m.group(1) not in LEVEL or m.group(1) == folder:
                continue
            target = m.group(1)
            if LEVEL[target] > LEVEL[folder]:
                yield f"{rel}:{number}: {folder}/ includes {target}/, a layer above it"
            elif LEVEL[target] == LEVEL[folder]:
                yield f"{rel}:{number}: {folder}/ includes {target}/, a layer beside it"


def main():
    root = pathlib.Path(sys.argv[1])
    found = list(violations(root))
    for v in found:
        print(v)
    checked = sum(1 for p in root.glob("*/**/*.[ch]pp") if p.relative_to(root).parts[0] in LEVEL)
    print(f"{checked} files checked, {len(found)} includes against the layering")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
