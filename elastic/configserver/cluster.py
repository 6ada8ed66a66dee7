"""The configuration server as a whole: members, leader, health and revision."""

from __future__ import annotations

from dataclasses import dataclass

from elastic.configserver.client import EtcdClient, KeyValue
from elastic.configserver.errors import ConfigServerError

PROBE_KEY = "/ptc/health"  # read (never written) to prove a quorum serves linearizable reads


@dataclass(frozen=True)
class MemberHealth:
    name: str
    id: int
    healthy: bool
    leader: bool
    revision: int
    raft_term: int
    raft_index: int
    db_size: int
    version: str
    error: str = ""


@dataclass(frozen=True)
class ClusterStatus:
    members: list[MemberHealth]
    leader: str | None
    revision: int
    quorum: bool  # a linearizable read succeeded
    quorum_error: str = ""

    @property
    def healthy(self) -> bool:
        return self.quorum and all(m.healthy for m in self.members)


def cluster_status(client: EtcdClient) -> ClusterStatus:
    """Ask every endpoint for its status, then prove the cluster serves a linearizable read."""
    members: list[MemberHealth] = []
    leader_id = 0
    for ep in client.endpoints:
        try:
            st = client.status(ep)
        except ConfigServerError as err:
            members.append(MemberHealth(ep.label, 0, False, False, 0, 0, 0, 0, "", str(err)))
            continue
        leader_id = leader_id or st.leader
        members.append(
            MemberHealth(
                name=ep.label,
                id=st.member_id,
                healthy=not st.errors and st.leader != 0,
                leader=st.member_id == st.leader,
                revision=st.revision,
                raft_term=st.raft_term,
                raft_index=st.raft_index,
                db_size=st.db_size,
                version=st.version,
                error="; ".join(st.errors) or ("" if st.leader else "no leader"),
            )
        )
    leader = next((m.name for m in members if m.leader), None)
    try:
        result = client.range(PROBE_KEY, keys_only=True)
        return ClusterStatus(members, leader, result.revision, True)
    except ConfigServerError as err:
        revision = max((m.revision for m in members), default=0)
        return ClusterStatus(members, leader, revision, False, str(err))


def list_keys(client: EtcdClient, prefix: str) -> tuple[int, list[KeyValue]]:
    """Every key under ``prefix`` (values included), and the revision read at."""
    result = client.range(prefix, prefix=True)
    return result.revision, result.kvs
