"""moto in this process as one FAKE EC2 region: its set-up for the experiment, the API as the
head reaches it (EC2's own refusals and the injected faults in front of moto), and what the
realiser reads and changes of its instances.

moto is imported here only: the command line never loads it."""

from __future__ import annotations

import ctypes
import io
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs
from xml.sax.saxutils import escape

from elastic.errors import TestbedError
from elastic.testbed.backends.local import capacity
from elastic.testbed.backends.local.fake_ec2 import sigv4
from elastic.testbed.backends.local.fake_ec2.faults import Faults
from elastic.testbed.backends.local.fake_ec2.plan import Plan
from elastic.testbed.backends.local.fake_ec2.realiser import Seen

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]

CLONE_NEWNET = 0x40000000
IMAGE_NAME = "ptc-prepared"
IMAGE_DESCRIPTION = (
    "FAKE EC2: the local testbed's prepared image (the roles' software, nothing of any cluster)"
)


@dataclass(frozen=True)
class Ids:
    vpc_id: str
    subnet_id: str
    image_id: str
    zone: str


def ec2_error(status: int, code: str, message: str) -> tuple[str, bytes]:
    """EC2's error answer (its query API's XML), as botocore parses it."""
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>'
        f"<Code>{escape(code)}</Code><Message>{escape(message)}</Message>"
        f"</Error></Errors><RequestID>{uuid.uuid4()}</RequestID></Response>"
    )
    reason = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
              500: "Internal Server Error"}[status]  # fmt: skip
    return f"{status} {reason}", body.encode()


def no_capacity_message(instance_type: str, zone: str) -> str:
    return (
        f"We currently do not have sufficient {instance_type} capacity in the Availability "
        f"Zone you requested ({zone}). Our system will be working on provisioning additional "
        "capacity."
    )


def refusal(
    params: dict[str, list[str]], ids: Ids, faults: Faults, free_machines: Callable[[], int]
) -> tuple[int, str, str] | None:
    """EC2's answer to a RunInstances call this region refuses, else None: parameters first
    (an image it does not have, no subnet in an account without a default VPC), then capacity
    (an injected fault, or fewer free machines on the testbed than the call's MinCount)."""

    def first(key: str) -> str | None:
        values = params.get(key)
        return values[0] if values else None

    image = first("ImageId")
    if image != ids.image_id:
        return 400, "InvalidAMIID.NotFound", f"The image id '[{image}]' does not exist"
    subnets = [v[0] for k, v in params.items() if k == "SubnetId" or k.endswith(".SubnetId")]
    if not subnets:
        return 400, "VPCIdNotSpecified", "No default VPC for this user"
    if faults.take_capacity() or int(first("MinCount") or "1") > free_machines():
        instance_type = first("InstanceType") or "m1.small"
        return 500, "InsufficientInstanceCapacity", no_capacity_message(instance_type, ids.zone)
    return None


def api(
    moto_app: WsgiApp,
    ids: Ids,
    faults: Faults,
    free: Callable[[], int],
    secrets: Mapping[str, str],
) -> WsgiApp:
    """The API as the head sees it: moto, behind the region's credentials (``secrets``: key id
    -> secret) and EC2's refusals; moto's own control endpoints (reset, state) are not served."""

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if str(environ.get("PATH_INFO", "")).startswith("/moto-api"):
            status, body = ec2_error(403, "UnauthorizedOperation", "not served by this region")
            start_response(status, [("Content-Type", "text/xml")])
            return [body]
        length = int(environ.get("CONTENT_LENGTH") or 0)
        raw = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(raw)
        unsigned = sigv4.check(environ, raw, secrets)
        if unsigned is not None:
            status, body = ec2_error(*unsigned)
            start_response(status, [("Content-Type", "text/xml")])
            return [body]
        params = parse_qs(raw.decode(errors="replace")) | parse_qs(
            str(environ.get("QUERY_STRING", ""))
        )
        if params.get("Action", [""])[0] == "RunInstances":
            refused = refusal(params, ids, faults, free)
            if refused is not None:
                status, body = ec2_error(*refused)
                start_response(status, [("Content-Type", "text/xml")])
                return [body]
        return moto_app(environ, start_response)

    return app


def _pending_at_launch() -> None:
    """moto shows an instance running as it is launched; EC2 shows it pending until it has
    booted, which the realiser decides here."""
    from moto.ec2.models.instances import InstanceBackend

    original = InstanceBackend.run_instances
    if getattr(original, "ptc_pending", False):
        return

    def run_instances(self: Any, *args: Any, **kwargs: Any) -> Any:
        reservation = original(self, *args, **kwargs)
        for instance in reservation.instances:
            instance._state.name, instance._state.code = "pending", 0
        return reservation

    run_instances.ptc_pending = True  # type: ignore[attr-defined]
    InstanceBackend.run_instances = run_instances  # type: ignore[method-assign]


class Region:
    """One region of moto's EC2 in this process."""

    def __init__(self, name: str) -> None:
        from moto.core.models import DEFAULT_ACCOUNT_ID
        from moto.ec2.models import ec2_backends

        _pending_at_launch()
        self.name = name
        self.backend: Any = ec2_backends[DEFAULT_ACCOUNT_ID][name]
        self.lock = threading.Lock()

    def set_up(self, plan: Plan) -> Ids:
        """The experiment's LAN as a VPC, the region's subnet in it, and the prepared image
        registered as the region's one AMI."""
        zone = f"{self.name}a"
        with self.lock:
            vpc = self.backend.create_vpc(str(plan.vpc))
            vpc.add_tag("Name", f"FAKE EC2: LAN {plan.lan}")
            subnet = self.backend.create_subnet(vpc.id, str(plan.subnet), availability_zone=zone)
            image = self.backend.register_image(name=IMAGE_NAME, description=IMAGE_DESCRIPTION)
        return Ids(vpc.id, subnet.id, image.id, zone)

    def wsgi(self, ids: Ids, faults: Faults, secrets: Mapping[str, str]) -> WsgiApp:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

        moto_app: WsgiApp = DomainDispatcherApplication(create_backend_app)
        return api(moto_app, ids, faults, lambda: capacity.usage().free, secrets)

    # -- what the realiser reads and changes ---------------------------------------------

    def seen(self) -> list[Seen]:
        with self.lock:
            instances = list(self.backend.all_instances())
        return [
            Seen(
                instance_id=i.id,
                state=i._state.name,
                node=next((t["value"] for t in i.get_tags() if t["key"] == "ptc:node"), None),
                address=i.private_ip,
                subnet_id=i.subnet_id,
                launched=_epoch(i.launch_time),
            )
            for i in instances
        ]

    def user_data(self, instance_id: str) -> bytes:
        with self.lock:
            data = self.backend.get_instance(instance_id).user_data
        if not data:
            return b""
        import base64

        return base64.b64decode(str(data))

    def set_running(self, instance_id: str) -> bool:
        """pending -> running; False when the instance is no longer pending."""
        with self.lock:
            instance = self.backend.get_instance(instance_id)
            if instance._state.name != "pending":
                return bool(instance._state.name == "running")
            instance._state.name, instance._state.code = "running", 16
            return True

    def end(self, instance_id: str, reason: tuple[str, str], by_service: bool) -> None:
        """Terminate the instance with EC2's state reason ``(code, message)``."""
        from moto.ec2.models.instances import StateReason

        with self.lock:
            instance = self.backend.get_instance(instance_id)
            if instance._state.name == "terminated":
                return
            instance.terminate()
            instance.state_reason = StateReason(reason[1], reason[0])
            if by_service:
                when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S GMT")
                instance._reason = f"Service initiated ({when})"


def _epoch(value: Any) -> float:
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
    return datetime.fromisoformat(str(value)).replace(tzinfo=UTC).timestamp()


# -- the API inside the head's network namespace ---------------------------------------------


def listen_in(pid: int, host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` in the network namespace of process ``pid``
    (the head's init). The socket stays in that namespace; this process does not. The switch
    happens in a thread of its own, as a namespace is a thread's."""
    result: list[socket.socket | BaseException] = []

    def work() -> None:
        try:
            result.append(_listen_in(pid, host, port))
        except BaseException as err:
            result.append(err)

    thread = threading.Thread(target=work, name="fake-ec2-netns")
    thread.start()
    thread.join()
    got = result[0]
    if isinstance(got, BaseException):
        raise got
    return got


def _listen_in(pid: int, host: str, port: int) -> socket.socket:
    libc = ctypes.CDLL(None, use_errno=True)
    own = os.open(f"/proc/self/task/{threading.get_native_id()}/ns/net", os.O_RDONLY)
    try:
        target = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    except OSError as err:
        os.close(own)
        raise TestbedError(f"the API node's network namespace (pid {pid}): {err}") from err
    try:
        if libc.setns(target, CLONE_NEWNET) != 0:
            raise TestbedError(f"setns into pid {pid}: {os.strerror(ctypes.get_errno())}")
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(64)
        finally:
            if libc.setns(own, CLONE_NEWNET) != 0:
                # This thread is lost to the other namespace; it ends here, the process not.
                raise TestbedError("could not return from the API node's network namespace")
        return sock
    finally:
        os.close(target)
        os.close(own)


class Listener:
    """The API served on one socket (werkzeug's threaded server), until ``close``."""

    def __init__(self, sock: socket.socket, app: WsgiApp) -> None:
        from moto.moto_server.werkzeug_app import MotoRequestHandler
        from werkzeug.serving import make_server

        host, port = sock.getsockname()[:2]
        self.server = make_server(host, port, app, threaded=True,
                                  request_handler=MotoRequestHandler, fd=sock.fileno())  # fmt: skip
        sock.close()  # the server holds its own copy
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)
