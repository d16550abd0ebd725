"""Delivery reports and complaints as mail servers write them, for the bounce tests.

Built from the formats' own examples: RFC 3464 (DSN, appendix) and Postfix's bounce (the text
"This is the mail system at host …", a message/delivery-status part and the original's headers),
RFC 5965 (ARF, section 3.1: a feedback report with the original message), and Exim's older plain
bounce with X-Failed-Recipients, which only flufl.bounce's detectors read.
"""

from __future__ import annotations

import mailbox
from pathlib import Path

_DATE = "Fri, 12 Jun 2026 09:00:00 +0000"


def original_headers(to: str, message_id: str, *, return_path: str = "digest@example.org",
                     unsubscribe: str = "", day: str = "2026-06-12") -> str:
    """The headers of one of our digests, as a report quotes them."""
    lines = [f"Return-Path: <{return_path}>", "From: Paper Digest <digest@example.org>", f"To: {to}",
             "Subject: Your papers", f"Message-ID: {message_id}", f"X-Digest-Date: {day}"]
    if unsubscribe:
        lines.append(f"List-Unsubscribe: <{unsubscribe}>")
    return "\r\n".join(lines) + "\r\n"


def postfix_dsn(recipient: str, *, status: str = "5.1.1", action: str = "failed", original: str = "",
                to: str = "digest@example.org", report_id: str = "<20260612090000.A1@mx.example.net>",
                date: str = _DATE, diagnostic: str = "") -> bytes:
    """Postfix's bounce: human text, message/delivery-status, text/rfc822-headers of the original."""
    diagnostic = diagnostic or (f"smtp; 550 {status} <{recipient}>: Recipient address rejected: User unknown"
                                if status.startswith("5") else f"smtp; 452 {status} Mailbox full")
    text = (f"Content-Type: multipart/report; report-type=delivery-status;\r\n"
            f"\tboundary=\"A1.1781254800/mx.example.net\"\r\n"
            f"From: MAILER-DAEMON@mx.example.net (Mail Delivery System)\r\n"
            f"To: {to}\r\n"
            f"Subject: Undelivered Mail Returned to Sender\r\n"
            f"Auto-Submitted: auto-replied\r\n"
            f"Date: {date}\r\n"
            f"Message-Id: {report_id}\r\n"
            f"MIME-Version: 1.0\r\n\r\n"
            f"This is a MIME-encapsulated message.\r\n\r\n"
            f"--A1.1781254800/mx.example.net\r\n"
            f"Content-Description: Notification\r\n"
            f"Content-Type: text/plain; charset=us-ascii\r\n\r\n"
            f"This is the mail system at host mx.example.net.\r\n\r\n"
            f"I'm sorry to have to inform you that your message could not\r\n"
            f"be delivered to one or more recipients. It's attached below.\r\n\r\n"
            f"                   The mail system\r\n\r\n"
            f"<{recipient}>: host mail.example.com[192.0.2.7] said: {diagnostic}\r\n\r\n"
            f"--A1.1781254800/mx.example.net\r\n"
            f"Content-Description: Delivery report\r\n"
            f"Content-Type: message/delivery-status\r\n\r\n"
            f"Reporting-MTA: dns; mx.example.net\r\n"
            f"X-Postfix-Queue-ID: A1\r\n"
            f"X-Postfix-Sender: rfc822; {to}\r\n"
            f"Arrival-Date: {date}\r\n\r\n"
            f"Final-Recipient: rfc822; {recipient}\r\n"
            f"Original-Recipient: rfc822;{recipient}\r\n"
            f"Action: {action}\r\n"
            f"Status: {status}\r\n"
            f"Remote-MTA: dns; mail.example.com\r\n"
            f"Diagnostic-Code: {diagnostic}\r\n\r\n")
    if original:
        text += (f"--A1.1781254800/mx.example.net\r\n"
                 f"Content-Description: Undelivered Message Headers\r\n"
                 f"Content-Type: text/rfc822-headers\r\n\r\n{original}\r\n")
    return (text + "--A1.1781254800/mx.example.net--\r\n").encode()


def rfc3464_dsn(recipient: str, original: str, *, report_id: str, status: str = "4.4.7",
                action: str = "delayed") -> bytes:
    """RFC 3464's appendix shape: a delay (or failure) notice carrying the whole original message."""
    return (f"Date: {_DATE}\r\n"
            f"From: Mail Delivery Subsystem <MAILER-DAEMON@relay.example.com>\r\n"
            f"Message-Id: {report_id}\r\n"
            f"To: <digest@example.org>\r\n"
            f"MIME-Version: 1.0\r\n"
            f"Content-Type: multipart/report; report-type=delivery-status;\r\n"
            f"    boundary=\"RAA14128.773615765/CS.UTK.EDU\"\r\n"
            f"Subject: Warning: could not send message for past 4 hours\r\n\r\n"
            f"--RAA14128.773615765/CS.UTK.EDU\r\n\r\n"
            f"    **********************************************\r\n"
            f"    **      THIS IS A WARNING MESSAGE ONLY      **\r\n"
            f"    **  YOU DO NOT NEED TO RESEND YOUR MESSAGE  **\r\n"
            f"    **********************************************\r\n\r\n"
            f"--RAA14128.773615765/CS.UTK.EDU\r\n"
            f"content-type: message/delivery-status\r\n\r\n"
            f"Reporting-MTA: dns; relay.example.com\r\n\r\n"
            f"Final-Recipient: rfc822; {recipient}\r\n"
            f"Action: {action}\r\n"
            f"Status: {status}\r\n"
            f"Will-Retry-Until: Sat, 13 Jun 2026 09:00:00 +0000\r\n\r\n"
            f"--RAA14128.773615765/CS.UTK.EDU\r\n"
            f"content-type: message/rfc822\r\n\r\n"
            f"{original}\r\nThe digest's text.\r\n\r\n"
            f"--RAA14128.773615765/CS.UTK.EDU--\r\n").encode()


def arf(original: str, *, report_id: str, feedback_type: str = "abuse", rcpt: str = "") -> bytes:
    """RFC 5965 section 3.1: an abuse report with the original message (the recipient often redacted)."""
    rcpt_line = f"Original-Rcpt-To: {rcpt}\r\n" if rcpt else ""
    return (f"From: <abusedesk@example.com>\r\n"
            f"Date: {_DATE}\r\n"
            f"Subject: FW: Your papers\r\n"
            f"To: <digest@example.org>\r\n"
            f"Message-ID: {report_id}\r\n"
            f"MIME-Version: 1.0\r\n"
            f"Content-Type: multipart/report; report-type=feedback-report;\r\n"
            f"     boundary=\"part1_13d.2e68ed54_boundary\"\r\n\r\n"
            f"--part1_13d.2e68ed54_boundary\r\n"
            f"Content-Type: text/plain; charset=\"US-ASCII\"\r\n"
            f"Content-Transfer-Encoding: 7bit\r\n\r\n"
            f"This is an email abuse report for an email message received from IP\r\n"
            f"192.0.2.1 on Fri, 12 Jun 2026 08:00:00 +0000.\r\n\r\n"
            f"--part1_13d.2e68ed54_boundary\r\n"
            f"Content-Type: message/feedback-report\r\n\r\n"
            f"Feedback-Type: {feedback_type}\r\n"
            f"User-Agent: SomeGenerator/1.0\r\n"
            f"Version: 1\r\n"
            f"Original-Mail-From: <digest@example.org>\r\n"
            f"{rcpt_line}"
            f"Arrival-Date: Fri, 12 Jun 2026 08:00:00 +0000\r\n"
            f"Reported-Domain: example.org\r\n"
            f"Source-IP: 192.0.2.1\r\n\r\n"
            f"--part1_13d.2e68ed54_boundary\r\n"
            f"Content-Type: message/rfc822\r\n"
            f"Content-Disposition: inline\r\n\r\n"
            f"{original}\r\nThe digest's text.\r\n\r\n"
            f"--part1_13d.2e68ed54_boundary--\r\n").encode()


def exim_bounce(recipient: str, *, report_id: str) -> bytes:
    """Exim's plain bounce (no DSN), which names the failed address in X-Failed-Recipients."""
    return (f"Return-path: <>\r\n"
            f"X-Failed-Recipients: {recipient}\r\n"
            f"From: Mail Delivery System <Mailer-Daemon@mx.example.net>\r\n"
            f"To: digest@example.org\r\n"
            f"Subject: Mail delivery failed: returning message to sender\r\n"
            f"Message-Id: {report_id}\r\n"
            f"Date: {_DATE}\r\n\r\n"
            f"This message was created automatically by mail delivery software.\r\n\r\n"
            f"A message that you sent could not be delivered to one or more of its\r\n"
            f"recipients. This is a permanent error. The following address(es) failed:\r\n\r\n"
            f"  {recipient}\r\n"
            f"    retry timeout exceeded\r\n").encode()


def reply(report_id: str = "<reply-1@example.net>") -> bytes:
    """A person answering a digest: not a report."""
    return (f"From: Ada <ada@example.org>\r\nTo: digest@example.org\r\nSubject: Re: Your papers\r\n"
            f"Message-ID: {report_id}\r\nDate: {_DATE}\r\n\r\nThanks, the third paper was great.\r\n").encode()


def write_maildir(folder: Path, messages: list[bytes]) -> Path:
    """A Maildir holding these messages (in new/), written with the standard library."""
    box = mailbox.Maildir(folder, create=True)
    for data in messages:
        box.add(data)
    box.close()
    return folder


def write_mbox(path: Path, messages: list[bytes]) -> Path:
    box = mailbox.mbox(path, create=True)
    for data in messages:
        box.add(data)
    box.close()
    return path


def damaged_dsn(*, report_id: str) -> bytes:
    """A delivery-status report without its message/delivery-status part, and no text any detector reads."""
    return (f"From: MAILER-DAEMON@mx.example.net\r\nTo: digest@example.org\r\nSubject: Delivery report\r\n"
            f"Message-Id: {report_id}\r\nDate: {_DATE}\r\nMIME-Version: 1.0\r\n"
            f"Content-Type: multipart/report; report-type=delivery-status; boundary=\"D1\"\r\n\r\n"
            f"--D1\r\nContent-Type: text/plain\r\n\r\nSomething happened.\r\n--D1--\r\n").encode()
