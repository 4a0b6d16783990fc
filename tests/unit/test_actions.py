"""Shell command or prose, and command signatures (shared by recommend and lessons)."""

from __future__ import annotations

import pytest

from mimir_core.search.actions import command_signature, looks_like_command

COMMANDS = [
    "pytest tests/integration",
    "alembic upgrade head && pytest tests/integration",
    "docker buildx build --platform linux/amd64 .",
    "git commit -m 'fix the flaky test'",  # function words inside quotes do not count
    "npm install --legacy-peer-deps",
    "terraform apply -lock=false -auto-approve",
    "sed -i 's/a/b/' setup.cfg",
    "ls",
]
PROSE = [
    # sentences about commands, from the labelled set: they used to pass for commands
    "reset poetry.lock to the upstream version, ran poetry lock --no-update, git add",
    "exported REQUESTS_CA_BUNDLE=/etc/ssl/certs/acme-root-ca.pem",
    "kept our side with git checkout --ours poetry.lock",
    "re-ran with -lock-timeout=10m",
    "attached a policy allowing s3:PutObject on arn:aws:s3:::acme-data-exports/daily/*",
    "ajouté l'origine https://shop.example.fr à allow_origins du CORSMiddleware",
    "in VS Code den Interpreter auf .venv/bin/python umgestellt",
    "ran `alembic upgrade head` first",
]


@pytest.mark.parametrize("action", COMMANDS)
def test_commands_are_commands(action: str) -> None:
    assert looks_like_command(action)
    assert command_signature(action)


@pytest.mark.parametrize("action", PROSE)
def test_sentences_about_commands_are_prose(action: str) -> None:
    assert not looks_like_command(action)
    assert command_signature(action) is None


def test_signatures_name_tools_subcommands_and_long_flags() -> None:
    assert (
        command_signature("alembic upgrade head && pytest tests/x -x") == "alembic pytest upgrade"
    )
    assert command_signature("pytest tests/integration") == "pytest"
    assert command_signature("pytest  tests/integration -x") == "pytest"
    assert command_signature("docker build .") != command_signature(
        "docker buildx build --platform linux/amd64 ."
    )
