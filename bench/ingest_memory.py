"""Benchmark: time and peak memory of `ragsql ingest` of one large text document.

    python bench/ingest_memory.py [--mb 50] [--language en|zh] [--keep]

Writes one text file of the given size (sentences of words drawn from a fixed vocabulary, paragraphs of 3-8
sentences; Chinese: sentences of common characters), then runs `python -m ragsql ingest FILE --corpus ...`
in a child process against a scratch database (ragsql_bench_memory on RAGSQL_DATABASE_URL's server, else the
embedded one; dropped first). Reports the wall time, the child's peak RSS (getrusage of the waited child) and,
when the server runs on this machine, the peak RSS (VmHWM) of the server backend serving the ingest, sampled
every 0.2 s. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.trees import scratch_database  # noqa: E402
from ragsql import db  # noqa: E402

DBNAME = "ragsql_bench_memory"
_ZH = (
    "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种"
    "面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本"
    "去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比"
    "或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总"
    "次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做"
    "必战先回则任取据处理府研"
)


def write_text(path: Path, megabytes: float, language: str, seed: int = 7) -> int:
    """Write about `megabytes` MB of UTF-8 text in paragraphs; returns its size in bytes."""
    rng = random.Random(seed)
    words = ["".join(rng.choice("etaoinshrdlucmfwypvbgkqjxz") for _ in range(rng.randint(2, 10))) for _ in range(8000)]
    target = int(megabytes * 1_000_000)
    written = 0
    with open(path, "w", encoding="utf-8") as out:
        while written < target:
            sentences = []
            for _ in range(rng.randint(3, 8)):
                if language == "zh":
                    sentences.append("".join(rng.choice(_ZH) for _ in range(rng.randint(8, 30))) + "。")
                else:
                    sentence = " ".join(rng.choice(words) for _ in range(rng.randint(6, 20)))
                    sentences.append(sentence.capitalize() + ".")
            paragraph = ("" if language == "zh" else " ").join(sentences) + "\n\n"
            out.write(paragraph)
            written += len(paragraph.encode("utf-8"))
    return written


def _vmhwm_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def watch_backends(url: str, stop: threading.Event, peak: dict) -> None:
    """Record the largest VmHWM of any client backend of the bench database other than this watcher."""
    with psycopg.connect(url, autocommit=True) as conn:
        while not stop.wait(0.2):
            pids = [
                r[0]
                for r in conn.execute(
                    "select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() "
                    "and backend_type = 'client backend'"
                )
            ]
            for pid in pids:
                kib = _vmhwm_kib(pid)
                if kib is not None:
                    peak["kib"] = max(peak.get("kib", 0), kib)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=50.0, help="size of the document in MB (default 50)")
    parser.add_argument("--language", choices=("en", "zh"), default="en")
    parser.add_argument("--keep", action="store_true", help="keep the bench database")
    parser.add_argument("--dbname", default=DBNAME, help=f"the bench database, dropped first (default {DBNAME})")
    args = parser.parse_args()
    url = scratch_database(args.dbname, installed=True)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"big-{args.language}.txt"
        size = write_text(path, args.mb, args.language)
        env = dict(os.environ, RAGSQL_DATABASE_URL=url, PYTHONPATH=str(ROOT))
        for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "RAGSQL_JUDGE_BASE_URL", "RAGSQL_JUDGE_API_KEY"):
            env.pop(var, None)
        stop, backend = threading.Event(), {}
        watcher = threading.Thread(target=watch_backends, args=(url, stop, backend), daemon=True)
        watcher.start()
        started = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-m", "ragsql", "ingest", str(path), "--corpus", "big"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        out, err = child.communicate()
        seconds = time.perf_counter() - started
        stop.set()
        watcher.join()
    rusage = resource.getrusage(resource.RUSAGE_CHILDREN)  # the ingest is the only child waited for
    with psycopg.connect(url) as conn:
        chunks = conn.execute("select count(*) from ragsql.chunk").fetchone()[0]
    if not args.keep:
        with psycopg.connect(db.database_url(), autocommit=True) as admin:
            admin.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(args.dbname)))
    result = {
        "document_bytes": size,
        "language": args.language,
        "exit": child.returncode,
        "seconds": round(seconds, 1),
        "chunks": chunks,
        "client_peak_rss_mb": round(rusage.ru_maxrss / 1024, 1),
        "backend_peak_rss_mb": round(backend["kib"] / 1024, 1) if "kib" in backend else None,
        "stderr_tail": err.strip().splitlines()[-3:],
    }
    print(json.dumps(result, indent=2))
    return 0 if child.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
