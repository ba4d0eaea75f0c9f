"""NeMo Gym launcher for `polar gym` (standard library plus PyYAML, which NeMo Gym itself depends on).

NeMo Gym starts an agent server as `python app.py` in this folder with its merged config in
NEMO_GYM_CONFIG_DICT (YAML) and this server's top-level key in NEMO_GYM_CONFIG_PATH. This launcher
reads the server's block (host, port, and the `polar:` options of examples/nemo-gym/polar_swe.yaml)
and replaces itself with `polar gym`, which serves /run, /v1/responses and /aggregate_metrics there.
"""
import os
import sys

import yaml


def main() -> None:
    config = yaml.safe_load(os.environ["NEMO_GYM_CONFIG_DICT"])
    top = config[os.environ["NEMO_GYM_CONFIG_PATH"]]
    server = next(iter(top["responses_api_agents"].values()))
    polar = dict(server.get("polar") or {})
    argv = list(polar.pop("command", ["npx", "polar"])) + ["gym"]
    argv += ["--host", str(server.get("host", "127.0.0.1")), "--port", str(server["port"])]
    if polar.pop("allow_unsandboxed", False):
        argv.append("--allow-unsandboxed")
    for key, value in polar.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        argv += [flag] if value is True else [flag, str(value)]
    sys.stdout.flush()
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main()
