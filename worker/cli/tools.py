"""``tools`` and ``check-url``: the definitions a model is given, and the guardian's verdict on a URL."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress

from jobs.facts import ToolFormat, formatted
from worker.cli.common import print_json
from worker.cli.exits import Exit, say
from worker.config import Settings
from worker.guardian.decide import decide
from worker.guardian.policy import AddressPolicy
from worker.state.report_domains import deployment_policy


def cmd_check_url(args: argparse.Namespace, settings: Settings) -> int:
    try:
        addresses = [ipaddress.ip_address(a) for a in args.resolves_to]
    except ValueError as exc:
        say(f"--resolves-to: {exc}")
        return Exit.USAGE
    policy = AddressPolicy(settings.guardian_allow_cidrs)
    verdict = asyncio.run(decide(args.url, policy, addresses, domains=deployment_policy(settings)))
    print_json(verdict)
    return Exit.OK if verdict["verdict"] == "allow" else Exit.REFUSED


def cmd_tools(args: argparse.Namespace, settings: Settings) -> int:
    print_json(formatted(settings, ToolFormat(args.format)))
    return Exit.OK
