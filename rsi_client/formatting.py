"""What the `rsi` commands print: a campaign's progress line and summary, rates with their intervals, a sequential
test's state and labels, each in words a shell user reads."""

from __future__ import annotations


def label_text(labels: dict) -> str:
    return " ".join(f"{name}={value}" if value else name for name, value in labels.items())


def rate_text(rate: dict) -> str:
    if not rate["denominator"]:
        return f"{rate['numerator']}/0 (no completed attempt)"
    return (
        f"{rate['numerator']}/{rate['denominator']} = {rate['value']:.3f} "
        f"[{rate['wilson95_low']:.3f}, {rate['wilson95_high']:.3f}] (Wilson 95%)"
    )


def progress_line(campaign: dict) -> str:
    s = campaign["statuses"]
    not_run = f", {s['not_run']} not run" if s.get("not_run") else ""
    return (
        f"campaign {campaign['id']}: {campaign['finished']}/{campaign['cells']} finished, {s['running']} running, "
        f"{s['queued']} queued, {s['pending']} pending{not_run}; {campaign['report']['overall']['successes']} successes"
    )


def time_lines(time: dict) -> list[str]:
    """Where the campaign's time went: each part's share of the attempts' wall time, largest first."""
    wall = time["wall_s"] or 0.0
    parts = sorted(time["parts_s"].items(), key=lambda item: -item[1])
    shares = ", ".join(f"{name} {seconds / wall:.0%}" for name, seconds in parts) if wall else "none timed"
    rate = time["observations_per_s"]
    lines = [
        f"  time                  {time['attempts']} attempt(s), {wall:.1f} s of wall time: {shares}",
        f"  observations          {time['policy_calls']} in {time['elapsed_s']:.1f} s"
        + (f" = {rate:.2f}/s" if rate is not None else ""),
    ]
    host = time["host"]
    if host["calls_timed"]:
        batching = "on" if host["batching_on"] else "off"
        lines.append(
            f"  model host            {host['infer_s']:.2f} s of forward passes over {host['calls_timed']} calls, "
            f"mean batch {host['mean_batch']:.2f} (largest {host['max_batch']}), batching {batching}"
        )
    if time["evidence_bytes_per_episode"] is not None:
        lines.append(f"  evidence              {time['evidence_bytes_per_episode'] / 1e6:.2f} MB per episode")
    return lines


def summary(campaign: dict) -> str:
    report = campaign["report"]
    overall = report["overall"]
    lines = [
        f"campaign {campaign['id']} {campaign['name']!r}: {campaign['policy']} under {campaign['protocol_id']}",
        f"  {campaign['url']}",
        f"  success_rate          {rate_text(overall['success_rate'])}",
        f"  attempt_success_rate  {rate_text(overall['attempt_success_rate'])}",
        f"  coverage              {overall['attempted']}/{overall['selected']} cells attempted",
    ]
    if campaign.get("labels"):
        lines.append(
            "  labels                " + " ".join(f"{k}={v}" if v else k for k, v in campaign["labels"].items())
        )
    if campaign.get("cancelled"):
        lines.append(f"  cancelled             by {campaign['cancelled']['by']} at {campaign['cancelled']['at']}")
    if len(campaign.get("policy_versions") or ()) > 1:
        lines.append("  POLICY VERSION CHANGED " + " -> ".join(campaign["policy_versions"]))
    errors = {k: v for k, v in overall["errors"].items() if v}
    if errors:
        lines.append("  errors                " + ", ".join(f"{k} {v}" for k, v in sorted(errors.items())))
    if campaign.get("error_types"):
        lines.append("  error types           " + ", ".join(f"{k} {v}" for k, v in campaign["error_types"].items()))
    if report["non_autonomous"]["attempted"]:
        lines.append(f"  non-autonomous        {report['non_autonomous']['attempted']} attempt(s), counted apart")
    for task, aggregate in report["per_task"].items():
        lines.append(f"  {task:<22}{rate_text(aggregate['success_rate'])}")
    if campaign.get("time"):
        lines += time_lines(campaign["time"])
    sequential = campaign.get("sequential")
    if sequential:
        baseline = sequential["baseline"]
        lines.append(f"  sequential test       {sequential_text(sequential)}")
        lines.append(f"  against               campaign {baseline}; {sequential['cells_not_run']} cell(s) not run")
    return "\n".join(lines)


def sequential_text(state: dict) -> str:
    interval = f"[{state['interval_low']:+.3f}, {state['interval_high']:+.3f}]"
    if state["decided_at"]:
        return f"{state['verdict_label']} after {state['decided_at']} pairs, difference in {interval}"
    return f"not decided after {state['pairs']} pairs, difference in {interval}"


def plan_text(plan: dict) -> str:
    """A power plan (GET /plan) as lines: the rates, the fixed design's pairs per power, the sequential campaign's."""
    source = f"campaign {plan['baseline_campaign']}" if plan["baseline_campaign"] else "a stated rate"
    lines = [
        f"baseline {plan['baseline_rate']:.3f} ({source}) -> candidate {plan['candidate_rate']:.3f}: "
        f"difference {plan['difference']:+.3f}, discordance {plan['discordance']:.3f}, level {plan['level']}"
    ]
    for row in plan["fixed_design"]:
        pairs = f"more than {plan['most_pairs_computed']}" if row["more_than"] else str(row["pairs"])
        fits = {True: "", False: f" (more than the baseline's {plan['baseline_cells']} cells)", None: ""}
        lines.append(f"  fixed design, {row['power']:.0%} power: {pairs} pairs{fits[row['fits_baseline']]}")
    sequential = plan["sequential"]
    if sequential:
        lines.append(
            f"  sequential campaign, up to {sequential['most_pairs']} pairs: mean {sequential['mean_pairs']:.1f} "
            f"+- {sequential['mean_standard_error']:.1f}, median {sequential['median_pairs']:.0f}, right direction "
            f"{sequential['right_direction_share']:.0%} ({sequential['runs']} simulated)"
        )
    lines.append(f"  {plan['fixed_method']}")
    return "\n".join(lines)
