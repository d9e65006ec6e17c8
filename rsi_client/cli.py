"""`rsi`: RSI from a shell or a CI job.

    rsi launch --benchmark fetch --tasks all --repeats 3 --policy openpi+ws://gpu7:8000 --wait
    rsi launch --against 12 --policy openpi+ws://gpu7:8000 --wait    (a sequential campaign on 12's cells)
    rsi compare 12 13 --fail-on regressed
    rsi check-policy --benchmark fetch --policy openpi+ws://gpu7:8000
    rsi launch --benchmark fetch --policy http://gpu7:8000/act --label run=abc --label step=5000
    rsi cancel 12 | rsi curve --label run=abc --x step | rsi campaigns --label run=abc
    rsi status 12 | rsi wait 12 [13 ...] | rsi leaderboard [PROTOCOL_ID] [--label run=abc] | rsi whoami

The site and the token come from --url / --token or RSI_URL / RSI_TOKEN. Every command takes --timeout SECONDS:
the most it may take in all (a request is cut off then, however slowly its reply trickles in); without it each
request may take RSI_TIMEOUT seconds (default 60; a policy check of a large checkpoint may need more).

Exit status: 0 done; 1 refused (a launch or comparison the protocol refuses, a policy whose reply is invalid, a
verdict named by --fail-on); 2 a usage error; 3 the campaign ended with infrastructure errors; 4 not authenticated
or not permitted; 5 the site cannot be reached, answered an error or a reply this client does not understand, or
the time ran out; 130 interrupted (the campaign goes on on the server); 141 the output was closed early (| head).
Every error is said on standard error in a line or a few, never as a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from rsi_client.client import ApiError, Client, WaitTimedOut
from rsi_client.formatting import label_text, plan_text, progress_line, rate_text, sequential_text, summary

REFUSED, INFRASTRUCTURE, AUTH, FAILED, INTERRUPTED, OUTPUT_CLOSED = 1, 3, 4, 5, 130, 141


class UsageError(ValueError):
    """A command line this client cannot run (exit 2)."""


def _plan(client: Client, args) -> dict:
    if args.against is not None:
        plan = client.plan_against(args.against, args.policy, name=args.name, level=args.level, margin=args.margin)
        return {**plan, "labels": _labels(args.label)}
    if not args.benchmark:
        raise UsageError("give --benchmark, or --against a baseline campaign whose plan to run")
    plan = {"benchmark": args.benchmark, "policy": args.policy, "seed": args.seed, "repeats": args.repeats}
    plan["tasks"] = "all" if args.tasks == "all" else [t for t in args.tasks.split(",") if t]
    if args.seeds:
        try:
            plan["seeds"] = [int(s) for s in args.seeds.split(",") if s.strip()]
        except ValueError:
            raise UsageError(f"--seeds takes whole numbers separated by commas, got {args.seeds[:100]!r}") from None
    for name in ("name", "sensors", "budget_mode", "task_scope", "interaction_mode", "full"):
        if getattr(args, name):
            plan[name] = getattr(args, name)
    for name in ("max_policy_calls", "replan_interval", "horizon_multiplier", "runner_step_cap"):
        if getattr(args, name) is not None:
            plan[name] = getattr(args, name)
    if args.feedback:
        plan["action_rejection_feedback"] = True
    if args.label:
        plan["labels"] = _labels(args.label)
    return plan


def _labels(items: list[str]) -> dict[str, str]:
    """--label run=abc --label baseline as {"run": "abc", "baseline": ""}; the site validates names and values."""
    labels: dict[str, str] = {}
    for item in items:
        name, _, value = item.partition("=")
        if name in labels:
            raise UsageError(f"--label {name} is given more than once")
        labels[name] = value
    return labels


def _filters(items: list[str]) -> dict[str, str | None]:
    """--label run=abc --label baseline as filters: run is abc; baseline is there, with any value."""
    return {name: value if has_value else None for name, has_value, value in (i.partition("=") for i in items)}


def _wait(client: Client, campaign_ids: list[int], args) -> int:
    """Wait for every campaign at once: one progress block (a line each) whenever any count changes, then each one's
    aggregates; exit 3 when any ended with infrastructure errors."""

    def report(campaigns):
        print("\n".join(progress_line(campaign) for campaign in campaigns), file=sys.stderr, flush=True)

    campaigns = client.wait_all(campaign_ids, poll_s=args.poll, timeout_s=args.timeout, on_progress=report)
    if args.json:
        print(json.dumps(campaigns[0] if len(campaigns) == 1 else campaigns, indent=1))
    else:
        print("\n".join(summary(campaign) for campaign in campaigns))
    return INFRASTRUCTURE if any(campaign["infrastructure_errors"] for campaign in campaigns) else 0


def launch(client: Client, args) -> int:
    plan = _plan(client, args)
    if args.preview:
        print(json.dumps(client.preview(**plan), indent=1))
        return 0
    campaign = client.launch(start=not args.no_start, **plan)
    print(f"campaign {campaign['id']} created: {campaign['cells']} cells, {campaign['url']}", file=sys.stderr)
    if not args.wait:
        print(json.dumps(campaign, indent=1) if args.json else campaign["id"])
        return 0
    return _wait(client, [campaign["id"]], args)


def cancel(client: Client, args) -> int:
    done = client.cancel(args.campaign)
    if args.json:
        print(json.dumps(done, indent=1))
        return 0
    campaign = done["campaign"]
    print(
        f"campaign {campaign['id']} cancelled by {campaign['cancelled']['by']} at {campaign['cancelled']['at']}: "
        f"{len(done['not_run'])} cell(s) left not run, {len(done['stopped'])} running cell(s) stopped"
    )
    for cell in done["still_running"]:
        print(f"  attempt {cell['attempt']} runs on to its end: {cell['reason']}")
    return 0


def campaigns(client: Client, args) -> int:
    found = client.campaigns(labels=_filters(args.label), benchmark=args.benchmark, policy=args.policy)
    if args.json:
        print(json.dumps(found, indent=1))
        return 0
    for campaign in found["campaigns"]:
        print(f"{progress_line(campaign)}  [{label_text(campaign['labels'])}]")
    if found["pages"] > 1:
        print(f"page {found['page']} of {found['pages']} ({found['count']} campaigns)", file=sys.stderr)
    return 0


def curve(client: Client, args) -> int:
    found = client.curve(_filters(args.label), args.x, args.protocol, args.level, args.margin)
    if args.json:
        print(json.dumps(found, indent=1))
        return 0
    print(f"{', '.join(found['labels'])} along {found['x']} under {found['protocol_id']}")
    for point in found["points"]:
        step = point["against_previous"]
        verdict = "" if step is None else f"  vs before: {step['verdict_label'] or 'not compared'}"
        where = f"{found['x']}={point['x_text']}"
        print(f"  {where:<16} {rate_text(point['success_rate'])}  campaign {point['campaign']}{verdict}")
    for left in found["left_out"]:
        print(f"  not drawn: campaign {left['campaign']}: {left['reason']}")
    print(f"  {found['url']}")
    return 0


def status(client: Client, args) -> int:
    campaign = client.campaign(args.campaign)
    print(json.dumps(campaign, indent=1) if args.json else progress_line(campaign) + "\n" + summary(campaign))
    return 0


def check_policy(client: Client, args) -> int:
    check = client.check_policy(args.policy, args.benchmark, args.task, args.sensors, args.replan_interval)
    if args.json:
        print(json.dumps(check, indent=1))
    else:
        latency = "no call made" if check["latency_ms"] is None else f"{check['latency_ms']:.1f} ms"
        verdict = "valid" if check["valid"] else f"INVALID ({check['error_type']})"
        print(f"{verdict}: {check['message']}\n  latency {latency}, chunk length {check['chunk_length']}")
        obs = check["observation"]
        print(f"  observation: frame {obs['rgb_shape']}, sensors {obs['sensors'] or 'none'}, task {obs['task']}")
    return 0 if check["valid"] else REFUSED


def leaderboard(client: Client, args) -> int:
    if not args.protocol_id:
        for entry in client.leaderboards():
            print(f"{entry['protocol_id']}  ({entry['benchmark']}, {entry['mode']}, {entry['policies']} policies)")
        return 0
    board = client.leaderboard(args.protocol_id, _filters(args.label))
    if args.json:
        print(json.dumps(board, indent=1))
        return 0
    print(f"{board['protocol_id']}: {board['method']}")
    for row in board["rows"]:
        rank = f"{row['rank']}{'=' if row['tied'] else ' '}"
        print(f"{rank:>4} {row['policy']:<30} {rate_text(row['success_rate'])}  campaign {row['campaign']}")
    return 0


def plan(client: Client, args) -> int:
    found = client.plan(args.difference, args.baseline, args.rate, args.discordance, args.level, args.margin)
    print(json.dumps(found, indent=1) if args.json else plan_text(found))
    return 0


def compare(client: Client, args) -> int:
    found = client.compare(args.a, args.b, args.level, args.margin)
    if args.json:
        print(json.dumps(found, indent=1))
    else:
        overall = found["overall"]
        print(f"campaign {found['b']} against baseline {found['a']}: {found['verdict_label'].upper()}")
        if found["sequential"]:
            print(f"  sequential test  {sequential_text(found['sequential'])}")
        difference = "none" if overall["difference"] is None else f"{overall['difference']:+.3f}"
        interval = (
            ""
            if overall["interval_low"] is None
            else f" [{overall['interval_low']:+.3f}, {overall['interval_high']:+.3f}]"
        )
        print(
            f"  {overall['pairs']} pairs: B - A = {difference}{interval}, only A {overall['only_a']}, "
            f"only B {overall['only_b']}, McNemar exact p = {overall['mcnemar_exact_p']:.4g}"
        )
        print(f"  level {found['level']}, margin {found['margin']}, decided by the {found['decided_by']}")
        decider = found["sequential"] or overall
        if found["verdict"] == "underpowered" and decider["pairs_needed"]:
            basis = decider.get("pairs_needed_basis") or "if the proportions seen so far held"
            print(f"  about {decider['pairs_needed']} pairs in all would decide it {basis}")
        print(f"  {found['url']}")
    return REFUSED if found["verdict"] in args.fail_on else 0


def _verdicts(text: str) -> set[str]:
    verdicts = {v.strip() for v in text.split(",") if v.strip()}
    unknown = verdicts - set(VERDICTS)
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown verdict {', '.join(sorted(unknown))}: one of {', '.join(VERDICTS)}")
    return verdicts


VERDICTS = ("improved", "regressed", "no_difference", "underpowered")


def whoami(client: Client, args) -> int:
    me = client.me()
    print(f"{me['username']} ({', '.join(me['roles']) or 'no role'}), by {me['via']}")
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="rsi", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    top.add_argument("--url", help="the site, e.g. https://rsi.example.org (default: RSI_URL)")
    top.add_argument("--token", help="a personal API token (default: RSI_TOKEN)")
    commands = top.add_subparsers(dest="command", required=True)

    def waiting(command):
        command.add_argument("--poll", type=float, default=5.0, help="seconds between polls (default 5)")
        command.add_argument("--json", action="store_true", help="print the campaign as JSON")

    launch_command = commands.add_parser("launch", help="create a campaign, start it and (--wait) wait for its numbers")
    launch_command.add_argument("--benchmark", help="required unless --against")
    launch_command.add_argument(
        "--policy", required=True, help="a registered name or a spec (openpi+ws://HOST:PORT, ...)"
    )
    launch_command.add_argument("--tasks", default="all", help="all, or task names separated by commas (default all)")
    launch_command.add_argument("--seed", type=int, default=0, help="the first reset seed (default 0)")
    launch_command.add_argument("--repeats", type=int, default=1, help="consecutive seeds per task (default 1)")
    launch_command.add_argument("--seeds", help="these seeds, separated by commas, instead of --seed and --repeats")
    launch_command.add_argument("--name", default="")
    launch_command.add_argument("--sensors", default="")
    launch_command.add_argument("--budget-mode", default="", help="horizon or decisions")
    launch_command.add_argument("--max-policy-calls", type=int)
    launch_command.add_argument("--replan-interval", type=int)
    launch_command.add_argument("--horizon-multiplier", type=int)
    launch_command.add_argument("--runner-step-cap", type=int)
    launch_command.add_argument("--task-scope", default="")
    launch_command.add_argument("--interaction-mode", default="")
    launch_command.add_argument("--full", default="", help="SimplerEnv: visual_matching or variant_aggregation")
    launch_command.add_argument("--feedback", action="store_true", help="the action-rejection feedback track")
    launch_command.add_argument("--no-start", action="store_true", help="create the cells without starting them")
    launch_command.add_argument("--preview", action="store_true", help="print what would be created; create nothing")
    launch_command.add_argument(
        "--wait", action="store_true", help="wait until every cell has finished; print the aggregates"
    )
    launch_command.add_argument(
        "--against",
        type=int,
        help="a finished campaign: run its cells and settings sequentially, stop once decided",
    )
    launch_command.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a label frozen with the plan (repeatable): run=abc, step=5000, commit=1a2b3c; a name alone is a tag",
    )
    launch_command.add_argument("--level", type=float, help="with --against: the test's level (default 0.05)")
    launch_command.add_argument(
        "--margin", type=float, help="with --against: the margin of no difference (default 0.05)"
    )
    waiting(launch_command)
    launch_command.set_defaults(run=launch)

    status_command = commands.add_parser("status", help="a campaign's progress and aggregates")
    status_command.add_argument("campaign", type=int)
    status_command.add_argument("--json", action="store_true")
    status_command.set_defaults(run=status)

    wait_command = commands.add_parser(
        "wait", help="wait for campaigns to finish (rsi wait 12 13 14); print their aggregates"
    )
    wait_command.add_argument("campaigns", type=int, nargs="+", metavar="campaign")
    waiting(wait_command)
    wait_command.set_defaults(run=lambda client, args: _wait(client, args.campaigns, args))

    cancel_command = commands.add_parser(
        "cancel", help="leave a campaign's cells not yet started not run; stop running ones"
    )
    cancel_command.add_argument("campaign", type=int)
    cancel_command.add_argument("--json", action="store_true")
    cancel_command.set_defaults(run=cancel)

    campaigns_command = commands.add_parser("campaigns", help="campaigns, newest first, by label, benchmark or policy")
    campaigns_command.add_argument("--label", action="append", default=[], metavar="NAME[=VALUE]", help="repeatable")
    campaigns_command.add_argument("--benchmark", default="")
    campaigns_command.add_argument("--policy", default="")
    campaigns_command.add_argument("--json", action="store_true")
    campaigns_command.set_defaults(run=campaigns)

    curve_command = commands.add_parser("curve", help="a learning curve: campaigns sharing labels, along another label")
    curve_command.add_argument("--label", action="append", required=True, metavar="NAME[=VALUE]", help="e.g. run=abc")
    curve_command.add_argument("--x", default="step", help="the label to draw along (default step)")
    curve_command.add_argument("--protocol", default="", help="the identity, when the labels find several")
    curve_command.add_argument("--level", type=float, help="of the paired verdicts (default 0.05)")
    curve_command.add_argument("--margin", type=float, help="of the paired verdicts (default 0.05)")
    curve_command.add_argument("--json", action="store_true")
    curve_command.set_defaults(run=curve)

    check_command = commands.add_parser("check-policy", help="one call of a policy on a synthetic observation")
    check_command.add_argument("--benchmark", required=True)
    check_command.add_argument("--policy", required=True)
    check_command.add_argument(
        "--task", default="", help="whose frame size and instruction to send (default: the first)"
    )
    check_command.add_argument("--sensors", default="")
    check_command.add_argument("--replan-interval", type=int)
    check_command.add_argument("--json", action="store_true")
    check_command.set_defaults(run=check_policy)

    leaderboard_command = commands.add_parser("leaderboard", help="the leaderboards, or one protocol identity's")
    leaderboard_command.add_argument("protocol_id", nargs="?")
    leaderboard_command.add_argument(
        "--label", action="append", default=[], metavar="NAME[=VALUE]", help="only campaigns with it"
    )
    leaderboard_command.add_argument("--json", action="store_true")
    leaderboard_command.set_defaults(run=leaderboard)

    compare_command = commands.add_parser(
        "compare", help="campaign B against baseline A: paired statistics and a verdict"
    )
    compare_command.add_argument("a", type=int, help="the baseline campaign")
    compare_command.add_argument("b", type=int, help="the candidate campaign")
    compare_command.add_argument("--level", type=float, help="the test's level (default 0.05)")
    compare_command.add_argument("--margin", type=float, help="differences under this count as none (default 0.05)")
    compare_command.add_argument(
        "--fail-on",
        type=_verdicts,
        default=set(),
        metavar="VERDICT[,VERDICT]",
        help=f"exit 1 when the verdict is one of these: {', '.join(VERDICTS)}",
    )
    compare_command.add_argument("--json", action="store_true")
    compare_command.set_defaults(run=compare)

    plan_command = commands.add_parser(
        "plan", help="the pairs a question needs: power of a paired design, before a launch"
    )
    against = plan_command.add_mutually_exclusive_group(required=True)
    against.add_argument("--baseline", type=int, help="a baseline campaign: its success rate and cells")
    against.add_argument("--rate", type=float, help="or a stated baseline success rate")
    plan_command.add_argument(
        "--difference", type=float, required=True, help="to detect, B - A (e.g. 0.1; negative: worse)"
    )
    plan_command.add_argument(
        "--discordance", type=float, help="the share of pairs expected to differ (default: independent)"
    )
    plan_command.add_argument("--level", type=float, help="the test's level (default 0.05)")
    plan_command.add_argument(
        "--margin", type=float, help="of the sequential campaign's no-difference verdict (default 0.05)"
    )
    plan_command.add_argument("--json", action="store_true")
    plan_command.set_defaults(run=plan)

    commands.add_parser("whoami", help="the user the token acts as, and its roles").set_defaults(run=whoami)
    for command in commands.choices.values():
        command.add_argument(
            "--timeout",
            type=float,
            help="give up after this many seconds in all, waiting included (exit 5); "
            "default: each request RSI_TIMEOUT seconds, else 60",
        )
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return _run(args)
    except BrokenPipeError:
        # The reader went away (`rsi ... | head`): nothing more can be said on standard output, and Python's own
        # flush at exit must not fail on it either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return OUTPUT_CLOSED


def _run(args) -> int:
    try:
        client = Client(args.url, args.token, timeout_s=args.timeout)
        if args.timeout is not None:
            client.deadline = time.monotonic() + args.timeout
        try:
            return args.run(client, args)
        except UsageError:
            raise
        except (KeyError, TypeError, IndexError, AttributeError, ValueError) as error:  # not the API's shape
            raise ApiError(
                200, "bad_reply", [f"the site's reply is not what this client expects ({error!r})"[:300]]
            ) from None
    except ValueError as error:
        print(f"rsi: {error}", file=sys.stderr)
        return 2
    except ApiError as error:
        print(f"rsi: {error.code} (HTTP {error.status or 'none'})", file=sys.stderr)
        for reason in error.reasons:
            print(f"  - {reason}", file=sys.stderr)
        if error.status in (401, 403):
            return AUTH
        return REFUSED if error.status == 422 else FAILED
    except WaitTimedOut as error:
        print(f"rsi: {error}; it goes on on the server: rsi wait {error.campaign['id']}", file=sys.stderr)
        return FAILED
    except KeyboardInterrupt:
        print("rsi: interrupted; the campaign goes on on the server", file=sys.stderr)
        return INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
