"""docker/: what can be checked without a Docker engine (the compose file's promises, the Dockerfile, the
build context), and `docker compose config` where a Compose CLI exists."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"


@pytest.fixture(scope="module")
def compose() -> dict:
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load((DOCKER / "compose.yaml").read_text(encoding="utf-8"))


def test_ragsql_waits_for_a_healthy_database(compose):
    """The database has a pg_isready healthcheck and ragsql starts only once it is healthy (and retries)."""
    db, ragsql = compose["services"]["db"], compose["services"]["ragsql"]
    assert "pg_isready" in " ".join(db["healthcheck"]["test"])
    assert ragsql["depends_on"] == {"db": {"condition": "service_healthy"}}
    assert float(ragsql["environment"]["RAGSQL_CONNECT_TIMEOUT"]) > 0
    assert ragsql["environment"]["RAGSQL_DATABASE_URL"].startswith("postgresql://ragsql:ragsql@db:5432/")


def test_the_database_is_published_on_localhost_only(compose):
    for service in compose["services"].values():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), port


def test_the_current_folder_is_ragsqls_working_directory(compose):
    """`docker compose run ragsql import jsonl ./file` reads ./file of the host: $PWD is mounted at the working
    directory."""
    ragsql = compose["services"]["ragsql"]
    assert f"${{PWD}}:{ragsql['working_dir']}" in ragsql["volumes"]
    dockerfile = (DOCKER / "Dockerfile").read_text(encoding="utf-8")
    assert f"WORKDIR {ragsql['working_dir']}" in dockerfile.splitlines()


def test_the_image_has_psql_and_a_small_build_context():
    """postgresql-client is installed; .dockerignore admits only what the Dockerfile copies."""
    dockerfile = (DOCKER / "Dockerfile").read_text(encoding="utf-8")
    assert "apt-get install -y --no-install-recommends postgresql-client" in dockerfile
    copied = {part for line in dockerfile.splitlines() if line.startswith("COPY ") for part in line.split()[1:-1]}
    ignore = [
        line
        for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line and not line.startswith("#")
    ]
    assert ignore[0] == "*" and {p.strip("!/") for p in ignore if p.startswith("!")} == copied


@pytest.mark.skipif(
    shutil.which("docker-compose") is None
    and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode != 0
    if shutil.which("docker")
    else True,
    reason="no Docker Compose CLI here",
)
def test_docker_compose_config_accepts_the_file():  # pragma: no cover - needs a Compose CLI
    command = ["docker-compose"] if shutil.which("docker-compose") else ["docker", "compose"]
    done = subprocess.run(
        [*command, "-f", str(DOCKER / "compose.yaml"), "config", "--quiet"],
        capture_output=True,
        text=True,
        env={"PWD": str(ROOT), "PATH": "/usr/bin:/bin:/usr/local/bin"},
    )
    assert done.returncode == 0, done.stderr
