"""mitogen's linear strategy, without mitogen's CPU pinning on machines of fewer than four CPUs.

mitogen pins its connection multiplexer to CPU 0 and, where there are fewer than four CPUs,
ansible-playbook's main process, every worker it forks (one per task and host) and their SSH
children all to CPU 1 (``ansible_mitogen.affinity.FixedPolicy``). On such a machine the whole
controller then shares one CPU while the other serves the multiplexer and little else; on the
local testbed the nodes share the same CPUs too. There this strategy leaves placement to the
kernel; with four CPUs or more, mitogen's policy stays.

mitogen lists every installed collection (reading each one's metadata) in a worker the first
time that worker runs a module from a collection, and a worker runs one task: so every task of
a collection's module paid that listing again. Here it is listed once, by the main process
before the workers fork, and each worker inherits the list.

A task that its condition skips on a host is skipped here, in the main process, without a worker.
Ansible forks a worker for every task and host and evaluates the task's ``when`` in it, so a
skipped task cost a fork, the worker's start and its result's way back: most of what a task that
runs costs the controller (about 14 ms of wall time per host, 60 skipped tasks on 17 hosts taking
14 s). Here the condition is evaluated first with the same variables the worker would have (the
task's, and the connection's from the play context); when it is false the host gets the result
the worker would have sent (``skipped``, the ``false_condition``, ``no_log``), through the same
processing, callbacks and ``register`` as any other. A task the main process cannot decide this
way goes to a worker as before: one whose condition is true or cannot be evaluated here, a loop
(its condition is evaluated per item), a delegated task (its condition sees the delegated
host's variables).

A task that only the controller can run (an include, ``include_vars``, ``set_fact``,
``assert``, ``debug``, ``fail`` and the arguments check a role's ``argument_specs`` adds) runs in
the main process too: Ansible's own task executor, on a copy of the task as a worker has one, its
result sent through the same queue a worker sends it through. Such a task never reaches a node,
yet every one cost a worker per host: seventeen of the thirty-six tasks a compute node ran in a
deploy. A loop, a delegated, timed, retried or asynchronous one still goes to a worker, where a
wait or a sleep blocks nobody else.

Everything else is ``mitogen_linear``: the order of plays and tasks and the handler semantics
are Ansible's linear strategy's.
"""

from __future__ import annotations

import multiprocessing
import sys
from pathlib import Path
from typing import Any

from ansible import constants

try:
    import ansible_mitogen
except ImportError:
    # mitogen unpacked beside Ansible rather than installed (the head's copy): found where its
    # own strategy plugins are configured, as its strategy files find it themselves.
    for entry in constants.config.get_config_value("DEFAULT_STRATEGY_PLUGIN_PATH") or ():
        if (Path(entry) / "mitogen_linear.py").is_file():
            sys.path.insert(0, str(Path(entry).resolve().parents[2]))
            break

import ansible.collections.list
import ansible_mitogen.affinity
import ansible_mitogen.loaders
import ansible_mitogen.planner
import ansible_mitogen.strategy
from ansible.errors import AnsibleError

try:  # ansible-core 2.19's; under an older Ansible (Debian's, on the head) workers skip as before
    from ansible._internal._templating._engine import TemplateEngine
    from ansible.executor.task_executor import TaskExecutor
    from ansible.executor.task_result import _RawTaskResult
    from ansible.plugins import loader as plugin_loader
    from ansible.utils.fqcn import add_internal_fqcns

    SKIPS_IN_MAIN = True
except ImportError:
    SKIPS_IN_MAIN = False

DOCUMENTATION = """
    name: ptc_mitogen_linear
    short_description: mitogen's linear strategy, without its CPU pinning on small machines
    description:
      - mitogen_linear, except that on a controller of fewer than four CPUs ansible-playbook's
        processes are not pinned to one CPU, that the installed collections are listed once
        rather than by every worker that runs a collection's module, that a task its
        condition skips on a host is skipped without forking a worker for it, and that a task
        only the controller runs (an include, include_vars, set_fact, assert, debug, fail, a
        role's arguments check) runs without one.
"""

# mitogen's own threshold: below it, its policy puts the controller and every worker on CPU 1.
PINNING_MIN_CPUS = 4


def unpin(cpus: int) -> bool:
    """Whether mitogen's CPU placement is left out on a machine of ``cpus`` CPUs."""
    return cpus < PINNING_MIN_CPUS


if unpin(multiprocessing.cpu_count()):
    ansible_mitogen.affinity.policy = ansible_mitogen.affinity.Policy()  # places nothing


class _Collections:
    """The installed collections' directories, listed once in the process that forks the workers."""

    dirs: tuple[str, ...] | None = None

    @classmethod
    def list(cls) -> tuple[str, ...]:
        if cls.dirs is None:
            cls.dirs = tuple(
                p.decode("utf-8") for p in ansible.collections.list.list_collection_dirs()
            )
        return cls.dirs


def _load_collections(invocation: Any) -> None:
    """mitogen's ``planner._load_collections``, from the list made before the fork."""
    invocation._extra_sys_paths.update(_Collections.list())


ansible_mitogen.planner._load_collections = _load_collections

Base = ansible_mitogen.loaders.strategy_loader.get("linear", class_only=True)


# Actions that run on the controller alone: their plugins never open the connection.
CONTROLLER_ACTIONS = frozenset(
    add_internal_fqcns(
        (
            "include_tasks",
            "include_role",
            "include_vars",
            "set_fact",
            "assert",
            "debug",
            "fail",
            "validate_argument_spec",
        )
    )
    if SKIPS_IN_MAIN
    else ()
)


def runs_in_main(task: Any) -> bool:
    """Whether the main process runs ``task`` itself: a controller's action, and nothing that
    would make the main process wait (a retry's sleep, a timeout's alarm, an asynchronous poll)
    or that a worker handles per item or for another host."""
    return task.action in CONTROLLER_ACTIONS and not (
        task.loop
        or task.loop_with
        or task.delegate_to
        or task.async_val
        or task.timeout
        or task.until
        or task.retries
    )


def skipped_result(
    loader: Any, host: Any, task: Any, task_vars: dict[str, Any], play_context: Any
) -> dict[str, Any] | None:
    """The result a worker would send for ``task`` on ``host`` because its condition is false, or
    None when the main process cannot tell (the task then goes to a worker as usual)."""
    if not SKIPS_IN_MAIN or not task.when or task.loop or task.loop_with or task.delegate_to:
        return None
    try:
        if task._resolve_conditional(task.when, dict(task_vars)):
            return None
    except Exception:  # the worker evaluates it again, and reports what fails
        return None
    # False on the task's variables: now with the connection's too, as the worker has them.
    variables = dict(task_vars)
    templar = TemplateEngine(loader=loader, variables=task_vars)
    try:
        context = play_context.set_task_and_variable_override(
            task=task, variables=task_vars, templar=templar
        )
        context.post_validate(templar=templar)
        if not context.remote_addr:
            context.remote_addr = host.address
        context.update_vars(variables)
    except AnsibleError:
        pass  # the worker keeps such an error for a task it does not skip
    except Exception:  # the worker's own failure, reported by the worker
        return None
    false: dict[str, Any] = {}
    try:
        if task._resolve_conditional(task.when, variables, result_context=false):
            return None
    except Exception:
        return None
    result = {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"}
    result.update(false)
    task.update_result_no_log(templar, result)
    return result


class StrategyModule(ansible_mitogen.strategy.StrategyMixin, Base):  # type: ignore[misc,valid-type]
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _Collections.list()  # in the main process, before this play forks a worker

    def _queue_task(
        self, host: Any, task: Any, task_vars: dict[str, Any], play_context: Any
    ) -> None:
        if runs_in_main(task):
            self._run_in_main(host, task, task_vars, play_context)
            return
        result = skipped_result(self._loader, host, task, task_vars, play_context)
        if result is None:
            super()._queue_task(host, task, task_vars, play_context)
            return
        self._started(host, task, task_vars, play_context)
        raw = _RawTaskResult(
            host=host, task=task, return_data=result, task_fields=task.dump_attrs()
        )
        converted = self._convert_wire_task_result_to_raw(raw.as_wire_task_result())
        with self._results_lock:
            self._results.append(converted)
        self._pending_results += 1

    def _started(self, host: Any, task: Any, task_vars: dict[str, Any], play_context: Any) -> None:
        """What queueing a task to a worker records and reports."""
        self._queued_task_cache[(host.name, task._uuid)] = {
            "host": host,
            "task": task,
            "task_vars": task_vars,
            "play_context": play_context,
        }
        self._tqm.send_callback("v2_runner_on_start", host, task)

    def _run_in_main(
        self, host: Any, task: Any, task_vars: dict[str, Any], play_context: Any
    ) -> None:
        """What a worker does with ``task``, done here: the executor squashes and post-validates
        the task it is given, so it gets a copy (under the same parent), as a forked worker has
        one; its result goes through the queue, pickled, as a worker's does."""
        self._started(host, task, task_vars, play_context)
        own = task.copy(exclude_parent=True, exclude_tasks=True)
        own._parent = task._parent
        result = TaskExecutor(
            host,
            own,
            task_vars,
            play_context,
            self._loader,
            plugin_loader.get_plugin_loader_namespace(),
            self._final_q,
            self._variable_manager,
        ).run()
        self._final_q.send_task_result(
            _RawTaskResult(host=host, task=own, return_data=result, task_fields=own.dump_attrs())
        )
        self._pending_results += 1
