"""`reactorflow graph REACTOR [--version N]`: print a reactor's graph as a Mermaid flowchart.

The reactor is named as everywhere else (`ops.orders`, with its module given by --app or
REACTORFLOW_APP), or as `module:variable`. An unknown name lists the declared reactors; the
graph is the newest version's unless --version names another declared one.
"""

from __future__ import annotations

import sys

import click

from reactorflow.cli.context import import_apps, modules
from reactorflow.definition import registry
from reactorflow.definition.reactor import Reactor
from reactorflow.errors import ReactorflowError


def declared_list() -> str:
    return ", ".join(sorted(registry.names())) or "none"


def find_reactor(target: str, apps: tuple[str, ...], version: int | None = None) -> Reactor:
    """The reactor named `target` (after importing `apps`), or `module:variable`, at `version`
    (None: the newest declared for a name, the variable's own for `module:variable`).

    Raises:
        ReactorflowError: No such reactor (the message lists the declared ones), or no such
            version of it (the message lists its declared versions).
    """
    found = _find(target, apps)
    if version is None or version == found.version:
        return found
    other = registry.lookup(found.name, version)
    if other is None:
        listed = ", ".join(str(v) for v in registry.versions(found.name)) or str(found.version)
        raise ReactorflowError(f"reactor {found.name!r} has no version {version} in the "
                               f"modules loaded (they declare version(s) {listed}); give one "
                               "of these, or the module that declares it with --app")
    return other


def _find(target: str, apps: tuple[str, ...]) -> Reactor:
    import_apps(modules(apps))
    declared = registry.lookup(target)
    if declared is not None:
        return declared
    module_name, sep, attribute = target.partition(":")
    if not sep:
        hint = ("" if apps or registry.names() else
                "; name the module that declares it with --app MODULE (or REACTORFLOW_APP), "
                "or give it as module:variable")
        raise ReactorflowError(f"no reactor {target!r}; the declared reactors: "
                                 f"{declared_list()}{hint}")
    if not module_name or not attribute:
        raise click.BadParameter("give a reactor's name (with --app MODULE), or module:variable "
                                 "such as my_app.flows:checkout", param_hint="REACTOR")
    import_apps([module_name])
    module = sys.modules[module_name]
    found = getattr(module, attribute, None)
    if isinstance(found, Reactor):
        return found
    variables = sorted(name for name, value in vars(module).items() if isinstance(value, Reactor))
    what = f"it is a {type(found).__name__}" if hasattr(module, attribute) else "no such name"
    raise ReactorflowError(
        f"{module_name}:{attribute} is not an rf.Reactor ({what}); the reactors of "
        f"{module_name}: {', '.join(variables) or 'none'} (declared reactors: "
        f"{declared_list()})")


@click.command("graph")
@click.argument("target", metavar="REACTOR")
@click.option("--app", "apps", metavar="MODULE", multiple=True,
              help="A module that declares reactors (repeatable; or REACTORFLOW_APP).")
@click.option("--version", type=click.IntRange(min=1), metavar="N",
              help="The graph of this declared version (default: the newest).")
def graph_command(target: str, apps: tuple[str, ...], version: int | None) -> None:
    """Print the graph of REACTOR as Mermaid: its name (declared by an --app module) or
    module:variable."""
    click.echo(find_reactor(target, apps, version).to_mermaid())
