"""The settings of an EC2 provider: one region (and, for the fake, an endpoint URL) and its sites.

A site is one way of getting nodes in that region: an image, an instance type, optionally a
subnet (which fixes the availability zone), security groups, a key pair, on-demand or spot, and
the price of a node-hour that a pool compares across sites. Credentials are not settings: boto3
finds them in its ordinary chain (environment, profile, instance role), so they never pass
through a command line, a settings file or a log.

Every refusal is an ``InputError`` naming the field at fault (``sites.NAME.image_id``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from elastic.errors import InputError

# Sites and clusters go into node names, which become hostnames (63 characters at most, of
# letters, digits and dashes): cluster-site-suffix must fit, so each part is kept short.
NAME_MAX = 20
NAME = re.compile(r"^[a-z][a-z0-9-]*$")
REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+$")
IMAGE = re.compile(r"^ami-[0-9a-f]{8,17}$")
INSTANCE_TYPE = re.compile(r"^[a-z][a-z0-9-]*\.[a-z0-9]+$")
SUBNET = re.compile(r"^subnet-[0-9a-f]{8,17}$")
GROUP = re.compile(r"^sg-[0-9a-f]{8,17}$")


def check_name(value: str, field_name: str) -> str:
    """A cluster or site name usable inside a hostname; InputError naming ``field_name``."""
    if not isinstance(value, str) or not NAME.match(value) or len(value) > NAME_MAX:
        raise InputError(
            f"{field_name}: {value!r} is not a name of lowercase letters, digits and dashes "
            f"starting with a letter, at most {NAME_MAX} long"
        )
    return value


@dataclass(frozen=True)
class SiteSettings:
    """One site of the region: what its instances are made of and what a node-hour costs."""

    name: str
    image_id: str
    instance_type: str
    price_per_node_hour: float
    subnet_id: str | None = None
    security_group_ids: tuple[str, ...] = ()
    key_name: str | None = None
    spot: bool = False
    max_nodes: int = 100  # the Auto Scaling group's ceiling at this site

    def __post_init__(self) -> None:
        where = f"sites.{self.name}"
        check_name(self.name, f"sites.{self.name}")
        _match(self.image_id, IMAGE, f"{where}.image_id", "an AMI id like ami-0123456789abcdef0")
        _match(self.instance_type, INSTANCE_TYPE, f"{where}.instance_type", "like t3.micro")
        price = self.price_per_node_hour
        if isinstance(price, bool) or not isinstance(price, int | float) or not price >= 0:
            raise InputError(f"{where}.price_per_node_hour: {price!r} is not a price >= 0")
        if self.subnet_id is not None:
            _match(self.subnet_id, SUBNET, f"{where}.subnet_id", "like subnet-0123abcd")
        for group in self.security_group_ids:
            _match(group, GROUP, f"{where}.security_group_ids", "like sg-0123abcd")
        if self.key_name is not None and not (isinstance(self.key_name, str) and self.key_name):
            raise InputError(f"{where}.key_name: empty (leave it out for no key pair)")
        if not isinstance(self.spot, bool):
            raise InputError(f"{where}.spot: {self.spot!r} is not true or false")
        if isinstance(self.max_nodes, bool) or not isinstance(self.max_nodes, int):
            raise InputError(f"{where}.max_nodes: {self.max_nodes!r} is not a whole number")
        if self.max_nodes < 1:
            raise InputError(f"{where}.max_nodes: {self.max_nodes} is less than 1")


@dataclass(frozen=True)
class Ec2Settings:
    """The region, the endpoint (``None``: AWS's own; a loopback URL for the fake) and the
    sites by name."""

    region: str
    sites: Mapping[str, SiteSettings] = field(default_factory=dict)
    endpoint_url: str | None = None

    def __post_init__(self) -> None:
        _match(self.region, REGION, "region", "an AWS region like us-east-1")
        if self.endpoint_url is not None:
            parts = urlsplit(self.endpoint_url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise InputError(f"endpoint_url: {self.endpoint_url!r} is not an http(s) URL")
            if parts.username or parts.password:
                raise InputError("endpoint_url: carries credentials; boto3's chain gives them")
        if not self.sites:
            raise InputError("sites: none given; an EC2 provider needs at least one site")
        for name, site in self.sites.items():
            if name != site.name:
                raise InputError(f"sites.{name}: holds the settings of site {site.name!r}")

    def site(self, name: str) -> SiteSettings:
        """The site called ``name``; InputError naming the known ones otherwise."""
        try:
            return self.sites[name]
        except (KeyError, TypeError):
            known = ", ".join(self.sites)
            raise InputError(f"site: unknown site {name!r} (known: {known})") from None

    def by_price(self) -> list[str]:
        """The site names, cheapest node-hour first (ties: in the order given)."""
        return sorted(self.sites, key=lambda n: self.sites[n].price_per_node_hour)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Ec2Settings:
        """Settings from parsed TOML/JSON/YAML: ``region``, ``endpoint_url`` and ``sites``, a
        mapping of site name to its fields. Unknown fields are refused, naming them."""
        if not isinstance(data, Mapping):
            raise InputError("ec2 settings: not a mapping of fields")
        _no_unknown(data, {"region", "endpoint_url", "sites"}, "ec2 settings")
        raw_sites = data.get("sites") or {}
        if not isinstance(raw_sites, Mapping):
            raise InputError("sites: not a mapping of site name to its settings")
        sites = {str(name): parse_site(str(name), fields) for name, fields in raw_sites.items()}
        return cls(
            region=str(data.get("region", "")),
            sites=sites,
            endpoint_url=data.get("endpoint_url"),
        )


SITE_FIELDS = {
    "image_id",
    "instance_type",
    "price_per_node_hour",
    "subnet_id",
    "security_group_ids",
    "key_name",
    "spot",
    "max_nodes",
}


def parse_site(name: str, fields: Any) -> SiteSettings:
    if not isinstance(fields, Mapping):
        raise InputError(f"sites.{name}: not a mapping of fields")
    _no_unknown(fields, SITE_FIELDS, f"sites.{name}")
    for required in ("image_id", "instance_type", "price_per_node_hour"):
        if required not in fields:
            raise InputError(f"sites.{name}.{required}: missing")
    groups = fields.get("security_group_ids", ())
    if isinstance(groups, str) or not isinstance(groups, Sequence):
        raise InputError(f"sites.{name}.security_group_ids: not a list of group ids")
    return SiteSettings(
        name=name,
        image_id=fields["image_id"],
        instance_type=fields["instance_type"],
        price_per_node_hour=fields["price_per_node_hour"],
        subnet_id=fields.get("subnet_id"),
        security_group_ids=tuple(groups),
        key_name=fields.get("key_name"),
        spot=fields.get("spot", False),
        max_nodes=fields.get("max_nodes", 100),
    )


def _no_unknown(data: Mapping[str, Any], known: set[str], where: str) -> None:
    if unknown := sorted(set(map(str, data)) - known):
        raise InputError(f"{where}.{unknown[0]}: unknown field (known: {', '.join(sorted(known))})")


def _match(value: object, pattern: re.Pattern[str], field_name: str, what: str) -> None:
    if not isinstance(value, str) or not value:
        raise InputError(f"{field_name}: empty; give {what}")
    if not pattern.match(value):
        raise InputError(f"{field_name}: {value!r} is not {what}")
