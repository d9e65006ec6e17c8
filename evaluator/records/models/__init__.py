"""The Django models of RSI, in four modules: what a campaign is planned from (plans), an attempt and what its
run writes (attempts), the records beside them (checks), what reviewers say of episodes (reviews), and what a user
holds besides a password (accounts).
Everything imports them from here, as Django loads them (evaluator/apps.py)."""

from evaluator.records.models.accounts import ApiToken
from evaluator.records.models.attempts import Artifact, Attempt, AttemptRecord, Decision, Intervention, Step
from evaluator.records.models.checks import CampaignCheck, MediaProbe, RealRobotRate, Replay
from evaluator.records.models.plans import (
    Benchmark,
    Campaign,
    FrozenWhenReferenced,
    Policy,
    ProtocolIdentity,
    RecordImmutable,
    Task,
)
from evaluator.records.models.reviews import EpisodeTag, FailureMode

__all__ = [
    "ApiToken",
    "Artifact",
    "Attempt",
    "AttemptRecord",
    "Benchmark",
    "Campaign",
    "CampaignCheck",
    "Decision",
    "EpisodeTag",
    "FailureMode",
    "FrozenWhenReferenced",
    "Intervention",
    "MediaProbe",
    "Policy",
    "ProtocolIdentity",
    "RealRobotRate",
    "RecordImmutable",
    "Replay",
    "Step",
    "Task",
]
