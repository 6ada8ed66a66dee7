"""geni-lib workaround ``portal_extensions``: RSpec extensions of the portal line that 0.9.9.4
lacks, writing the same elements: ``Node.installRootKeys``, ``Request.disableRootKeys``,
``Request.initVNC``, ``Node.startVNC``, ``Link.createSharedVlan``, ``Link.setJumboFrames``,
``Request.DockerContainer``, and ``geni.rspec.emulab.ansible`` (``Role``, ``RoleBinding``,
``Override``, ``Request.addRole``, ``Node.bindRole``, ``addOverride``). Each is added only where
geni-lib does not define it.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import sys
from types import ModuleType
from typing import Any

from elastic.profile.namespaces import ANSIBLE_NS, EMULAB_NS, GENI_NS, SHARED_VLAN_NS

#
# RSpec extensions of the portal line, each writing the element the portal's geni-lib writes
# (checked against recordings in tests/unit/testbed/recordings/). Registered through
# geni-lib's own EXTENSIONS lists, so they appear as methods of Request, Node and Link.


def _sub(parent: Any, ns: str, tag: str, **attrs: str) -> Any:
    from lxml import etree

    el = etree.SubElement(parent, f"{{{ns}}}{tag}")
    for key, value in attrs.items():
        el.set(key, value)
    return el


def _tf(flag: object) -> str:
    return "true" if flag else "false"


class installRootKeys:
    """Node: which of root's ssh keys (private, public) the testbed installs on the node."""

    def __init__(self, private: bool = True, public: bool = True) -> None:
        self._private = private
        self._public = public

    def _write(self, root: Any) -> Any:
        _sub(root, EMULAB_NS, "rootkey", private=_tf(self._private), public=_tf(self._public))
        return root


class disableRootKeys:
    """Request: install no root ssh keys on any node."""

    __ONCEONLY__ = True

    def _write(self, root: Any) -> Any:
        _sub(root, EMULAB_NS, "disablerootkey")
        return root


class initVNC:
    """Request: the VNC password resource the portal's web consoles need."""

    __ONCEONLY__ = True
    __WANTPARENT__ = True

    def __init__(self) -> None:
        import geni.rspec.igext as igext

        self.password = igext.Password("vncpasswd")

    @property
    def _parent(self) -> Any:
        return self.request

    @_parent.setter
    def _parent(self, request: Any) -> None:
        self.request = request
        request.addResource(self.password)

    def _write(self, root: Any) -> Any:
        return root


STARTVNC_COMMAND = (
    "(cd /var/tmp &&         (test -e /var/tmp/novnc-setup ||          git clone "
    "https://gitlab.flux.utah.edu/emulab/novnc-setup.git) &&         "
    "/bin/bash /var/tmp/novnc-setup/startvnc.sh)"
)


class startVNC:
    """Node: run a VNC server (an execute service plus <emulab:x11vnc/>), and initVNC once."""

    __ONCEONLY__ = True
    __WANTPARENT__ = True

    def __init__(self, nostart: bool = False) -> None:
        self.nostart = nostart

    @property
    def _parent(self) -> Any:
        return self.node

    @_parent.setter
    def _parent(self, node: Any) -> None:
        import geni.rspec.pg as pg

        self.node = node
        if not self.nostart:
            node.addService(pg.Execute(shell="sh", command=STARTVNC_COMMAND))
        request = getattr(node, "_parent", None) or _current_request()
        if request is not None:
            with contextlib.suppress(pg.DuplicateExtensionError):
                request.initVNC()

    def _write(self, root: Any) -> Any:
        _sub(root, EMULAB_NS, "x11vnc")
        return root


def _current_request() -> Any:
    portal = sys.modules.get("geni.portal")
    return getattr(getattr(portal, "context", None), "_request", None)


class createSharedVlan:
    """Link: make this link's VLAN a shared VLAN other experiments can join."""

    __ONCEONLY__ = True

    def __init__(self, name: str) -> None:
        self._name = name

    def _write(self, root: Any) -> Any:
        _sub(root, SHARED_VLAN_NS, "create_shared_vlan", name=self._name)
        return root


class setJumboFrames:
    """Link: 9000-byte MTU on the link."""

    __ONCEONLY__ = True

    def _write(self, root: Any) -> Any:
        _sub(root, EMULAB_NS, "jumboframes", enabled="true")
        return root


def _docker_container_class() -> type:
    import geni.rspec.pg as pg

    class DockerContainer(pg.Node):  # type: ignore[misc]
        """A Docker container node (sliver type emulab-docker)."""

        def __init__(
            self, client_id: str, component_id: str | None = None, exclusive: bool = False
        ) -> None:
            super().__init__(
                client_id, "emulab-docker", component_id=component_id, exclusive=exclusive
            )
            self.cores: int | None = None
            self.ram: int | None = None
            self.docker_ptype: str | None = None
            self.docker_extimage: str | None = None
            self.docker_dockerfile: str | None = None
            self.docker_tbaugmentation: str | None = None
            self.docker_tbaugmentation_update = False
            self.docker_ssh_style: str | None = None
            self.docker_exec_shell: str | None = None
            self.docker_entrypoint: str | None = None
            self.docker_cmd: str | None = None
            self.docker_env: str | None = None
            self.docker_privileged = False

        def _write(self, root: Any) -> Any:
            nd = super()._write(root)
            st = nd.find(f"{{{GENI_NS}}}sliver_type")
            wanted = (
                self.cores,
                self.ram,
                self.docker_extimage,
                self.docker_tbaugmentation,
                self.docker_tbaugmentation_update,
                self.docker_ssh_style,
                self.docker_cmd,
                self.docker_env,
                self.docker_entrypoint,
                self.docker_privileged,
            )
            if any(wanted):
                attrs: dict[str, str] = {}
                for attr, value in (
                    ("cores", self.cores),
                    ("ram", self.ram),
                    ("extimage", self.docker_extimage),
                    ("dockerfile", self.docker_dockerfile),
                ):
                    if value:
                        attrs[attr] = str(value)
                if self.docker_tbaugmentation is not None:
                    attrs["tbaugmentation"] = str(self.docker_tbaugmentation)
                attrs["tbaugmentation_update"] = "1" if self.docker_tbaugmentation_update else "0"
                for attr, value in (
                    ("ssh_style", self.docker_ssh_style),
                    ("exec_shell", self.docker_exec_shell),
                    ("entrypoint", self.docker_entrypoint),
                    ("cmd", self.docker_cmd),
                    ("env", self.docker_env),
                ):
                    if value is not None:
                        attrs[attr] = str(value)
                attrs["privileged"] = str(self.docker_privileged)
                _sub(st, EMULAB_NS, "docker", **attrs)
            if self.docker_ptype is not None:
                _sub(st, EMULAB_NS, "docker_ptype", name=self.docker_ptype)
            return nd

    return DockerContainer


def _ansible_module() -> ModuleType:
    """``geni.rspec.emulab.ansible`` as the portal line has it: roles, bindings, overrides."""
    import geni.rspec.pg as pg

    mod = ModuleType("geni.rspec.emulab.ansible", "Ansible roles and overrides (ptc compat).")

    class Role(pg.Resource):  # type: ignore[misc]
        def __init__(
            self,
            name: str,
            path: str | None = None,
            source: str | None = None,
            source_type: str | None = None,
            group: str | None = None,
            auto: bool = True,
            playbooks: Any = None,
        ) -> None:
            super().__init__()
            self.name, self.path, self.source = name, path, source
            self.source_type, self.group, self.auto = source_type, group, auto
            self.playbooks = list(playbooks or [])

        def _write(self, root: Any) -> Any:
            el = _sub(
                root,
                ANSIBLE_NS,
                "role",
                name=self.name,
                path=self.path or "",
                source=self.source or "",
                source_type=self.source_type or "",
                group=self.group or "",
                auto=str(self.auto),
            )
            for playbook in self.playbooks:
                playbook._write(el)
            super()._write(el)
            return el

    class RoleBinding:
        def __init__(self, role: str) -> None:
            self.role = role

        def _write(self, root: Any) -> Any:
            return _sub(root, ANSIBLE_NS, "role_binding", role=self.role)

    class Override(pg.Resource):  # type: ignore[misc]
        def __init__(
            self,
            name: str,
            value: str | None = None,
            source: str | None = None,
            source_name: str | None = None,
            on_empty: bool = True,
        ) -> None:
            super().__init__()
            self.name, self.value, self.source = name, value, source
            self.source_name, self.on_empty = source_name, on_empty

        def _write(self, root: Any) -> Any:
            el = _sub(
                root,
                ANSIBLE_NS,
                "override",
                name=self.name,
                source=self.source or "",
                source_name=self.source_name or "",
                on_empty=str(self.on_empty),
            )
            if self.value is not None:
                el.text = self.value
            super()._write(el)
            return el

    def _adder(attr: str) -> type:
        class Adder:
            def __init__(self, item: Any) -> None:
                setattr(self, attr, item)

            def _write(self, root: Any) -> Any:
                getattr(self, attr)._write(root)
                return root

        return Adder

    addRole, bindRole, addOverride = _adder("_role"), _adder("_binding"), _adder("_override")
    for name, obj in {
        "Role": Role,
        "RoleBinding": RoleBinding,
        "Override": Override,
        "addRole": addRole,
        "bindRole": bindRole,
        "addOverride": addOverride,
        "ANSIBLE_NAMESPACE": ANSIBLE_NS,
    }.items():
        setattr(mod, name, obj)
    pg.Request.EXTENSIONS.append(("addRole", addRole))
    pg.Request.EXTENSIONS.append(("addOverride", addOverride))
    pg.Node.EXTENSIONS.append(("bindRole", bindRole))
    pg.Node.EXTENSIONS.append(("addOverride", addOverride))
    return mod


def _register(owner: Any, name: str, ext: Any) -> None:
    if not any(existing == name for existing, _ in owner.EXTENSIONS):
        owner.EXTENSIONS.append((name, ext))


def install() -> None:
    import geni.rspec.emulab as emulab
    import geni.rspec.emulab.emuext as emuext
    import geni.rspec.igext as igext
    import geni.rspec.pg as pg

    for owner, name, ext in (
        (pg.Node, "installRootKeys", installRootKeys),
        (pg.Request, "disableRootKeys", disableRootKeys),
        (pg.Request, "initVNC", initVNC),
        (pg.Node, "startVNC", startVNC),
        (pg.Link, "createSharedVlan", createSharedVlan),
        (pg.Link, "setJumboFrames", setJumboFrames),
    ):
        if not hasattr(emuext, name):
            setattr(emuext, name, ext)
            setattr(emulab, name, ext)
            _register(owner, name, ext)
    if not hasattr(igext, "DockerContainer"):
        docker = _docker_container_class()
        igext.DockerContainer = docker
        emulab.DockerContainer = docker
        _register(pg.Request, "DockerContainer", docker)
    name = "geni.rspec.emulab.ansible"
    if name not in sys.modules and importlib.util.find_spec(name) is None:
        mod = _ansible_module()
        mod.__spec__ = importlib.machinery.ModuleSpec(name, None)
        sys.modules[mod.__name__] = mod
        emulab.ansible = mod
