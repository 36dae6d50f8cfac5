"""`reactorflow graph module:reactor`: print a reactor's graph as a Mermaid flowchart."""

from __future__ import annotations

import sys

import click

from reactorflow.cli.context import import_apps
from reactorflow.definition.reactor import Reactor
from reactorflow.errors import ReactorflowError


@click.command("graph")
@click.argument("target", metavar="MODULE:REACTOR")
def graph_command(target: str) -> None:
    """Print the graph of the reactor REACTOR (a name in MODULE) as Mermaid."""
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise click.BadParameter("give it as module:reactor, e.g. my_app.flows:checkout",
                                 param_hint="MODULE:REACTOR")
    import_apps([module_name])
    reactor = getattr(sys.modules[module_name], attribute, None)
    if not isinstance(reactor, Reactor):
        raise ReactorflowError(f"{module_name}.{attribute} is not an rf.Reactor (found "
                               f"{type(reactor).__name__})")
    click.echo(reactor.to_mermaid())
