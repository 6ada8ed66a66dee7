"""A FAKE of CloudLab's aggregate (ProtoGENI's AM) for node operations: not CloudLab, not recorded.

It stands in for geni-lib's HTTPS post (``geni.minigcf.util._rpcpost`` as imported by the AM API
v2 and v3 modules), decodes the XML-RPC request geni-lib built, and answers from a small state
of its own the way ProtoGENI's AM v3 server is written to answer:

- ``PerformOperationalAction`` on sliver URNs: ``geni_start`` (needs a stopped sliver, else
  REFUSED "Sliver is not stopped (yet)"), ``geni_stop`` and ``geni_restart`` (need a started
  one, else REFUSED "Sliver is not started (yet)"), ``geni_reload``/``pg_reload`` (started or
  stopped). Every sliver is checked before any is changed. An unknown sliver is SEARCHFAILED
  "Nothing here by that name", an unknown action REFUSED "Invalid operational action", an
  empty URN list BADARGS "Empty URN List".
- ``Delete`` with anything but the slice URN: REFUSED "Must pass only slice URN".
- A credential other than the slice's: FORBIDDEN "Credential does not match the URN".
- While the slice is locked (``busy_answers`` > 0, one answer each): BUSY, as the aggregate
  answers while another operation holds the slice's lock. The text is this fake's own.
- ``SliverStatus`` (AM v2) per sliver from that state: a started or reloaded node reports
  ``changing`` for ``boot_polls`` polls, then ``ready``; a stopped one ``stopped`` (this fake's
  word: the aggregate's AM v2 status reports a sliver's status, not whether it is stopped).
- ``ListResources`` (AM v2) with a slice: the manifest it was given.

It opens no socket: everything stays in this process.
"""

from __future__ import annotations

import xmlrpc.client
from typing import Any

from elastic.profile import rspec

SUCCESS, BADARGS, FORBIDDEN, REFUSED, SEARCHFAILED = 0, 1, 3, 7, 12
UNSUPPORTED, BUSY = 13, 14

_ACTIONS = {
    "geni_start": "start",
    "geni_stop": "stop",
    "geni_restart": "restart",
    "geni_reload": "reload",
    "pg_reload": "reload",
}
_ALLOWED = {
    "start": ({"stopped", "new"}, "Sliver is not stopped (yet)"),
    "stop": ({"started"}, "Sliver is not started (yet)"),
    "restart": ({"started"}, "Sliver is not started (yet)"),
    "reload": ({"started", "stopped"}, "Sliver is not started or stopped (yet)"),
}


def _answer(code: int, value: Any = 0, output: str = "") -> dict[str, Any]:
    return {
        # ProtoGENI adds the URL of the call's log; geni-lib's manifest parser reads it.
        "code": {
            "geni_code": code,
            "am_type": "protogeni",
            "am_code": code,
            "protogeni_error_url": "",
        },
        "value": value,
        "output": output,
    }


class FakeCloudLabAggregate:
    """FAKE ProtoGENI aggregate: sliver states, operational actions and their refusals."""

    def __init__(
        self, manifest_xml: str, slice_urn: str, slice_credential: bytes, boot_polls: int = 1
    ) -> None:
        self.manifest_xml = manifest_xml
        self.slice_urn = slice_urn
        self.slice_credential = slice_credential
        self.boot_polls = boot_polls
        manifest = rspec.parse_manifest(manifest_xml.encode())
        self.state = {n.sliver_id: "started" for n in manifest.nodes if n.sliver_id}
        self.booting: dict[str, int] = {}
        self.failing: dict[str, str] = {}  # sliver -> error it reports after booting
        self.refuse_everything: dict[str, Any] | None = None
        self.busy_answers = 0
        self.reloads: list[str] = []
        self.calls: list[tuple[str, str, tuple[Any, ...]]] = []

    def __call__(self, url: str, req_data: str, cert: Any, root_bundle: Any) -> Any:
        params, method = xmlrpc.client.loads(req_data)
        self.calls.append((method, url, params))
        # Each handler is named after the XML-RPC method it answers, as the aggregate spells it.
        handler = getattr(self, f"_{method}", None)
        if self.refuse_everything is not None:
            response = self.refuse_everything
        elif handler is None:
            response = _answer(UNSUPPORTED, output=f"{method} is not modelled by this fake")
        else:
            response = handler(*params)
        wire = xmlrpc.client.dumps((response,), methodresponse=True, allow_none=True)
        return xmlrpc.client.loads(wire)[0][0]

    def methods(self) -> list[str]:
        return [c[0] for c in self.calls]

    def actions(self) -> list[tuple[str, list[str]]]:
        return [(c[2][2], list(c[2][0])) for c in self.calls if c[0] == "PerformOperationalAction"]

    # --- AM API v3 ------------------------------------------------------------------------

    def _credential_ok(self, creds: list[dict[str, Any]]) -> bool:
        for cred in creds:
            value = cred.get("geni_value")
            data = value.data if isinstance(value, xmlrpc.client.Binary) else value
            if isinstance(data, str):
                data = data.encode()
            if data == self.slice_credential and cred.get("geni_type") == "geni_sfa":
                return True
        return False

    def _PerformOperationalAction(
        self, urns: list[str], creds: list[dict[str, Any]], action: str, options: Any
    ) -> dict[str, Any]:
        if not urns:
            return _answer(BADARGS, output="Empty URN List")
        if not self._credential_ok(creds):
            return _answer(FORBIDDEN, output="Credential does not match the URN")
        if self.busy_answers > 0:
            self.busy_answers -= 1
            return _answer(BUSY, output="slice is busy (fake)")
        verb = _ACTIONS.get(action)
        if verb is None:
            return _answer(REFUSED, output="Invalid operational action")
        slivers = list(self.state) if urns[0] == self.slice_urn else list(urns)
        allowed, refusal = _ALLOWED[verb]
        for urn in slivers:
            if urn not in self.state:
                return _answer(SEARCHFAILED, output="Nothing here by that name")
            if self.state[urn] not in allowed:
                return _answer(REFUSED, output=refusal)
        for urn in slivers:
            if verb == "stop":
                self.state[urn] = "stopped"
                self.booting.pop(urn, None)
            else:
                self.state[urn] = "started"
                self.booting[urn] = self.boot_polls
                if verb == "reload":
                    self.reloads.append(urn)
        return _answer(SUCCESS)

    def _Delete(self, urns: list[str], creds: list[dict[str, Any]], options: Any) -> dict[str, Any]:
        if not urns:
            return _answer(BADARGS, output="Empty URN List")
        if len(urns) != 1 or urns[0] != self.slice_urn:
            return _answer(REFUSED, output="Must pass only slice URN")
        return _answer(SUCCESS, value=[])

    # --- AM API v2 ------------------------------------------------------------------------

    def _SliverStatus(
        self, slice_urn: str, creds: list[str], options: Any = None
    ) -> dict[str, Any]:
        resources = []
        for urn, state in self.state.items():
            status = "ready"
            if state == "stopped":
                status = "stopped"
            elif self.booting.get(urn, 0) > 0:
                self.booting[urn] -= 1
                status = "changing"
            elif urn in self.failing:
                status = "failed"
            resources.append(
                {
                    "geni_urn": urn,
                    "pg_status": status,
                    "geni_status": status,
                    "geni_error": self.failing.get(urn, "") if status == "failed" else "",
                }
            )
        overall = "ready" if all(r["pg_status"] == "ready" for r in resources) else "changing"
        return _answer(
            SUCCESS,
            {
                "geni_urn": slice_urn,
                "pg_status": overall,
                "geni_status": overall,
                "geni_resources": resources,
            },
        )

    def _ListResources(self, creds: list[str], options: dict[str, Any]) -> dict[str, Any]:
        return _answer(SUCCESS, self.manifest_xml)
