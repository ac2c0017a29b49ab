"""``verify``: a dossier's quotes checked against what a report fetched (docs/citations.md)."""

from __future__ import annotations

import argparse
import asyncio

from worker.citations import DossierError, read_dossier, verdict
from worker.cli import common
from worker.cli.exits import Exit, UsageError, say
from worker.cli.jobs import _run_job
from worker.config import Settings
from worker.limits import VERIFY_CITATIONS


def cmd_verify(args: argparse.Namespace, settings: Settings) -> int:
    report_id = common.report_id(args.report_id, "REPORT")
    try:
        dossier = read_dossier(args.file)
    except DossierError as exc:
        raise UsageError(str(exc)) from None
    return asyncio.run(
        _run_job(
            args,
            settings,
            lambda client: client.verify(report_id, dossier),
            seed=[],
            report_id=report_id,
            what=VERIFY_CITATIONS,
            judged=lambda result: Exit.OK if verdict(result, say) else Exit.JOB_ERROR,
        )
    )
