"""NeMo Gym launcher for `polar gym`.

NeMo Gym starts an agent server as `python app.py` in this folder, inside a venv it builds from this
folder's requirements.txt (nemo_gym/cli/setup_command.py: a server folder without requirements.txt or
pyproject.toml is refused), with its merged config in NEMO_GYM_CONFIG_DICT (YAML, interpolations such as
`${policy_base_url}` not yet resolved) and this server's top-level key in NEMO_GYM_CONFIG_PATH
(nemo_gym/cli/env.py, RunHelper.start). This launcher resolves the config as NeMo Gym's servers do
(OmegaConf, nemo_gym/server_utils.py `load_config_from_global_config`), reads the server's block (host,
port, and the `polar:` options of examples/nemo-gym/polar_swe.yaml) and replaces itself with
`polar gym`, which serves GET /, /run, /v1/responses and /aggregate_metrics there.

- `backend_url` may be a list (NeMo RL's `policy_base_url`, one URL per generation server): it becomes
  one comma-separated --backend-url, and polar spreads the rollouts over the servers.
- `dry_run: true` (NeMo Gym's global flag) runs `polar gym --dry-run`: the start-up checks, then exit 0,
  as NeMo Gym's own servers return right after theirs (server_utils.py, run_webserver).
"""
import json
import os


def polar_argv(config: dict, path: str) -> list:
    """The `polar gym` command line for the server block at `path` of a resolved NeMo Gym config."""
    top = config[path]
    server = next(iter(next(iter(top.values())).values()))
    polar = dict(server.get("polar") or {})
    argv = [str(a) for a in polar.pop("command", ["polar"])] + ["gym"]
    argv += ["--host", str(server.get("host") or "127.0.0.1"), "--port", str(server["port"])]
    if config.get("dry_run"):
        argv.append("--dry-run")
    for key, value in polar.items():
        if value is None or value is False:
            continue
        if isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        elif isinstance(value, dict):
            value = json.dumps(value)
        flag = "--" + key.replace("_", "-")
        argv += [flag] if value is True else [flag, str(value)]
    return argv


def main() -> None:
    from omegaconf import OmegaConf  # NeMo Gym's own config library, installed in this server's venv

    config = OmegaConf.to_container(OmegaConf.create(os.environ["NEMO_GYM_CONFIG_DICT"]), resolve=True)
    argv = polar_argv(config, os.environ["NEMO_GYM_CONFIG_PATH"])
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main()
