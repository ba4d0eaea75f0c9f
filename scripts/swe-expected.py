#!/usr/bin/env python3
"""Writes fixtures/swe-logs/expected/<log>.json: the status map the OFFICIAL SWE-bench harness gives for
each fixture log, computed by the official code itself.

Usage: swe-expected.py SWEBENCH_CHECKOUT LOG_DIR

For each tag (v4.1.0, v5.0.1) the harness package is extracted with `git archive` into a temp dir and
imported there without running swebench/__init__.py (which needs docker); nothing of it is kept or
committed. For every Python log parser, the map is what the official `grading.get_logs_eval` returns
for the log (markers sliced, whole-log fallback, and in 5.x the suite-ran and exit-code checks), so it
covers the parser function and the way grading feeds it.
"""
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import types
import io

TAGS = ["v4.1.0", "v5.0.1"]
# v4.1.0 picks the parser by repository (log_parsers/python.py MAP_REPO_TO_PARSER_PY) and needs a version
# that exists in constants/python.py MAP_REPO_VERSION_TO_SPECS_PY; v5.x names the parser per row
REPO_FOR_PARSER = {
    "parse_log_pytest": ("pytest-dev/pytest", "8.0"),
    "parse_log_pytest_options": ("psf/requests", "2.0"),
    "parse_log_pytest_v2": ("astropy/astropy", "5.0"),
    "parse_log_seaborn": ("mwaskom/seaborn", "0.12"),
    "parse_log_matplotlib": ("matplotlib/matplotlib", "3.5"),
    "parse_log_django": ("django/django", "4.0"),
    "parse_log_sympy": ("sympy/sympy", "1.12"),
}
VERIFIED_REPOS = ["astropy/astropy", "django/django", "matplotlib/matplotlib", "mwaskom/seaborn",
                  "pallets/flask", "psf/requests", "pydata/xarray", "pylint-dev/pylint", "pytest-dev/pytest",
                  "scikit-learn/scikit-learn", "sphinx-doc/sphinx", "sympy/sympy"]
CHILD = r'''
import json, sys, types
root, tag, logs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
sys.path.insert(0, root)
# packages as bare namespaces: their __init__.py files import docker and friends
for name in ["swebench", "swebench.harness", "swebench.harness.test_spec", "swebench.resources"]:
    m = types.ModuleType(name)
    m.__path__ = [root + "/" + name.replace(".", "/")]
    sys.modules[name] = m
# third-party modules some constants modules import at the top but grading never calls
for name in ["requests", "docker", "unidiff", "datasets", "dotenv", "tqdm", "ghapi", "ghapi.all"]:
    try:
        __import__(name)
    except ImportError:
        stub = types.ModuleType(name)
        stub.__getattr__ = lambda attr: (_ for _ in ()).throw(AttributeError(attr)) if attr.startswith("__") else type(attr, (), {})
        sys.modules[name] = stub
class TestSpec:
    def __init__(self, **kw):
        self.__dict__.update(kw)
if tag == "v4.1.0":
    ts = types.ModuleType("swebench.harness.test_spec.test_spec")
    ts.TestSpec = TestSpec
    sys.modules[ts.__name__] = ts
import swebench.harness.grading as grading
repo_for = json.loads(sys.argv[4])
cases = json.loads(sys.argv[5])
out = {}
resolution = []
for case in cases:
    for eval_type in ["pass_and_fail", "fail_only"]:
        gold = {"FAIL_TO_PASS": case["f2p"], "PASS_TO_PASS": case["p2p"]}
        report = grading.get_eval_tests_report(case["tests"], gold, eval_type=grading.EvalType(eval_type))
        resolution.append({
            "eval_type": eval_type,
            "FAIL_TO_PASS": report["FAIL_TO_PASS"],
            "PASS_TO_PASS": report["PASS_TO_PASS"],
            "resolved": grading.get_resolution_status(report) == "RESOLVED_FULL",
        })
for log in logs:
    maps = {}
    for fn, (repo, version) in repo_for.items():
        spec = TestSpec(instance_id="fixture", repo=repo, version=version, log_parser=fn,
                        eval_type="pass_and_fail", FAIL_TO_PASS=[], PASS_TO_PASS=[])
        status_map, found = grading.get_logs_eval(spec, log)
        maps[fn] = {"found": found, "tests": status_map}
    out[log] = maps
specs = {}
paths = {}
directives = []
if tag == "v4.1.0":
    # what the v4.1.0 eval script runs per repository and version (constants/python.py), and the test
    # directives get_test_directives (test_spec/python.py) takes from a test_patch
    # (and the environment each version is built from: python, packages, pip_packages, pre_install, and
    # where `packages: requirements.txt / environment.yml` are read)
    from swebench.harness.constants.python import (MAP_REPO_VERSION_TO_SPECS_PY, MAP_REPO_TO_REQS_PATHS,
                                                   MAP_REPO_TO_ENV_YML_PATHS)
    from swebench.harness.test_spec.python import get_test_directives
    for repo in json.loads(sys.argv[6]):
        specs[repo] = {
            v: {"test_cmd": s["test_cmd"], "install": s.get("install"), "eval_commands": s.get("eval_commands", []),
                "python": s["python"], "packages": s.get("packages"), "pip_packages": s.get("pip_packages", []),
                "pre_install": s.get("pre_install", [])}
            for v, s in MAP_REPO_VERSION_TO_SPECS_PY[repo].items()
        }
        paths[repo] = {"requirements": MAP_REPO_TO_REQS_PATHS.get(repo, []),
                       "environment_yml": MAP_REPO_TO_ENV_YML_PATHS.get(repo, [])}
    files = ["tests/test_a.py", "tests/data/x.json", "a b/test c.py", "tests/fixtures/data.csv",
             "tests/fixtures/datacsv", "docs/conf.toml", "tests/admin_views/tests.py", "tests/x.yaml",
             "tests/img.png", "setup.cfg", "tests/x.rst", "tox.ini", "tests/y.yml", "t.pkl", "README.md",
             "tests/i18n/locale/fr/django.po"]
    patch = "".join(f"diff --git a/{f} b/{f}\n--- a/{f}\n+++ b/{f}\n@@ -1 +1 @@\n-x\n+y\n" for f in files)
    for repo in ["django/django", "psf/requests", "sympy/sympy"]:
        directives.append({"repo": repo, "test_patch": patch,
                           "directives": get_test_directives({"repo": repo, "test_patch": patch})})
print(json.dumps({"logs": out, "resolution": resolution, "specs": specs, "paths": paths, "directives": directives}))
'''


def resolution_cases(count=300, seed=13):
    """Random status maps and FAIL_TO_PASS / PASS_TO_PASS lists over ids that exercise every rule:
    missing ids, the five statuses and an odd word, truncated parametrized ids (prefix matching)."""
    import random
    rng = random.Random(seed)
    ids = ["a", "b", "c", "t.py::f[x y]", "t.py::f[x z]", "t.py::g[1 2]", "t.py::h[p q]"]
    expected = ids + ["t.py::f[x", "t.py::g[1", "t.py::h[", "t.py::zz["]
    statuses = ["PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL", "XPASS"]
    cases = []
    for _ in range(count):
        tests = {i: rng.choice(statuses) for i in ids if rng.random() < 0.7}
        picks = rng.sample(expected, rng.randint(0, 6))
        cut = rng.randint(0, len(picks))
        cases.append({"tests": tests, "f2p": picks[:cut], "p2p": picks[cut:]})
    return cases


def main():
    src, log_dir = sys.argv[1], sys.argv[2]
    exp_dir = os.path.join(os.path.dirname(os.path.abspath(log_dir)), "expected")
    os.makedirs(exp_dir, exist_ok=True)
    logs = sorted(os.path.join(log_dir, f) for f in os.listdir(log_dir) if f.endswith(".log"))
    results = {}
    cases = resolution_cases()
    resolution = {"source": "SWE-bench/SWE-bench swebench/harness/grading.py get_eval_tests_report and "
                  "get_resolution_status; run by scripts/swe-expected.py", "cases": cases, "official": {}}
    for tag in TAGS:
        commit = subprocess.check_output(["git", "-C", src, "rev-parse", f"{tag}^{{commit}}"], text=True).strip()
        with tempfile.TemporaryDirectory() as tmp:
            data = subprocess.check_output(["git", "-C", src, "archive", tag, "swebench"])
            tarfile.open(fileobj=io.BytesIO(data)).extractall(tmp)
            raw = json.loads(subprocess.check_output([sys.executable, "-c", CHILD, tmp, tag, json.dumps(logs),
                                                      json.dumps(REPO_FOR_PARSER), json.dumps(cases),
                                                      json.dumps(VERIFIED_REPOS)], text=True))
        if raw["specs"]:
            with open(os.path.join(os.path.dirname(exp_dir), "specs.json"), "w") as f:
                json.dump({"source": "SWE-bench/SWE-bench swebench/harness/constants/python.py "
                           "MAP_REPO_VERSION_TO_SPECS_PY, MAP_REPO_TO_REQS_PATHS, MAP_REPO_TO_ENV_YML_PATHS and "
                           "test_spec/python.py get_test_directives; "
                           "run by scripts/swe-expected.py", "tag": tag, "commit": commit,
                           "specs": raw["specs"], "paths": raw["paths"], "directives": raw["directives"]}, f, indent=1, sort_keys=True)
                f.write("\n")
        resolution["official"][tag] = {"commit": commit, "decisions": raw["resolution"]}
        for log, maps in raw["logs"].items():
            results.setdefault(log, {})[tag] = {"commit": commit, "get_logs_eval": maps}
    with open(os.path.join(os.path.dirname(exp_dir), "resolution.json"), "w") as f:
        # one case / decision per line: small, and diffs stay readable
        compact = lambda v: json.dumps(v, sort_keys=True, separators=(",", ":"))
        f.write('{"source": %s,\n "cases": [\n' % json.dumps(resolution["source"]))
        f.write(",\n".join("  " + compact(c) for c in cases))
        f.write('\n ],\n "official": {\n')
        tags = []
        for tag, v in resolution["official"].items():
            body = ",\n".join("    " + compact(d) for d in v["decisions"])
            tags.append('  "%s": {"commit": "%s", "decisions": [\n%s\n  ]}' % (tag, v["commit"], body))
        f.write(",\n".join(tags))
        f.write("\n }\n}\n")
    for log, by_tag in results.items():
        name = os.path.basename(log)
        doc = {
            "log": name,
            "source": "SWE-bench/SWE-bench swebench/harness/grading.py get_logs_eval with "
            "swebench/harness/log_parsers/python.py parse_log_*; run by scripts/swe-expected.py",
            "official": by_tag,
        }
        with open(os.path.join(exp_dir, name[: -len(".log")] + ".json"), "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True, ensure_ascii=False)
            f.write("\n")


if __name__ == "__main__":
    main()
