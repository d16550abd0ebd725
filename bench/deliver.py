"""Deliver composed digests to a local SMTP sink: one reused connection against a new one per message.

    .venv/bin/python bench/deliver.py [--messages 5000] [--baseline 5000] [--smtp-sink PATH] [--dkim-only]

The messages (generated profiles over the seed papers, as in bench/render.py) are composed before
any clock starts; what is timed is `SmtpTransport.send` for each, the real transport, against:
  aiosmtpd       — bench/sink.py in its own process, plain SMTP;
  aiosmtpd+tls   — the same with STARTTLS required (a certificate made for the run);
  smtp-sink      — Postfix's C sink, where installed (`smtp-sink` on PATH, or --smtp-sink).
Each runs twice: `reuse` (one connection, as `digest send` does) and `per_message` (the baseline,
`messages_per_connection = 1`: a new connection, and TLS handshake, for every message). With TLS
a third run turns TCP_NODELAY off, to show the stall it prevents. Also measured: the two send-log
commits each digest costs, and the CPU time of a DKIM signature for each signer (dkimpy as before,
OpenSSL rsa-sha256 as `digest` signs now, Ed25519 alone, RSA with Ed25519 beside it; `--dkim-only`
measures just these), with each one's speedup over dkimpy in the same run. The last lines are
`name: value` figures for plain aiosmtpd; `speedup` is reuse / per_message in messages per second.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from digest import daily  # noqa: E402
from digest.app import App  # noqa: E402
from digest.config import build_config  # noqa: E402
from digest.delivery import smtp  # noqa: E402
from digest.delivery.dkim import SIGNED_HEADERS, DkimSigner, Signature  # noqa: E402
from digest.delivery.dkim_keys import load_signing_key  # noqa: E402
from digest.delivery.smtp import SmtpSettings, SmtpTransport  # noqa: E402
from digest.store import Store  # noqa: E402

_spec = importlib.util.spec_from_file_location("bench_render", ROOT / "bench" / "render.py")
bench_render = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(bench_render)  # type: ignore[union-attr]
DAY = bench_render.DAY
Messages = list[tuple[str, bytes]]


def compose(app: App, count: int) -> Messages:
    """`count` finished digests (recipient, bytes) for generated subscribers."""
    pool = app.composer.pool(DAY)
    return [(s.email, app.composer.compose(s, DAY, pool, received=set()).message.as_bytes())
            for s in bench_render.make_subscribers(count)]


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def running(command: list[str], port: int, env: dict[str, str] | None = None) -> Iterator[None]:
    """Run a sink process until the block ends, once its port accepts connections."""
    import socket

    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"sink {command[0]} did not start")
            time.sleep(0.05)
        yield
    finally:
        proc.terminate()
        proc.wait(10)


class Meter:
    """One transport and the wall and CPU time spent in its `send` calls."""

    def __init__(self, settings: SmtpSettings) -> None:
        self.transport = SmtpTransport(settings, "digest@example.org")
        self.wall = self.cpu = 0.0
        self.sent = 0

    def send(self, messages: Messages) -> None:
        cpu, wall = time.process_time(), time.perf_counter()
        for recipient, data in messages:
            self.transport.send(data, recipient, DAY)
        self.wall += time.perf_counter() - wall
        self.cpu += time.process_time() - cpu
        self.sent += len(messages)

    def close(self) -> None:
        self.transport.close()

    @property
    def rate(self) -> float:
        return self.sent / self.wall

    @property
    def cpu_ms(self) -> float:
        return self.cpu * 1000 / self.sent


def compare(name: str, settings: SmtpSettings, messages: Messages, baseline: int, rounds: int) -> dict[str, float]:
    """Reuse against a new connection per message, in alternating rounds so that load changes hit both."""
    reuse = Meter(replace(settings, messages_per_connection=0))
    fresh = Meter(replace(settings, messages_per_connection=1))
    for i in range(rounds):
        daily.send(reuse, messages[i::rounds])
        fresh.send(messages[:baseline][i::rounds])
    reuse.close()
    fresh.close()
    print(f"{name}: reuse {reuse.rate:.0f} msg/s over {reuse.mailer.transport.connections} connection, "
          f"sender CPU {reuse.cpu_ms:.3f} ms/msg; new connection per message {fresh.rate:.0f} msg/s "
          f"({fresh.cpu_ms:.3f} ms/msg); {reuse.rate / fresh.rate:.1f}x")
    return {"reuse": reuse.rate, "per_message": fresh.rate, "cpu": reuse.cpu_ms}


def without_nodelay(settings: SmtpSettings, messages: Messages) -> float:
    """Messages per second over one TLS connection with Nagle left on (what `smtp._nodelay` prevents)."""
    keep, smtp._nodelay = smtp._nodelay, lambda sock: sock  # type: ignore[assignment]
    try:
        meter = Meter(replace(settings, messages_per_connection=0))
        daily.send(meter, messages)
        meter.close()
        return meter.rate
    finally:
        smtp._nodelay = keep


def dkim_ms(messages: Messages, rounds: int = 3) -> dict[str, float]:
    """CPU milliseconds to DKIM-sign one message, per signer, measured in alternating rounds.

    dkimpy as `digest` signed before (`dkim.sign`, RSA on Python integers), the OpenSSL rsa-sha256
    signer, Ed25519 alone, and RSA with Ed25519 beside it; keys made for the run (RSA-2048).
    """
    import dkim
    from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

    pem = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    ed_pem = ed25519.Ed25519PrivateKey.generate().private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    rsa_sig = Signature("mail", "example.org", load_signing_key(pem, "rsa-sha256", "bench key"))
    ed_sig = Signature("ed", "example.org", load_signing_key(ed_pem, "ed25519-sha256", "bench key"))
    headers = [h.encode() for h in SIGNED_HEADERS]

    def dkimpy(data: bytes) -> bytes:
        return dkim.sign(data, b"mail", b"example.org", pem, canonicalize=(b"relaxed", b"relaxed"),
                         include_headers=headers, linesep=b"\r\n") + data

    signers = {"dkimpy": dkimpy, "openssl_rsa": DkimSigner([rsa_sig]), "ed25519": DkimSigner([ed_sig]),
               "rsa_and_ed25519": DkimSigner([rsa_sig, ed_sig])}
    sample = [data for _, data in messages[:200]]
    spent = dict.fromkeys(signers, 0.0)
    for _ in range(rounds):
        for name, sign in signers.items():
            start = time.process_time()
            for data in sample:
                sign(data)
            spent[name] += time.process_time() - start
    return {name: seconds * 1000 / (len(sample) * rounds) for name, seconds in spent.items()}


def report_dkim(ms: dict[str, float]) -> None:
    base = ms["dkimpy"]
    print(f"dkim: dkimpy rsa-sha256 {base:.3f} ms/msg; OpenSSL rsa-sha256 {ms['openssl_rsa']:.3f} ms "
          f"({base / ms['openssl_rsa']:.1f}x); ed25519-sha256 {ms['ed25519']:.3f} ms ({base / ms['ed25519']:.1f}x); "
          f"rsa-sha256 + ed25519-sha256 {ms['rsa_and_ed25519']:.3f} ms ({base / ms['rsa_and_ed25519']:.1f}x)")
    print(f"dkim_sign_ms_per_message: {ms['openssl_rsa']:.3f}")
    print(f"dkim_dkimpy_ms_per_message: {base:.3f}")
    print(f"dkim_ed25519_ms_per_message: {ms['ed25519']:.3f}")
    print(f"dkim_rsa_and_ed25519_ms_per_message: {ms['rsa_and_ed25519']:.3f}")
    print(f"dkim_speedup_openssl_rsa: {base / ms['openssl_rsa']:.1f}")
    print(f"dkim_speedup_ed25519: {base / ms['ed25519']:.1f}")


def send_log_ms(folder: Path, count: int = 500) -> float:
    """Wall milliseconds per digest for its two committed send-log steps (pending, then sent)."""
    store = Store(f"sqlite:///{folder / 'log.db'}")
    start = time.perf_counter()
    for i in range(count):
        store.mark_pending(f"r{i}@example.org", DAY, f"<{i}@example.org>", "smtp")
        store.mark_sent(f"r{i}@example.org", DAY, [])
    store.close()
    return (time.perf_counter() - start) * 1000 / count


def tls_files(folder: Path) -> tuple[Path, Path, Path]:
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    paths = folder / "cert.pem", folder / "key.pem", folder / "ca.pem"
    cert.cert_chain_pems[0].write_to_path(str(paths[0]))
    cert.private_key_pem.write_to_path(str(paths[1]))
    ca.cert_pem.write_to_path(str(paths[2]))
    return paths


def find_smtp_sink(given: str | None) -> str | None:
    found = given or shutil.which("smtp-sink")
    return found or ("/usr/sbin/smtp-sink" if Path("/usr/sbin/smtp-sink").exists() else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--baseline", type=int, default=5000, help="messages sent one connection each")
    parser.add_argument("--rounds", type=int, default=5, help="alternations of reuse and baseline")
    parser.add_argument("--nagle", type=int, default=200, help="messages for the TCP_NODELAY-off run")
    parser.add_argument("--smtp-sink", help="Postfix's smtp-sink (default: from PATH or /usr/sbin)")
    parser.add_argument("--dkim-only", action="store_true", help="measure only the DKIM signers")
    args = parser.parse_args()
    baseline = min(args.baseline, args.messages)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        app = App(build_config({"store": {"url": "sqlite:///bench.db"}}, base=folder))
        app.ingest([ROOT / "seeds"], seen_on=DAY)
        messages = compose(app, args.messages)
        app.close()
        size = sum(len(d) for _, d in messages) / len(messages) / 1024
        print(f"{len(messages)} digests, {size:.1f} KiB each; sinks in their own processes on 127.0.0.1")
        if args.dkim_only:
            report_dkim(dkim_ms(messages))
            return
        sink = [sys.executable, str(ROOT / "bench" / "sink.py")]
        port = free_port()
        with running([*sink, str(port)], port):
            plain = compare("aiosmtpd", SmtpSettings("127.0.0.1", port, "none"), messages, baseline, args.rounds)
        cert, key, ca = tls_files(folder)
        port = free_port()
        with running([*sink, str(port), str(cert), str(key)], port):
            secure = SmtpSettings("127.0.0.1", port, "starttls", ca_file=str(ca))
            compare("aiosmtpd+tls", secure, messages, baseline, args.rounds)
            nagle = without_nodelay(secure, messages[: args.nagle])
            print(f"aiosmtpd+tls, TCP_NODELAY off: reuse {nagle:.0f} msg/s")
        found = find_smtp_sink(args.smtp_sink)
        if found:
            port = free_port()
            with running([found, "-u", "nobody", f"127.0.0.1:{port}", "256"], port):
                compare("smtp-sink", SmtpSettings("127.0.0.1", port, "none"), messages, baseline, args.rounds)
        else:
            print("smtp-sink: not installed (Postfix); skipped")
        report_dkim(dkim_ms(messages))
        print(f"send_log_ms_per_digest: {send_log_ms(folder):.2f}")
    print(f"reuse_messages_per_second: {plain['reuse']:.1f}")
    print(f"per_message_messages_per_second: {plain['per_message']:.1f}")
    print(f"sender_cpu_ms_per_message: {plain['cpu']:.3f}")
    print(f"speedup: {plain['reuse'] / plain['per_message']:.1f}")


if __name__ == "__main__":
    main()
