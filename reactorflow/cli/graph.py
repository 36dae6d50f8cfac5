"""`reactorflow graph REACTOR`: print a reactor's graph as a Mermaid flowchart.

The reactor is named as everywhere else (`ops.orders`, with its module given by --app or
REACTORFLOW_APP), or as `module:variable`. An unknown name lists the declared reactors.
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


def find_reactor(target: str, apps: tuple[str, ...]) -> Reactor:
    """The reactor named `target` (after importing `apps`), or `module:variable`.

    Raises:
        ReactorflowError: No such reactor (the message lists the declared ones).
    """
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
def graph_command(target: str, apps: tuple[str, ...]) -> None:
    """Print the graph of REACTOR as Mermaid: its name (declared by an --app module) or
    module:variable."""
    click.echo(find_reactor(target, apps).to_mermaid())
