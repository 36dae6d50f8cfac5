"""`rf.Reactor`: the declaration of a workflow, a thin front over its `StepTable`.

The decorators here validate their options and delegate: `declare` records each step in the
reactor's step table (`table.py`; no I/O, no tasks), and this front makes the handle
(`rf.Step`) it returns. The helpers work on the table and never import this module. The run
methods (`run`, `get`, `continue_`, ...) come from `RunMethods` and delegate to the runtime.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, Protocol, TypeVar, overload

from reactorflow import pydantic_types
from reactorflow.definition import checks, declare, mermaid, migrations, naming
from reactorflow.definition.gate_secrets import input_masks
from reactorflow.definition.gates import BoundGate, bind
from reactorflow.definition.graph import plan_for
from reactorflow.definition.handles import After, MapStep, Step, after_names
from reactorflow.definition.runs import RunMethods
from reactorflow.definition.schedules import bind as bind_schedules
from reactorflow.definition.specs import ResumeMode, StepKind
from reactorflow.definition.subjects import check_subject
from reactorflow.definition.sync import SyncRunMethods
from reactorflow.definition.table import Handoff, StepSpec, StepTable
from reactorflow.errors import DefinitionError
from reactorflow.retry import Retry
from reactorflow.status import HandlerKind

if TYPE_CHECKING:
    from reactorflow.middleware import Middleware
    from reactorflow.snapshot import Run

MigrationFn = migrations.MigrationFn

P = ParamSpec("P")
R = TypeVar("R")
StepFn = Callable[P, Coroutine[Any, Any, R]]


class StepDecorator(Protocol):
    """What a called decorator (`@flow.step(...)`) returns."""

    def __call__(self, fn: Callable[P, Coroutine[Any, Any, R]], /) -> Step[P, R]: ...


class MapDecorator(Protocol):
    """What `@flow.map_step(...)` returns."""

    def __call__(self, fn: Callable[P, Coroutine[Any, Any, R]], /) -> MapStep[P, R]: ...


class Reactor(RunMethods["Reactor"]):
    """A workflow: steps wired by parameter name into a graph, run as a saga.

    `name` is the reactor's durable identity (stored with every run, used by workers to find
    the reactor) and must be unique among the reactors alive in a process; declaring it again
    from the same place (a notebook cell run twice, a module reloaded) replaces the earlier one,
    declaring it from another place is a `DefinitionError` naming both places.

    Besides the arguments below, a reactor exposes `handoff` (the declared hand-off point,
    `("after" | "before", step name)`, or `None`), `steps` and `value_step`.

    Args:
        name: The durable identity: letters, digits, `_`, `-`, `.` and `:`.
        inputs: A `msgspec.Struct`, dataclass or `TypedDict` type, or `None` for a reactor
            without inputs.
        returns: The step whose result is the reactor's value (default: the last declared step
            that is not an async unit; naming an async unit is a `DefinitionError`).
        max_concurrency: The most steps in flight per run (`None`: no limit).
        middleware: `rf.Middleware` for this reactor's runs (after the configured ones).
        always_dispatch: Make every `run` behave like `dispatch`: the whole run executes in a
            worker (see [Workers](workers.md#dispatching-a-whole-run)).
        gates: Gates every run of this reactor holds, taken by `run()` in the caller (a busy
            one raises `rf.GateBusy` with nothing stored); see [Gates](gates.md).
        schedules: `rf.Schedule`s that start dispatched runs of this reactor on their cron
            ticks (see [Schedules](schedules.md)).
        version: The version of this declaration, a whole number >= 1 (see
            [Deploying changes](deploying.md)): new runs start on the highest version declared
            in the process, a stored run continues on its own (`run.version`), and a version
            no module declares needs a migration (`@reactor.migrate(from_version=N)`).
        on_failure: What a step's failure (after its last attempt) does to the run:
            `"rollback"` (the saga: undo what completed, end `failed`) or `"hold"` (keep what
            completed and end `held`, for an operator to `retry_step`, `skip_step` or `undo`;
            see [Repairing runs](repairing.md)). A step's own `on_failure=` wins.
        hold_timeout: Seconds (or a `timedelta`) a held run waits for an operator before it
            rolls back by itself (`None`: it waits until one acts).
        subject: Whose personal data the runs carry: a template over the inputs, like a gate
            key (`"{customer_id}"`). Each subject's values are sealed under its own data key,
            which `rf.forget_subject` destroys (see
            [Protecting data](protecting-data.md#subjects-and-erasure)). Only a digest of the
            subject is stored, never its text.

    Raises:
        DefinitionError: A bad name, `max_concurrency`, `returns`, schedule or version (naming
            the field), or the name and version already declared from another place; a `subject`
            template that is not a template or names an unknown input.
    """

    def __init__(
        self,
        name: str,
        *,
        inputs: type | None = None,
        returns: str | None = None,
        max_concurrency: int | None = None,
        middleware: Sequence[Middleware] = (),
        always_dispatch: bool = False,
        gates: Sequence[Any] = (),
        schedules: Sequence[Any] = (),
        version: int = 1,
        on_failure: str = "rollback",
        hold_timeout: float | timedelta | None = None,
        subject: str | None = None,
    ) -> None:
        if not isinstance(name, str) or not checks.REACTOR_NAME.match(name):
            raise DefinitionError(
                f"reactor name {name!r} must be a non-empty string of letters, digits, '_', '-', "
                "'.' or ':'"
            )
        if max_concurrency is not None and (
            isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int)
            or max_concurrency < 1
        ):
            raise DefinitionError(
                f"reactor {name!r}: max_concurrency={max_concurrency!r} must be a whole number "
                ">= 1, or None for no limit",
                reactor=name,
            )
        if returns is not None and not isinstance(returns, str):
            raise DefinitionError(f"reactor {name!r}: returns={returns!r} must be a step name",
                                  reactor=name)
        self.version = checks.version(version, f"reactor {name!r}: version", name)
        self.on_failure = checks.failure_policy(on_failure, f"reactor {name!r}", name)
        self.hold_timeout = checks.check_seconds(hold_timeout, "hold_timeout",
                                                 f"reactor {name!r}", name, "")
        self.migrations: dict[int, migrations.MigrationHook] = {}
        self.table = StepTable(name, inputs, checks.input_fields(inputs, name), returns)
        self.max_concurrency = max_concurrency
        self.middleware = tuple(middleware)
        self.always_dispatch = bool(always_dispatch)
        self.gates: tuple[BoundGate, ...] = bind(
            gates, where=f"reactor {name!r}", available=self.input_names, reactor=name,
            secrets=input_masks(inputs) if gates else None)
        self.schedules = bind_schedules(schedules, reactor=name)
        self.subject = check_subject(subject, reactor=name, available=self.input_names)
        self.origin = naming.caller_origin()
        naming.register(self)

    # -- introspection (the step table's, read through the front) ------------------------------

    @property
    def name(self) -> str:
        """The reactor's durable identity."""
        return self.table.name

    @property
    def inputs(self) -> type | None:
        """The inputs type, or `None`."""
        return self.table.inputs

    @property
    def input_names(self) -> tuple[str, ...]:
        """The inputs' field names."""
        return self.table.input_names

    @property
    def returns(self) -> str | None:
        """The step named by `returns=`, or `None`."""
        return self.table.returns

    @property
    def handoff(self) -> Handoff | None:
        """The declared hand-off point, `("after" | "before", step name)`, or `None`."""
        return self.table.handoff

    @property
    def steps(self) -> Mapping[str, StepSpec]:
        """The declared steps, in declaration order."""
        return self.table.steps

    @property
    def value_step(self) -> str | None:
        """The step whose result is the reactor's value: `returns=`, else the last declared
        step that runs in the run itself (async units are skipped: they may end later)."""
        return self.table.value_step

    @property
    def sync(self) -> SyncRunMethods:
        """The run methods for sync code: `checkout.sync.run(...)` blocks until `await
        checkout.run(...)` would return (likewise `dispatch`, `continue_`,
        `continue_by_correlation_id`, `get`, `wait`, `cancel`, `undo`, `retry`, `list_runs`,
        `ready_interrupts`). They run on one private event-loop thread per process and refuse
        inside a running event loop (`rf.SyncInEventLoop`). See [From sync code](sync.md)."""
        return SyncRunMethods(self)

    def to_mermaid(self) -> str:
        """The reactor's graph as a Mermaid flowchart (composed children as subgraphs)."""
        return mermaid.render(self)

    def interrupt_schema(self, step: str | Sequence[str]) -> dict[str, Any]:
        """The JSON Schema of an interrupt's payload (a nested one by its path).

        Args:
            step: The interrupt's name, or its path (a sequence of step names) inside composed
                children.

        Raises:
            DefinitionError: The reactor's graph is invalid, or the payload type's annotations
                can no longer be resolved (its module is gone).
            ReactorflowError: No interrupt has that name or path.
        """
        spec = plan_for(self).interrupt_spec(step)
        assert spec.interrupt is not None
        try:
            return pydantic_types.json_schema(spec.interrupt.payload_type)
        except TypeError as exc:
            raise DefinitionError(f"interrupt {spec.name!r} of reactor {self.name!r}: {exc}",
                                  reactor=self.name, step=spec.name) from exc

    def __repr__(self) -> str:
        at = "" if self.version == 1 else f" version={self.version}"
        return f"<Reactor {self.name!r}{at} steps={list(self.steps)}>"

    # -- versions --------------------------------------------------------------------------------

    @overload
    def migrate(self, run_id: str, /, *,
                actor: str | None = None) -> Coroutine[Any, Any, Run]: ...
    @overload
    def migrate(self, /, *, from_version: int) -> Callable[[MigrationFn], MigrationFn]: ...

    def migrate(self, run_id: str | None = None, /, *,
                from_version: int | None = None, actor: str | None = None) -> Any:
        """Two uses, by their arguments.

        `@reactor.migrate(from_version=N)` declares how a stored run of version N moves onto
        this reactor's version: the decorated function receives an `rf.Migration` (sync or
        async) and edits the run's records through it. Migrations chain (1 -> 2 -> 3, each
        declared on the version it leads to); see [Deploying changes](deploying.md).

        `await reactor.migrate(run_id)` moves one in-flight run onto the newest version
        declared, ahead of time, and returns its snapshot.

        Args:
            run_id: The run to migrate now (the coroutine form).
            from_version: The version the hook migrates from: a whole number >= 1 below this
                reactor's version (the decorator form).
            actor: Who migrates the run, recorded on its `run.migrated` event (the
                coroutine form; default: this process's `user@host`).

        Raises:
            DefinitionError: `from_version` is not a whole number below this reactor's version,
                or a migration from it is already declared elsewhere (both places named).
            RunNotFound: No such run of this reactor (the coroutine form).
            DefinitionChanged: No migration path leads from the run's version.
            MigrationError: The hook raised, or the migrated run would not fit the new graph;
                nothing was written.
        """
        if run_id is not None:
            if from_version is not None:
                raise DefinitionError(
                    f"reactor {self.name!r}: migrate() takes a run id (to migrate a run now) or "
                    "from_version= (to declare a migration), not both", reactor=self.name)
            return self._migrate_run(run_id, actor)
        if from_version is None:
            raise DefinitionError(
                f"reactor {self.name!r}: @reactor.migrate needs from_version=N, the version "
                "whose runs it moves onto this one", reactor=self.name)
        source = checks.version(from_version, f"reactor {self.name!r}: migrate(from_version=)",
                                self.name)
        if source >= self.version:
            raise DefinitionError(
                f"reactor {self.name!r} version {self.version}: migrate(from_version={source}) "
                f"must name a lower version than {self.version}; declare the migration on the "
                "newer version's reactor", reactor=self.name)

        def decorate(fn: MigrationFn) -> MigrationFn:
            self.migrations[source] = migrations.hook(self.name, self.version, source, fn,
                                                      self.migrations.get(source))
            naming.bump()
            return fn

        return decorate

    # -- declaration ---------------------------------------------------------------------------

    @overload
    def step(self, fn: StepFn[P, R], /) -> Step[P, R]: ...
    @overload
    def step(self, fn: None = None, /, *, name: str | None = None,
             retries: Retry | None = None, timeout: float | None = None,
             when: Callable[..., Any] | None = None, after: After = (),
             gates: Sequence[Any] = (), on_failure: str | None = None) -> StepDecorator: ...

    def step(self, fn: Any = None, /, *, name: str | None = None, retries: Retry | None = None,
             timeout: float | None = None, when: Callable[..., Any] | None = None,
             after: After = (), gates: Sequence[Any] = (),
             on_failure: str | None = None) -> Any:
        """Declare a step: `@flow.step` or `@flow.step(...)`.

        The function's parameters name the inputs and earlier steps it needs (see
        [Concepts](concepts.md#wiring)). Returns an `rf.Step` (or, called with options, a
        decorator that makes one).

        Args:
            fn: The step's `async def` function (when used as a bare decorator).
            name: The step's name (default: the function's name).
            retries: An `rf.Retry` policy (`None`: one attempt).
            timeout: Seconds each attempt may take (`rf.StepTimeout` after that).
            when: A predicate wired like a step (its parameters name inputs and earlier steps);
                the step is `skipped` when it returns false.
            after: Ordering-only dependencies: step names or `rf.Step` handles.
            gates: Gates the step holds while it runs (`rf.Lock`, `rf.Semaphore`,
                `rf.RateLimit`, `rf.Period`, `rf.OrderedLock`); see [Gates](gates.md).
            on_failure: `"rollback"` or `"hold"`: what this step's failure (after its last
                attempt) does to the run (`None`: the reactor's `on_failure`).

        Raises:
            DefinitionError: A bad name or option, a parameter that names no input or earlier
                step, or a name declared twice.
        """

        def decorate(f: Any) -> Any:
            return self._record(f, StepKind.STEP, name=name, retries=retries, timeout=timeout,
                                when=when, after=after, gates=gates, on_failure=on_failure)

        return decorate(fn) if fn is not None else decorate

    @overload
    def async_step(self, fn: StepFn[P, R], /) -> Step[P, R]: ...
    @overload
    def async_step(self, fn: None = None, /, *, name: str | None = None,
                   retries: Retry | None = None, timeout: float | None = None,
                   when: Callable[..., Any] | None = None, after: After = (),
                   gates: Sequence[Any] = ()) -> StepDecorator: ...

    def async_step(self, fn: Any = None, /, *, name: str | None = None,
                   retries: Retry | None = None, timeout: float | None = None,
                   when: Callable[..., Any] | None = None, after: After = (),
                   gates: Sequence[Any] = ()) -> Any:
        """Declare a step that runs in a worker while the run goes on.

        Steps that read its result wait for it (annotate them `rf.Outcome[T]` to receive a
        failure as a value). It takes a `compensate` handler (run once by the worker after its
        last failed attempt), never an `undo`; the run's rollback never touches it. See
        [Workers](workers.md#async-steps).

        Args:
            fn: The step's `async def` function (when used as a bare decorator).
            name: The step's name (default: the function's name).
            retries: An `rf.Retry` policy (`None`: one attempt).
            timeout: Seconds each attempt may take (`rf.StepTimeout` after that).
            when: A predicate wired like a step (its parameters name inputs and earlier steps);
                the step is `skipped` when it returns false.
            after: Ordering-only dependencies: step names or `rf.Step` handles.
            gates: Gates the step holds while it runs (`rf.Lock`, `rf.Semaphore`,
                `rf.RateLimit`, `rf.Period`, `rf.OrderedLock`); see [Gates](gates.md).

        Raises:
            DefinitionError: As for `step`.
        """

        def decorate(f: Any) -> Any:
            return self._record(f, StepKind.ASYNC_STEP, name=name, retries=retries,
                                timeout=timeout, when=when, after=after, gates=gates)

        return decorate(fn) if fn is not None else decorate

    @overload
    def interrupt(self, fn: StepFn[P, R], /) -> Step[P, R]: ...
    @overload
    def interrupt(self, fn: None = None, /, *, name: str | None = None,
                  correlation_id: str | Callable[..., str] | None = None,
                  timeout: float | timedelta | None = None, max_attempts: int | None = None,
                  resume: ResumeMode = "inline", when: Callable[..., Any] | None = None,
                  after: After = (), on_timeout: Any = None) -> StepDecorator: ...

    def interrupt(self, fn: Any = None, /, *, name: str | None = None,
                  correlation_id: str | Callable[..., str] | None = None,
                  timeout: float | timedelta | None = None, max_attempts: int | None = None,
                  resume: ResumeMode = "inline", when: Callable[..., Any] | None = None,
                  after: After = (), on_timeout: Any = None, gates: Any = None) -> Any:
        """Declare a pause point: the run waits here for a payload given to `continue_`.

        The function's `payload` parameter's annotation is the payload's schema. See
        [Interrupts](interrupts.md).

        Args:
            fn: The interrupt's `async def` function (when used as a bare decorator).
            name: The step's name (default: the function's name).
            correlation_id: A fixed id, or a function wired like a step that computes it, by
                which `continue_by_correlation_id` finds the run.
            timeout: How long the run may wait (seconds, or a `datetime.timedelta`). At the
                deadline the run is rolled back to `failed` (`rf.InterruptExpired`), unless
                `on_timeout` is given.
            max_attempts: Invalid payloads accepted before the run fails (`None`: no limit).
            resume: `"inline"` (the caller of `continue_` runs the rest) or `"background"`
                (a worker does).
            when: A predicate wired like a step; the interrupt is `skipped` when it is false.
            after: Ordering-only dependencies: step names or `rf.Step` handles.
            on_timeout: With `timeout`, what the interrupt is resumed with at its deadline,
                exactly once, as if `continue_` had delivered it: a payload (validated here),
                or a function (sync or async) taking any of the interrupt's other parameters
                by name and returning one (validated when the deadline fires: an invalid
                value fails the run with `rf.PayloadValidationError`). `None`: no payload.
            gates: Refused: an interrupt holds nothing while it waits (a
                `DefinitionError`); declare gates on the step that reads its payload.

        Raises:
            DefinitionError: A bad option (a `timeout` of zero or less; an `on_timeout`
                without `timeout`, not of the payload's schema, or a function with a parameter
                that is none of the interrupt's other parameters), `gates=`, no `payload`
                parameter, or a name declared twice.
        """
        if gates is not None:
            raise DefinitionError(
                f"reactor {self.name!r}: an interrupt cannot take gates= (it holds nothing while "
                "it waits); declare the gates on the step that reads its payload",
                reactor=self.name, step=name)
        options = dict(correlation_id=correlation_id, timeout=timeout,
                       max_attempts=max_attempts, resume=resume, on_timeout=on_timeout)

        def decorate(f: Any) -> Any:
            return self._record(f, StepKind.INTERRUPT, name=name, when=when, after=after,
                                interrupt=options)

        return decorate(fn) if fn is not None else decorate

    @overload
    def sleep(self, fn: StepFn[P, R], /) -> Step[P, R]: ...
    @overload
    def sleep(self, fn: None = None, /, *, name: str | None = None,
              when: Callable[..., Any] | None = None, after: After = ()) -> StepDecorator: ...

    def sleep(self, fn: Any = None, /, *, name: str | None = None,
              when: Callable[..., Any] | None = None, after: After = (),
              **unsupported: Any) -> Any:
        """Declare a durable sleep: `@flow.sleep` or `@flow.sleep(...)`.

        The body runs once and returns how long to wait (a `datetime.timedelta` or seconds) or
        until when (an aware `datetime`). Its deadline is checkpointed with the step, and the
        run parks holding nothing: no coroutine, thread, lock or worker. Steps that do not
        depend on it go on meanwhile. At the deadline a timer resumes the run (in a worker, or
        in this process on the embedded default) and the step completes with the deadline as
        its value: an aware UTC `datetime`, whatever the body's annotation. A sleep has no undo
        and is never retried. See [Timers](timers.md).

        Args:
            fn: The sleep's `async def` function (when used as a bare decorator).
            name: The step's name (default: the function's name).
            when: A predicate wired like a step; the sleep is `skipped` when it is false.
            after: Ordering-only dependencies: step names or `rf.Step` handles.

        Raises:
            DefinitionError: A bad name or option (a sleep takes only name, when and after), a
                parameter that names no input or earlier step, or a name declared twice.
        """
        if unsupported:
            raise DefinitionError(
                f"reactor {self.name!r}: sleep() takes name, when and after; got "
                f"{', '.join(sorted(unsupported))} (a sleep is never retried and holds no gate: "
                "declare those on the steps around it)", reactor=self.name, step=name)

        def decorate(f: Any) -> Any:
            return self._record(f, StepKind.SLEEP, name=name, when=when, after=after)

        return decorate(fn) if fn is not None else decorate

    def compose(self, child: Reactor, *, name: str | None = None,
                when: Callable[..., Any] | None = None, after: After = (),
                gates: Sequence[Any] = (), **unsupported: Any) -> StepDecorator:
        """Declare a step that runs the reactor `child` inline, inside this run.

        The decorated function returns the child's inputs; the step's result is the child's
        value. See [Composition](composition.md).

        Args:
            child: The reactor to run.
            name: The step's name (default: the function's name).
            when: A predicate wired like a step; the step is `skipped` when it is false.
            after: Ordering-only dependencies: step names or `rf.Step` handles.
            gates: Gates the step holds while it runs (`rf.Lock`, `rf.Semaphore`,
                `rf.RateLimit`, `rf.Period`, `rf.OrderedLock`); see [Gates](gates.md).

        Raises:
            DefinitionError: `child` is not a reactor, is this reactor, or an option this
                kind of step does not take was given.
        """
        self._check_child(child, "compose", unsupported, nested=True)

        def decorate(f: Any) -> Any:
            return self._record(f, StepKind.COMPOSE, name=name, when=when, after=after,
                                child=child, gates=gates)

        return decorate

    def map_step(self, *, over: str | Step[Any, Any], batch_size: int = 50,
                 fan_out: bool = False, atomic: bool = True, reactor: Reactor | None = None,
                 chunk_size: int | None = None,
                 name: str | None = None, retries: Retry | None = None,
                 timeout: float | None = None, when: Callable[..., Any] | None = None,
                 after: After = (), gates: Sequence[Any] = ()) -> MapDecorator:
        """Declare a step that runs its function once per element of `over` (an input field or
        an earlier step whose value is a list/tuple); the first parameter receives the element.

        Elements start in index order, at most `batch_size` at once: inline in the run's process,
        or with `fan_out=True` in worker jobs of a chunk of consecutive elements each (each
        element still settled on its own). `atomic=True`: an element's failure fails the
        map and rolls back the completed elements; `atomic=False`: the map completes with every
        element's outcome. With `reactor=`, each element runs that child reactor (the function
        returns the element's child inputs). See [Maps](maps.md). Returns a decorator that
        makes an `rf.MapStep`.

        Args:
            over: An input field's name, or an earlier step (name or handle) whose value is a
                list or tuple.
            batch_size: The most elements in flight at once.
            fan_out: Run the elements in worker jobs instead of inline (a map inside an
                element reactor runs inline in its element either way).
            atomic: Fail the map on an element's failure (rolling back the completed
                elements); `False` completes it with every element's outcome.
            reactor: A child reactor run once per element inside the run (a flattened child,
                like `compose`; a map inside it runs inline in the element).
            chunk_size: With `fan_out=True`, how many consecutive elements one worker job
                carries (1 to `batch_size`); None (the default) sizes chunks from the measured
                element cost. See [Maps](maps.md#chunks).
            name: The step's name (default: the function's name).
            retries: An `rf.Retry` policy per element (not with `reactor=`).
            timeout: Seconds each element's attempt may take (not with `reactor=`).
            when: A predicate wired like a step; the map is `skipped` when it is false.
            after: Ordering-only dependencies: step names or `rf.Step` handles.
            gates: Gates the map holds while its elements run; see [Gates](gates.md).

        Raises:
            DefinitionError: A bad option, `reactor=` that is not a reactor, or `reactor=`
                with `retries` or `timeout`.
        """
        if reactor is not None and not isinstance(reactor, Reactor):
            raise DefinitionError(f"reactor {self.name!r}: map_step(reactor={reactor!r}) must "
                                  "be a rf.Reactor, or None", reactor=self.name)
        if reactor is not None and (retries is not None or timeout is not None):
            raise DefinitionError(
                f"reactor {self.name!r}: map_step(reactor=...) takes no retries or timeout: an "
                "element reactor is never retried as a whole; declare them on its steps",
                reactor=self.name)
        options = dict(over=over, batch_size=batch_size, fan_out=fan_out, atomic=atomic,
                       reactor=reactor, chunk_size=chunk_size)

        def decorate(f: Any) -> Any:
            return self._record(f, StepKind.MAP, name=name, retries=retries, timeout=timeout,
                                when=when, after=after, child=reactor, mapping=options,
                                gates=gates)

        return decorate

    def async_reactor(self, child: Reactor, *, name: str | None = None,
                      when: Callable[..., Any] | None = None, after: After = (),
                      gates: Sequence[Any] = (), **unsupported: Any) -> StepDecorator:
        """Declare a step that starts `child` as a run of its own in a worker.

        The child run has the id `<run id>-<step>` (`-r<n>` once the step was rewound n times),
        is linked to this run and never rolled back
        with it; the function returns the child's inputs (validated at dispatch), the step's
        result is the child's value. See [Workers](workers.md#async-child-reactors). (Inside an
        element reactor its child runs in the element instead, with no run of its own: see
        [Maps](maps.md#element-reactors).)

        Args:
            child: The reactor to start.
            name: The step's name (default: the function's name).
            when: A predicate wired like a step; the step is `skipped` when it is false.
            after: Ordering-only dependencies: step names or `rf.Step` handles.
            gates: Gates the step holds while it runs (`rf.Lock`, `rf.Semaphore`,
                `rf.RateLimit`, `rf.Period`, `rf.OrderedLock`); see [Gates](gates.md).

        Raises:
            DefinitionError: `child` is not a reactor, or an option this kind of step does not
                take was given.
        """
        self._check_child(child, "async_reactor", unsupported, nested=False)

        def decorate(f: Any) -> Any:
            return self._record(f, StepKind.ASYNC_REACTOR, name=name, when=when, after=after,
                                child=child, gates=gates)

        return decorate

    def background(self, *, after: str | Step[Any, Any] | None = None,
                   before: str | Step[Any, Any] | None = None) -> None:
        """Declare this reactor's one hand-off point: from there on the run continues in a
        worker. See [Workers](workers.md#a-hand-off-point-background).

        Args:
            after: Once this step completes, the caller starts nothing new.
            before: The caller stops when this step is ready, and the worker runs it.

        Raises:
            DefinitionError: Not exactly one of `after`/`before`, a step not declared before
                the call or that is an interrupt, with `always_dispatch=True`, or a second,
                different hand-off point (declaring the same one again is accepted).
        """
        where = f"reactor {self.name!r}: background()"
        if (after is None) == (before is None):
            raise DefinitionError(f"{where} takes exactly one of after= or before=",
                                  reactor=self.name)
        side: Literal["after", "before"] = "after" if after is not None else "before"
        target = after if after is not None else before
        step = target.name if isinstance(target, Step) else target
        if self.handoff == (side, step):
            return  # the same point declared again (a module reloaded): nothing changes
        if self.handoff is not None:
            raise DefinitionError(f"{where} was already declared ({self.handoff[0]}="
                                  f"{self.handoff[1]!r}); a reactor has one hand-off point",
                                  reactor=self.name)
        if self.always_dispatch:
            raise DefinitionError(f"{where}: this reactor has always_dispatch=True, so all of it "
                                  "already runs in a worker", reactor=self.name)
        spec = self.steps.get(str(step))
        if spec is None:
            raise DefinitionError(f"{where}: {side}={step!r} is not a step declared so far "
                                  f"(steps: {', '.join(self.steps) or 'none'})",
                                  reactor=self.name, step=str(step))
        if spec.kind is StepKind.INTERRUPT:
            raise DefinitionError(
                f"{where}: {side}={step!r} names an interrupt; to resume an interrupt in a worker "
                "declare it with resume='background'", reactor=self.name, step=spec.name)
        self.table.handoff = (side, spec.name)
        naming.bump()

    def _attach_handler(self, step_name: str, kind: HandlerKind, fn: Callable[..., Any]) -> None:
        declare.attach_handler(self.table, step_name, kind, fn)

    # -- internals -----------------------------------------------------------------------------

    def _record(self, fn: Any, kind: StepKind, *, after: After, **options: Any) -> Any:
        """Record a step in the table (`declare.record_step`); the handle that names it."""
        spec = declare.record_step(self.table, fn, kind, after=after_names(after), **options)
        handle = MapStep if spec.map is not None else Step
        return handle(self, spec.name, fn)

    def _check_child(self, child: Reactor, what: str, unsupported: dict[str, Any],
                     *, nested: bool) -> None:
        if unsupported:
            hint = (" A child reactor is never retried as a whole: declare retries on its steps."
                    if "retries" in unsupported else "")
            raise DefinitionError(
                f"reactor {self.name!r}: {what}() takes name, when, after and gates; got "
                f"{', '.join(sorted(unsupported))}.{hint}",
                reactor=self.name,
            )
        if not isinstance(child, Reactor):
            raise DefinitionError(f"reactor {self.name!r}: {what}() needs a rf.Reactor, got "
                                  f"{child!r}", reactor=self.name)
        if nested and (child is self or self in checks.composed_tree(child)):
            raise DefinitionError(f"reactor {self.name!r} cannot compose {child.name!r}: that "
                                  "would nest the reactor inside itself", reactor=self.name)
