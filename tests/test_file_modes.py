"""Files only their owner reads: the store (and its -wal and -shm), the sent journal and the outbox are made
0600 / 0700 whatever the umask; such files found open to others are closed to them; a DKIM key file others can
read is refused; an outbox that can take no more (a full disk) stops the run as a failing store does."""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

from digest import daily
from digest.app import App
from digest.config import load_config
from digest.delivery.dkim import DkimSigner
from digest.delivery.handover import OutboxTransport
from digest.errors import ConfigError
from digest.store import Store

from .conftest import DAY, SEEDS, SUBSCRIBERS, cli_env, sample_site
from .smtpd import Recorder, smtp_server

DUE = {"ada@example.org", "alan@example.org", "grace@example.org", "margaret@example.org"}  # on DAY, a Friday


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def settings(folder: Path, *, transport: str, port: int = 25, outbox: str = "outbox") -> Path:
    (folder / "digest.toml").write_text(
        f'[store]\nurl = "sqlite:///digest.db"\n[subscribers]\ndir = "{SUBSCRIBERS}"\n[ingest]\npaths = ["{SEEDS}"]\n'
        f'[select]\nmax_age_days = 0\ntext_model = false\n[dkim]\nrelay_signs = true\n'
        f'[delivery]\ntransport = "{transport}"\noutbox = "{outbox}"\nretry_delay = 0.01\n'
        f'[smtp]\nhost = "127.0.0.1"\nport = {port}\nsecurity = "none"\n')
    return folder / "digest.toml"


def digest(folder: Path, *args: str, umask: int = 0o022) -> subprocess.CompletedProcess[str]:
    """The real `digest` command in `folder`, under `umask`."""
    return subprocess.run([sys.executable, "-m", "digest", *args], cwd=folder, capture_output=True, text=True,
                          timeout=120, env=cli_env(), preexec_fn=lambda: os.umask(umask))


@pytest.mark.slow
@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_the_store_its_wal_and_shm_and_the_sent_journal_are_0600_whatever_the_umask(tmp_path: Path, umask):
    """`digest run` over SMTP in a fresh folder: while the server takes each message, the store, its -wal and
    -shm files and the sender's journal are there and 0600; the store still is after the run."""
    seen: list[dict[str, int]] = []

    def look(_received) -> None:
        found = [tmp_path / "digest.db", tmp_path / "digest.db-wal", tmp_path / "digest.db-shm",
                 *tmp_path.glob("sent-journal.*")]
        seen.append({path.name.removeprefix("digest.").split(".")[0]: mode(path) for path in found if path.exists()})

    with smtp_server(Recorder(on_message=look)) as port:
        settings(tmp_path, transport="smtp", port=port)
        done = digest(tmp_path, "run", "--date", DAY.isoformat(), umask=umask)
    assert done.returncode == 0, done.stderr
    assert len(seen) == 4 and all(s == {"db": 0o600, "db-wal": 0o600, "db-shm": 0o600, "sent-journal": 0o600}
                                  for s in seen), seen
    assert mode(tmp_path / "digest.db") == 0o600


@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_the_outbox_makes_its_folders_0700_and_files_0600_whatever_the_umask(tmp_path: Path, umask):
    """The outbox transport under a permissive umask: the outbox, its date folder and each message private."""
    old = os.umask(umask)
    try:
        OutboxTransport(tmp_path / "site" / "outbox").send(b"Subject: hi\r\n\r\nbody\r\n", "ada@example.org", DAY)
    finally:
        os.umask(old)
    outbox = tmp_path / "site" / "outbox"
    assert [mode(p) for p in (tmp_path / "site", outbox, outbox / DAY.isoformat())] == [0o700] * 3
    assert mode(outbox / DAY.isoformat() / "ada@example.org.eml") == 0o600


def test_store_files_and_an_outbox_open_to_others_are_closed_with_a_warning(tmp_path: Path, caplog):
    """A store made by an earlier version (0644, its -wal and -shm 0666) and an outbox folder of 0755: opened and
    written by this one, each is closed to others (group and world bits taken away), one warning each."""
    db = tmp_path / "digest.db"
    holder = sqlite3.connect(db)  # keeps -wal and -shm in place
    holder.execute("PRAGMA journal_mode=WAL")
    holder.execute("CREATE TABLE t (x)")
    holder.execute("INSERT INTO t VALUES (1)")
    holder.commit()
    for path, was in ((db, 0o644), (tmp_path / "digest.db-wal", 0o666), (tmp_path / "digest.db-shm", 0o664)):
        path.chmod(was)
    (tmp_path / "outbox").mkdir(mode=0o755)
    (tmp_path / "outbox").chmod(0o755)
    with caplog.at_level(logging.WARNING, logger="digest"):
        Store(f"sqlite:///{db}", check_schema=False).close()
        OutboxTransport(tmp_path / "outbox").send(b"Subject: hi\r\n\r\nbody\r\n", "ada@example.org", DAY)
    assert [mode(p) for p in (db, tmp_path / "digest.db-wal", tmp_path / "digest.db-shm")] == [0o600, 0o600, 0o600]
    holder.close()
    assert mode(tmp_path / "outbox") == 0o700
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 4 and all("was open to other users" in w for w in warned), warned
    assert warned[0] == f"the store's file {db} was open to other users (mode 0644): now 0600"


@pytest.fixture
def ed_key(tmp_path: Path) -> Path:
    pem = ed25519.Ed25519PrivateKey.generate().private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    path = tmp_path / "dkim.pem"
    path.write_bytes(pem)
    return path


@pytest.mark.parametrize("was", [0o644, 0o640, 0o604, 0o660, 0o610])
def test_a_dkim_key_file_others_may_open_is_refused_with_the_chmod_to_run(make_config, ed_key: Path, was):
    """As ssh refuses a private key: any permission for the group or others, one line naming the file, its mode
    and the command that fixes it; after that command the key signs."""
    config = make_config(dkim={"selector": "mail", "algorithm": "ed25519-sha256", "key_file": str(ed_key)})
    ed_key.chmod(was)
    with pytest.raises(ConfigError) as refused:
        DkimSigner.from_config(config, {})
    assert str(refused.value).endswith(f"dkim.key_file {ed_key} is open to other users (mode {was:04o}); a "
                                       f"private key must be yours alone: run `chmod 600 {ed_key}`")
    ed_key.chmod(0o600)
    assert DkimSigner.from_config(config, {}) is not None


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_dkim_key_file_of_another_owner_readable_by_the_group_is_accepted(make_config, ed_key: Path):
    """ssh's rule: only a key file of one's own must be private; root's key shared with a group (0640) is read."""
    os.chown(ed_key, 1, 1)
    ed_key.chmod(0o640)
    config = make_config(dkim={"selector": "mail", "algorithm": "ed25519-sha256", "key_file": str(ed_key)})
    assert DkimSigner.from_config(config, {}) is not None


@pytest.mark.slow
def test_an_outbox_that_cannot_be_written_stops_the_run_and_marks_nothing_sent(make_config, tmp_path: Path):
    """The outbox is under a file (as unwritable as a full or read-only disk): the first digest is left pending
    and the run stops, the rest queued, nothing failed or sent; once the outbox works, each digest goes once."""
    (tmp_path / "blocker").write_text("a file where the outbox folder should be")
    app = App(make_config(delivery={"outbox": str(tmp_path / "blocker" / "outbox")}))
    try:
        app.ingest([SEEDS], seen_on=DAY)
        report = daily.send(app, DAY)
        assert "cannot write" in report.halted and "delivery.outbox" in report.halted and not report.ok
        assert report.count("sent") == 0 and report.count("failed") == 0 and report.not_attempted == 3
        assert sorted(r.status for r in app.store.deliveries_on(DAY) if r.subscriber in DUE) == [
            "pending", "queued", "queued", "queued"]
    finally:
        app.close()
    (tmp_path / "blocker").unlink()
    again = App(make_config(delivery={"outbox": str(tmp_path / "blocker" / "outbox")}))
    try:
        assert daily.send(again, DAY).count("sent") == 4
    finally:
        again.close()
    assert {p.stem for p in (tmp_path / "blocker" / "outbox" / DAY.isoformat()).glob("*.eml")} == DUE


def _mount_tmpfs(folder: Path, size: str) -> bool:
    folder.mkdir()
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(folder)],
                          capture_output=True).returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("mount"), reason="mounting a tmpfs needs root")
def test_a_full_outbox_disk_stops_the_run_with_one_line_and_the_next_run_sends_the_rest(tmp_path: Path):
    """The outbox on a 64 KiB tmpfs (room for one digest or two): `digest run` stops at the first message that does
    not fit, exit 1 and one `digest: error:` line saying the disk is full; every digest written is marked sent and
    no other; after room is made the next run sends each of the others once."""
    outbox = tmp_path / "outbox"
    if not _mount_tmpfs(outbox, "64k"):
        pytest.skip("tmpfs cannot be mounted here")
    try:
        settings(tmp_path, transport="outbox")
        full = digest(tmp_path, "run", "--date", DAY.isoformat())
        written = {p.stem for p in (outbox / DAY.isoformat()).glob("*.eml")}
    finally:
        subprocess.run(["umount", str(outbox)], check=True)
    assert full.returncode == 1 and "Traceback" not in full.stderr, full.stderr
    errors = [line for line in full.stderr.splitlines() if line.startswith("digest: error:")]
    assert len(errors) == 1 and "No space left on device" in errors[0] and "delivery.outbox" in errors[0], errors
    app = App(load_config(tmp_path / "digest.toml"))
    try:
        sent = {r.subscriber for r in app.store.deliveries_on(DAY) if r.status == "sent"}
        assert sent == written and 1 <= len(written) < 4
        report = daily.send(app, DAY)
    finally:
        app.close()
    again = Counter(p.stem for p in (outbox / DAY.isoformat()).glob("*.eml"))
    assert report.ok and set(again) == DUE - written and set(again.values()) == {1}


def test_a_store_that_cannot_be_made_is_one_line(tmp_path: Path, capsys):
    """store.url under a regular file: the store file cannot be made, and the command says so in one line."""
    from digest.cli import main

    (tmp_path / "file").write_text("not a folder")
    (tmp_path / "digest.toml").write_text(f'[store]\nurl = "sqlite:///{tmp_path / "file" / "digest.db"}"\n')
    assert main(["--config", str(tmp_path / "digest.toml"), "status"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("digest: error: ") and err.count("\n") == 1 and "cannot be opened" in err, err


@pytest.fixture
def permissive(tmp_path: Path):
    """The process under umask 000 (restored after), the working folder of the commands below."""
    old = os.umask(0o000)
    try:
        yield tmp_path
    finally:
        os.umask(old)


def test_an_export_of_the_subscribers_is_0600_whatever_the_umask(permissive: Path):
    """`digest subscribers export --out` under umask 000 writes the list (every reader's address and interests)
    0600; a file already there open to others is made 0600 as it is written over."""
    from digest.cli import main

    (permissive / "site").mkdir()
    site = sample_site(permissive / "site")
    made, kept = permissive / "list.csv", permissive / "old.csv"
    kept.write_text("an earlier export\n")
    kept.chmod(0o644)
    for out in (made, kept):
        assert main(["--config", str(site / "digest.toml"), "subscribers", "export", "--out", str(out)]) == 0
        assert mode(out) == 0o600 and "ada@example.org" in out.read_text()


def test_a_preview_makes_its_folders_0700_and_files_0600_whatever_the_umask(permissive: Path, capsys):
    """`digest preview --out` under umask 000: the folder it makes, the date's folder and each digest's .html, .txt
    and .eml (a reader's address and picks) are their owner's alone."""
    from digest.cli import main

    (permissive / "site").mkdir()
    site = sample_site(permissive / "site")
    config = ["--config", str(site / "digest.toml")]
    assert main([*config, "ingest", "--date", DAY.isoformat()]) == 0
    out = permissive / "previews" / "june"
    assert main([*config, "preview", "--date", DAY.isoformat(), "--out", str(out),
                 "--subscriber", "ada@example.org"]) == 0
    files = sorted((out / DAY.isoformat()).iterdir())
    assert [p.suffix for p in files] == [".eml", ".html", ".txt"]
    assert [mode(p) for p in (permissive / "previews", out, out / DAY.isoformat())] == [0o700] * 3
    assert [mode(p) for p in files] == [0o600] * 3
    capsys.readouterr()
