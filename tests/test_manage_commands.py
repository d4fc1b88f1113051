"""Our management commands as the README shows them (issue 18 item 10).

`manage.py help COMMAND` works for every command of ours, in a plain shell too; and every
`manage.py COMMAND` the README shows is one that works when pasted into a plain shell
after `make run`: a command that needs no secret, or the `devstack manage` form that brings
`make run`'s settings and servers (or, for a deployment, `docker compose exec web`).
"""

from __future__ import annotations

import re

import pytest
from django.core.management import get_commands, load_command_class

from tests.conftest import ROOT
from tests.test_newcomer_shell import newcomer

OURS = sorted(
    name for name, app in get_commands().items() if app.split(".")[0] in {"dashboard", "probes"}
)
README = (ROOT / "README.md").read_text()


def test_we_have_commands():
    assert {"backtest_alerts", "load_catalog", "measure", "run_probe"} <= set(OURS)


@pytest.mark.parametrize("name", OURS)
def test_help_formats_for_every_command(name):
    app = get_commands()[name]
    parser = load_command_class(app, name).create_parser("manage.py", name)
    text = parser.format_help()  # argparse expands % in every help string here
    assert text.startswith(f"usage: manage.py {name}")


def test_help_works_in_a_plain_shell_without_a_secret(tmp_path):
    done = newcomer("help", "backtest_alerts", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "% worse" in done.stdout


def test_every_readme_command_line_works_in_a_plain_shell_after_make_run():
    secretless = {"measure", "simulate_provider", "help"}
    for line in README.splitlines():
        for match in re.finditer(r"manage\.py\s+([a-z_]+)", line):
            command = match.group(1)
            # `help` is manage.py's own (ManagementUtility), not a command module.
            assert command in get_commands() or command == "help", line
            prefix = line[: match.start()]
            assert command in secretless or "docker compose exec" in prefix, (
                f"`manage.py {command}` needs make run's settings: show "
                f"`.venv/bin/python -m dashboard.devstack manage {command}` instead ({line!r})"
            )
        for match in re.finditer(r"devstack manage\s+([a-z_]+)", line):
            assert match.group(1) in get_commands() or match.group(1) == "COMMAND", line


def test_the_missing_secret_error_names_the_form_that_works(tmp_path):
    done = newcomer("load_catalog", cwd=tmp_path, INFERWATCH_VAR_DIR=str(tmp_path / "var"))
    assert done.returncode != 0
    assert "SECRET_KEY is not set" in done.stderr
    assert "python -m dashboard.devstack manage COMMAND" in done.stderr
