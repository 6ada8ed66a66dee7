"""Launch at the first site with room: the sites in the caller's order (cheapest first, say),
moving on when one answers with a capacity error, keeping what each site did make."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from elastic.errors import InputError
from elastic.events import OnEvent, Reporter
from elastic.sites.ec2.errors import CapacityError, Ec2Error
from elastic.sites.ec2.records import Instance
from elastic.sites.ec2.settings import SiteSettings
from elastic.sites.ec2.userdata import JoinSpec


class Launcher(Protocol):
    """What the fallback needs of a provider (``Ec2Provider`` is one)."""

    def site(self, name: str) -> SiteSettings: ...

    def launch(
        self,
        cluster: str,
        site: str,
        count: int,
        user_data: JoinSpec,
        on_event: OnEvent | None = None,
    ) -> tuple[Instance, ...]: ...


@dataclass(frozen=True)
class Placement:
    """Where the nodes went, and the sites that had no room (in the order tried)."""

    instances: tuple[Instance, ...]
    full: tuple[CapacityError, ...]

    def count_at(self, site: str) -> int:
        return sum(1 for i in self.instances if i.site == site)


def launch_with_fallback(
    launcher: Launcher,
    cluster: str,
    sites: Sequence[str],
    count: int,
    user_data: JoinSpec,
    on_event: OnEvent | None = None,
) -> Placement:
    """``count`` nodes of ``cluster``, from the first of ``sites`` with room, the rest from the
    next ones. A CapacityError when no site had room for all: its ``launched`` holds every node
    made (they run; the caller keeps or ends them). Any other failure stops at once, also with
    every node made on the error."""
    if isinstance(sites, str) or not sites:
        raise InputError("sites: name at least one site, in the order to try them")
    order = list(dict.fromkeys(sites))
    for site in order:  # an unknown site is refused before any instance is made
        launcher.site(site)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise InputError(f"count: {count!r} is not a whole number of nodes >= 1")
    report = Reporter("ec2-fallback", on_event)
    report.begin(f"{cluster}: {count} node(s), trying {', '.join(order)}", total=count)
    made: list[Instance] = []
    full: list[CapacityError] = []
    for site in order:
        try:
            made.extend(launcher.launch(cluster, site, count - len(made), user_data, on_event))
        except CapacityError as e:
            made.extend(e.launched)
            full.append(e)
            report.status(f"{site}: no room ({e.code}) after {len(e.launched)} node(s)")
            continue
        except Ec2Error as e:
            raise type(e)(
                str(e),
                site=e.site,
                operation=e.operation,
                code=e.code,
                launched=[*made, *e.launched],
            ) from e
        break
    if len(made) < count:
        tried = "; ".join(f"{e.site}: {e.code}" for e in full)
        report.end(f"{cluster}: {len(made)} of {count} node(s)", launched=len(made))
        raise CapacityError(
            f"ec2 sites {', '.join(order)}: launch failed: no room for {count - len(made)} of "
            f"{count} node(s) ({tried})",
            site=",".join(order),
            operation="launch",
            code=full[-1].code,
            launched=made,
        )
    report.end(f"{cluster}: {count} node(s)", launched=len(made))
    return Placement(tuple(made), tuple(full))
