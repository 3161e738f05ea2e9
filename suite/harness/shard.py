"""``pytest --shard=K/N``: the K-th of N shares of a run's (op, target) groups, one per host; then
``qconform merge`` (reports/merge.py) makes one run folder of the N shards.

The split depends only on the groups and their case counts (the case set: seed, ops, cases per
op or case files, and the targets), never on the host: every host computes the same N shares.
Groups are dealt largest first to the share with the fewest cases so far (ties: the lower
share), so the shares' case counts differ by at most one group. A group is never split: its
batches, its bias and its declared scheme are judged whole, on one host.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass

from suite.core.errors import QconformError

_FORM = re.compile(r"([0-9]{1,6})/([0-9]{1,6})")


@dataclass(frozen=True)
class Shard:
    index: int   # 1-based
    count: int

    @property
    def text(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str | None) -> Shard | None:
    if text is None:
        return None
    m = _FORM.fullmatch(str(text).strip())
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise QconformError(f"'{text}' is not K/N with 1 <= K <= N", field="--shard",
                            rule="the K-th of N shares, e.g. --shard=1/4")
    return Shard(int(m.group(1)), int(m.group(2)))


def split(groups: dict[tuple[str, str], int], count: int) -> list[list[tuple[str, str]]]:
    """The ``count`` shares of ``groups`` ((op, target) -> its cases), each in a stable order."""
    shares: list[list[tuple[str, str]]] = [[] for _ in range(count)]
    load = [0] * count
    for key in sorted(groups, key=lambda k: (-groups[k], k)):
        i = min(range(count), key=lambda j: (load[j], j))
        shares[i].append(key)
        load[i] += groups[key]
    return [sorted(s) for s in shares]


def set_digest(groups: dict[tuple[str, str], int]) -> str:
    """SHA-256 of the whole run's groups and their case counts: equal on the N hosts of one run."""
    text = json.dumps(sorted([op, t, n] for (op, t), n in groups.items()), separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def shard_info(shard: Shard, groups: dict[tuple[str, str], int]) -> tuple[set, dict]:
    """(this shard's groups, run.json's ``options.shard``)."""
    mine = split(groups, shard.count)[shard.index - 1]
    return set(mine), {"index": shard.index, "count": shard.count, "text": shard.text,
                       "groups": [list(k) for k in mine], "cases": sum(groups[k] for k in mine),
                       "groups_total": len(groups), "cases_total": sum(groups.values()),
                       "set_sha256": set_digest(groups)}


#: environment variables naming a CI run, in the order looked at: the shards of one CI run share it
RUN_GROUP_ENV = (("QCONFORM_RUN_GROUP", ""), ("GITHUB_RUN_ID", "github-"), ("CI_PIPELINE_ID", "gitlab-"),
                 ("BUILDKITE_BUILD_ID", "buildkite-"), ("CIRCLE_WORKFLOW_ID", "circleci-"),
                 ("BUILD_TAG", "jenkins-"))
_GROUP = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}")


def run_group(given: str | None, environ=None) -> str | None:
    """The run group of a shard: ``given`` (--run-group), else the CI's own run id from the
    environment (:data:`RUN_GROUP_ENV`; GitHub Actions' is the workflow run's, the same in every job
    of it and in its re-run attempts; a Kubernetes Job passes its uid as QCONFORM_RUN_GROUP, see
    examples/ci/), else None."""
    env = os.environ if environ is None else environ
    for name, prefix in ((None, ""), *RUN_GROUP_ENV):
        value = given if name is None else env.get(name)
        if value:
            text = prefix + str(value).strip()
            if name == "GITHUB_RUN_ID" and env.get("GITHUB_REPOSITORY"):
                text = f"github-{env['GITHUB_REPOSITORY']}-{value}"
            if not _GROUP.fullmatch(text):
                raise QconformError(f"{text[:80]!r} is not a run group id", field=name or "--run-group",
                                    rule="letters, digits and ._:/@+- (at most 200)")
            return text
    return None
